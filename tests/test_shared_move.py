"""Moving a repository's shared state between the git remote and PostgreSQL (`git nerve init --shared X --move`,
issue 29): three clones, each its own machine, with tasks in every live state and a finished one; the move
(killed once midway, then run again); every claim and every event in the new store, none lost, none doubled; a
clone still on the old nerve.toml refused with one line; clones that pulled go on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures.repos import build
from tests import shared_support as ss
from tests.pg_support import query, team as pg_team


pytestmark = pytest.mark.real

_row = ss.row
_query = query

EXPECTED_STATES = {"a": "ASSIGNED", "b": "WORKING", "c": "IN_REVIEW", "d": "APPROVED", "e": "COMPLETED",
                   "f": "WORKING"}


def _done(work: Path, task: str) -> None:
    ss.ok(["worker", "spawn", task], work)
    ss.ok(["worker", "start", "--task", task], work)
    build.commit_file(Path(_row(work, task).worktree), f"{task}.txt", f"{task}'s work\n")
    ss.ok(["worker", "done", "--task", task], work)


def _tasks_in_every_state(one: Path, two: Path, three: Path) -> None:
    ss.ok(["worker", "spawn", "a"], one)
    ss.ok(["worker", "spawn", "b"], one)
    ss.ok(["worker", "start", "--task", "b"], one)
    _done(one, "c")
    _done(two, "d")
    ss.ok(["worker", "approve", "d"], two)
    _done(two, "e")
    ss.ok(["worker", "approve", "e"], two)
    ss.ok(["worker", "merge", "e"], two)
    ss.ok(["worker", "spawn", "f"], three)
    ss.ok(["worker", "start", "--task", "f"], three)
    ss.ok(["nerve", "post", "--task", "f", "--role", "tester", "a round before the move"], three)
    build.commit_file(Path(_row(three, "f").worktree), "f.txt", "three's work\n")
    for w in (one, two, three, one, two):
        ss.ok(["nerve", "sync"], w)


def _claims_seen(work: Path) -> dict[str, tuple]:
    """{task: (owner, last machine, state, verb, version)} as a clone's synced view holds it."""
    from git_nerve.bus import shared as cache

    with ss.bus(work) as b:
        return {c.task_id: (c.owner, c.machine, c.state, c.verb, c.seq) for c in cache.claims(b.conn)}


def _produced(work: Path, machine: str) -> list[str]:
    """The ids of every event this machine produced (what it publishes)."""
    from git_nerve.bus import shared as cache

    with ss.bus(work) as b:
        return [e["id"] for e in cache.local_events(b.conn, machine, {})[0]]


def _pull(work: Path) -> None:
    build.git(work, "pull", "-q", "--rebase", "origin", "main")


def _publish_nerve_toml(work: Path) -> None:
    build.git(work, "add", "nerve.toml")
    build.git(work, "commit", "-q", "-m", "git-nerve: shared state moved")
    _pull(work)
    build.git(work, "push", "-q", "origin", "HEAD:main")


def _refused(proc) -> None:
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, (proc.stdout, proc.stderr)
    assert "pull the new nerve.toml" in proc.stderr and "nothing changed here" in proc.stderr, proc.stderr


def test_move_from_the_git_remote_to_postgres(tmp_path, db):
    bare = ss.origin(tmp_path)
    machines = ["one", "two", "three"]
    one, two, three = ss.team(tmp_path, str(bare), machines, shared="background = false\n")
    _tasks_in_every_state(one, two, three)
    before = _claims_seen(one)
    assert {t: c[2] for t, c in before.items()} == EXPECTED_STATES
    build.git(one, "config", "nerve.database", db)
    killed = ss.run(["nerve", "init", "--shared", "postgres", "--move"], one, env={"NERVE_FAULT": "move.after-load"})
    assert killed.returncode == -9, killed
    assert 'backend = "git"' in (one / "nerve.toml").read_text()  # nerve.toml is written last
    _refused(ss.run(["nerve", "sync"], two))  # the old store is frozen already
    _refused(ss.run(["worker", "spawn", "z"], two))
    assert _row(two, "z") is None
    proc = ss.ok(["nerve", "init", "--shared", "postgres", "--move"], one)  # the rerun converges
    assert "Moved:       6 claims" in proc.stdout, proc.stdout
    text = (one / "nerve.toml").read_text()
    assert 'backend = "postgres"' in text and "remote" not in text and "127.0.0.1" not in text and "5432" not in text
    schema = ss.ok(["nerve", "init", "--shared", "postgres", "--move"], one)  # once more: nothing to move
    assert "already on postgres" in schema.stdout
    from git_nerve import nerve_toml

    schema = nerve_toml.read(one)["shared"]["schema"]
    moved = {r[0]: tuple(r[1:]) for r in _query(db, f"SELECT task_id, owner, machine, state, verb, version "
                                                     f"FROM {schema}.claims")}
    assert moved == before
    for work, machine in zip((one, two, three), machines):  # every event once: 0 lost, 0 doubled
        rows = _query(db, f"SELECT event_id, mseq FROM {schema}.events WHERE machine = '{machine}' ORDER BY mseq")
        assert sorted(r[0] for r in rows) == sorted(_produced(work, machine)), machine
        assert [r[1] for r in rows] == list(range(1, len(rows) + 1))
    proc = ss.run(["worker", "done", "--task", "f"], three)  # still on the old nerve.toml: refused, nothing pushed
    _refused(proc)
    assert _row(three, "f").state == "WORKING" and build.git(bare, "branch", "--list", "feat/f") == ""
    _publish_nerve_toml(one)
    for work in (two, three):
        _pull(work)
        build.git(work, "config", "nerve.database", db)
    ss.ok(["worker", "done", "--task", "f"], three)
    ss.ok(["worker", "spawn", "g"], two)
    ss.ok(["worker", "start", "--task", "a"], one)
    assert dict(_query(db, f"SELECT task_id, state FROM {schema}.claims WHERE task_id IN ('a', 'f', 'g')")) == \
        {"a": "WORKING", "f": "IN_REVIEW", "g": "ASSIGNED"}
    for w in (one, two, three, one, two):
        ss.ok(["nerve", "sync"], w)
    for work, machine in zip((one, two, three), machines):
        rows = _query(db, f"SELECT event_id FROM {schema}.events WHERE machine = '{machine}'")
        assert sorted(r[0] for r in rows) == sorted(_produced(work, machine)), machine
    views = [_claims_seen(w) for w in (one, two, three)]
    assert views[0] == views[1] == views[2]


def test_move_from_postgres_to_the_git_remote(tmp_path, db):
    from git_nerve.shared.move_git import GitStore

    machines = ["one", "two", "three"]
    one, two, three = pg_team(tmp_path, db, machines, background=False, listen=False)
    bare = tmp_path / "srv" / "project.git"
    _tasks_in_every_state(one, two, three)
    before = _claims_seen(one)
    assert {t: c[2] for t, c in before.items()} == EXPECTED_STATES
    killed = ss.run(["nerve", "init", "--shared", "git", "--move"], one, env={"NERVE_FAULT": "move.after-freeze"})
    assert killed.returncode == -9, killed
    _refused(ss.run(["worker", "spawn", "z"], two))  # the database refuses the old nerve.toml from now on
    assert _row(two, "z") is None
    ss.ok(["nerve", "init", "--shared", "git", "--move"], one)
    assert 'backend = "git"' in (one / "nerve.toml").read_text() and "schema" not in (one / "nerve.toml").read_text()
    snap = GitStore(one, "origin", "checker").dump()  # what the remote holds now
    assert {t: (r.owner, r.machine, r.state, r.verb, r.seq) for t, r in snap.claims.items()} == before
    for work, machine in zip((one, two, three), machines):
        ids = [e["id"] for e in snap.events.get(machine, [])]
        assert sorted(ids) == sorted(_produced(work, machine)) and len(set(ids)) == len(ids), machine
    _refused(ss.run(["worker", "done", "--task", "f"], three))
    _refused(ss.run(["nerve", "sync"], three))
    assert _row(three, "f").state == "WORKING" and build.git(bare, "branch", "--list", "feat/f") == ""
    _publish_nerve_toml(one)
    for work in (two, three):
        _pull(work)
    ss.ok(["worker", "done", "--task", "f"], three)
    ss.ok(["worker", "spawn", "z"], two)
    ss.ok(["worker", "start", "--task", "a"], one)
    for w in (one, two, three, one, two):
        ss.ok(["nerve", "sync"], w)
    snap = GitStore(one, "origin", "checker").dump()
    assert {t: r.state for t, r in snap.claims.items() if t in "afz"} == {"a": "WORKING", "f": "IN_REVIEW",
                                                                          "z": "ASSIGNED"}
    for work, machine in zip((one, two, three), machines):
        ids = [e["id"] for e in snap.events.get(machine, [])]
        assert sorted(ids) == sorted(_produced(work, machine)) and len(set(ids)) == len(ids), machine
    views = [_claims_seen(w) for w in (one, two, three)]
    assert views[0] == views[1] == views[2]
    assert build.git(bare, "branch", "--list", "feat/f").strip() == "feat/f"


def _racing_move(works: list[Path], tasks: list[str], to: str) -> tuple[list[str], list[str]]:
    """Machine two starts ``tasks`` one by one (each ASSIGNED there) through its store while machine one moves
    the shared state to ``to``; (the starts the old store took, the ones it refused)."""
    import subprocess
    import threading
    import time

    from git_nerve.errors import StoreMoved
    from git_nerve.shared import open_state

    state = open_state(Path(build.git(works[1], "rev-parse", "--path-format=absolute", "--git-common-dir")))
    object.__setattr__(state.config, "background", False)
    took, refused, begun = [], [], threading.Event()

    def starts() -> None:
        with ss.bus(works[1]) as bus:
            for i, task in enumerate(tasks):
                if i == 2:
                    begun.set()
                try:
                    state.claim(bus, task, "ASSIGNED", "WORKING", "start")
                    took.append(task)
                except StoreMoved:
                    refused.append(task)
                time.sleep(0.2)  # spread over the move's whole run
        begun.set()

    racer = threading.Thread(target=starts)
    racer.start()
    begun.wait(60)
    mover = subprocess.run([str(ss.BIN / "git-nerve"), "init", "--shared", to, "--move"], cwd=works[0],
                           capture_output=True, text=True, timeout=300, env=dict(os.environ))
    racer.join(120)
    assert mover.returncode == 0, mover.stderr
    return took, refused


@pytest.mark.parametrize("source", ["git", "postgres"])
def test_transitions_racing_the_move_are_either_carried_or_refused(tmp_path, db, source):
    """Every transition the old store took while the move ran is in the new store; every one it refused
    changed nothing there: none lost."""
    from git_nerve.shared.move_git import GitStore

    machines = ["one", "two"]
    if source == "git":
        works = ss.team(tmp_path, str(ss.origin(tmp_path)), machines, shared="background = false\n")
        build.git(works[0], "config", "nerve.database", db)
    else:
        works = pg_team(tmp_path, db, machines, background=False, listen=False)
    tasks = [f"r{i}" for i in range(60)]
    with ss.bus(works[1]) as bus:
        from git_nerve.shared import open_state

        state = open_state(Path(build.git(works[1], "rev-parse", "--path-format=absolute", "--git-common-dir")))
        object.__setattr__(state.config, "background", False)
        for task in tasks:
            state.claim(bus, task, None, "ASSIGNED", "spawn", take=True)
    took, refused = _racing_move(works, tasks, "postgres" if source == "git" else "git")
    assert sorted(took + refused) == sorted(tasks) and took and refused, (took, refused)
    assert tasks.index(refused[0]) == len(took)  # once refused, refused from then on
    if source == "git":
        from git_nerve import nerve_toml

        schema = nerve_toml.read(works[0])["shared"]["schema"]
        states = dict(_query(db, f"SELECT task_id, state FROM {schema}.claims"))
    else:
        states = {t: r.state for t, r in GitStore(works[0], "origin", "checker").dump().claims.items()}
    assert states == {t: "WORKING" if t in took else "ASSIGNED" for t in tasks}


def test_a_move_needs_a_store_to_move_from(tmp_path):
    work = build.simple(tmp_path / "solo").work
    ss.ok(["nerve", "init"], work)
    proc = ss.run(["nerve", "init", "--shared", "postgres", "--move"], work)
    assert proc.returncode == 2 and "nothing to move" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc
    proc = ss.run(["nerve", "init", "--move"], work)
    assert proc.returncode == 2 and "--move goes with --shared" in proc.stderr, proc
