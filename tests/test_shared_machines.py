"""Issue 36: one name per machine, every peer's record checked, lost answers finished by a rerun, and the smaller
points (a host refusing deletions, refusals by policy named as such). Real clones of a real remote (file://, `git
daemon`); the hostile or buggy peer is a second clone (or the bare remote itself) writing refs with git plumbing."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fixtures.repos import build
from tests import shared_support as ss
from tests.shared_support import daemon  # noqa: F401  (the fixture)


def _hook(bare: Path, name: str, body: str) -> None:
    hook = bare / "hooks" / name
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\n" + body)
    hook.chmod(0o755)


def _lose_answers(bare: Path) -> None:
    """The remote takes every push, then its receive-pack dies before it answers (the connection drops)."""
    _hook(bare, "post-receive", "cat >/dev/null\nkill -9 $PPID\n")


def _answer_again(bare: Path) -> None:
    (bare / "hooks" / "post-receive").unlink()


def _tip(bare: Path, ref: str) -> str:
    return build.git(bare, "for-each-ref", "--format=%(objectname)", ref)


def _record(bare: Path, ref: str) -> dict:
    return json.loads(build.git(bare, "cat-file", "blob", f"{_tip(bare, ref)}:record.json"))


def test_a_spawn_whose_answer_was_lost_is_created_and_says_so(tmp_path):
    bare = ss.origin(tmp_path)
    (one,) = ss.team(tmp_path, str(bare), ["one"])
    _lose_answers(bare)
    proc = ss.run(["worker", "spawn", "amb1"], one)
    # the claim landed: the spawn reads it back and goes on (never "was not created" when it was)
    assert proc.returncode == 0, proc.stderr
    assert "was not created" not in proc.stderr
    assert _record(bare, "refs/nerve/claims/amb1")["owner"] == "one"
    assert ss.row(one, "amb1").state == "ASSIGNED"


def test_a_done_whose_answer_was_lost_is_finished_by_running_it_again(tmp_path):
    bare = ss.origin(tmp_path)
    (one,) = ss.team(tmp_path, str(bare), ["one"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    build.commit_file(Path(ss.row(one, "t").worktree), "t.txt", "work\n")
    _lose_answers(bare)
    proc = ss.run(["worker", "done", "--task", "t"], one)
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    assert "answer was lost" in proc.stderr and "again" in proc.stderr
    assert _record(bare, "refs/nerve/claims/t")["state"] == "IN_REVIEW"  # the remote took branch and claim
    assert build.git(bare, "rev-parse", "refs/heads/feat/t") == build.git(one, "rev-parse", "feat/t")
    _answer_again(bare)
    again = ss.run(["worker", "done", "--task", "t"], one)  # no `git nerve sync` first
    assert again.returncode == 0, again.stderr
    assert ss.row(one, "t").state == "IN_REVIEW"
    assert [r for r in [_record(bare, "refs/nerve/claims/t")]][0]["seq"] == 3  # recorded once


def test_a_done_whose_answer_and_remote_were_lost_says_it_may_have_landed_and_a_rerun_finishes(tmp_path, daemon):
    """The push lands, the connection drops, and the remote cannot be asked afterwards (gone): the rerun, once it
    is back, reads the remote first and finishes the transition (never "held by machine one", itself)."""
    bare = daemon.base / "project.git"
    (one,) = ss.team(tmp_path, daemon.url("project.git"), ["one"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    build.commit_file(Path(ss.row(one, "t").worktree), "t.txt", "work\n")
    # the remote takes the push, then the daemon itself goes before anything can ask it again
    _hook(bare, "post-receive", f"cat >/dev/null\nkill -9 {daemon.proc.pid}\nkill -9 $PPID\n")
    proc = ss.run(["worker", "done", "--task", "t"], one)
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    assert _record(bare, "refs/nerve/claims/t")["state"] == "IN_REVIEW"
    _answer_again(bare)
    daemon.proc.wait(timeout=10)
    daemon.start()
    again = ss.run(["worker", "done", "--task", "t"], one)
    assert again.returncode == 0, again.stderr
    assert ss.row(one, "t").state == "IN_REVIEW" and _record(bare, "refs/nerve/claims/t")["seq"] == 3


# -- a hostile or buggy peer: a clone writing refs/nerve/* with git plumbing ---------------------------------------
def _forge(peer: Path, ref: str, files: dict[str, str], parent: str | None = None) -> str:
    """Push one commit holding ``files`` to ``ref`` on the peer's origin (forced), as any clone can; ``parent``:
    the remote's tip of ``ref``, fetched first."""
    if parent:
        build.git(peer, "fetch", "-q", "origin", f"+{ref}:refs/forged/base")
    entries = "".join(f"100644 blob {build.git(peer, 'hash-object', '-w', '--stdin', input=body)}\t{name}\n"
                      for name, body in sorted(files.items()))
    tree = build.git(peer, "mktree", input=entries)
    commit = build.git(peer, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", "forged")
    build.git(peer, "update-ref", "refs/forged/x", commit)
    build.git(peer, "push", "-q", "-f", "origin", f"{commit}:{ref}")
    return commit


def _forge_claim(peer: Path, bare: Path, ref_task: str, **fields) -> str:
    """A claim record on top of the remote's claim of ``ref_task`` (its fields from the tip's, ``fields`` over)."""
    ref = f"refs/nerve/claims/{ref_task}"
    tip = _tip(bare, ref) or None
    base = _record(bare, ref) if tip else {"task": ref_task, "state": "ASSIGNED", "previous": None, "verb": "spawn",
                                            "machine": "evil", "owner": "evil", "seq": 0, "ts": 1.0}
    rec = {**base, "previous": base["state"], "seq": base["seq"] + 1, **fields}
    return _forge(peer, ref, {"record.json": json.dumps(rec)}, tip)


def test_a_second_clone_with_a_taken_machine_name_is_refused_before_anything_is_written(tmp_path):
    bare = ss.origin(tmp_path)
    (one,) = ss.team(tmp_path, str(bare), ["one"])
    instance = build.git(one, "config", "nerve.instance")
    assert json.loads(build.git(bare, "cat-file", "blob", "refs/nerve/machines/one:machine.json"))["instance"] == instance
    again = ss.ok(["nerve", "init"], one)  # the same clone again: its own name
    assert again.returncode == 0
    twin = tmp_path / "twin"
    build.git(tmp_path, "clone", "-q", str(bare), str(twin))
    build.git(twin, "config", "nerve.machine", "one")
    proc = ss.run(["nerve", "init"], twin)
    assert proc.returncode == 8, (proc.stdout, proc.stderr)
    line = proc.stderr.strip()
    assert "machine name one is already claimed by another clone" in line and "git config nerve.machine" in line
    assert not (twin / ".git" / "nerve" / "bus.db").exists()  # nothing written: no bus, no hooks, no config
    assert not (twin / ".git" / "hooks" / "post-commit").exists() and not (twin / "nerve.toml").is_symlink()
    assert build.git(twin, "config", "--default", "", "nerve.instance") == ""
    ss.ok(["worker", "spawn", "t1"], one)
    sync = ss.run(["nerve", "sync"], twin)  # a twin that never ran init is refused too: it never writes one's log
    assert sync.returncode == 8 and "machine name one is already claimed" in sync.stderr
    ss.ok(["nerve", "sync"], one)
    assert _tip(bare, "refs/nerve/log/one") == build.git(one, "rev-parse", "refs/nerve/log/one")


def test_two_clones_on_one_host_get_names_of_their_own(tmp_path):
    bare = ss.origin(tmp_path)
    (first,) = ss.team(tmp_path, str(bare), ["first"])
    names = []
    for n in ("a", "b"):
        work = tmp_path / f"clone-{n}"
        build.git(tmp_path, "clone", "-q", str(bare), str(work))
        ss.ok(["nerve", "init"], work)
        names.append(build.git(work, "config", "nerve.machine"))
        ss.ok(["worker", "spawn", f"task-{n}"], work)
        ss.ok(["nerve", "sync"], work)
    import re
    import socket

    from git_nerve.shared.records import machine_name

    host = machine_name(socket.gethostname())
    assert names[0] != names[1] and all(re.fullmatch(re.escape(host[:58]) + r"-[0-9a-f]{4}", n) for n in names)
    assert {f"refs/nerve/machines/{n}" for n in names} <= set(
        build.git(bare, "for-each-ref", "--format=%(refname)", "refs/nerve/machines/").split())
    ss.ok(["nerve", "sync"], first)
    rows = json.loads(ss.ok(["worker", "status", "--json"], first).stdout)
    assert sorted((r["task_id"], r["machine"]) for r in rows) == [("task-a", names[0]), ("task-b", names[1])]
    shown = json.loads(ss.ok(["worker", "show", "task-b", "--json"], first).stdout)
    assert "task_assign" in {e["kind"] for e in shown["events"]}  # the events of each reach the others


def test_a_forged_log_of_this_machines_name_is_not_adopted_and_publishing_goes_on(tmp_path):
    bare = ss.origin(tmp_path)
    one, two, evil = ss.team(tmp_path, str(bare), ["one", "two", "evil"])
    ss.ok(["worker", "spawn", "early"], one)
    ss.ok(["nerve", "sync"], one)
    old = _tip(bare, "refs/nerve/log/one")
    forged = _forge(evil, "refs/nerve/log/one", {"cursor.json": json.dumps({"m": 999999, "r": 999999}),
                                                 "events.jsonl": ""}, old)
    ss.ok(["worker", "spawn", "later"], one)
    proc = ss.ok(["nerve", "sync"], one)
    assert "was not written by this clone" in proc.stderr
    mine = build.git(one, "rev-parse", "refs/nerve/log/one")
    cursor = json.loads(build.git(one, "cat-file", "blob", f"{mine}:cursor.json"))
    assert cursor["m"] < 999999 and cursor["instance"] == build.git(one, "config", "nerve.instance")
    assert _tip(bare, "refs/nerve/log/one") == mine  # published, a fast-forward keeping the forged commit
    assert build.git(bare, "merge-base", "--is-ancestor", forged, mine) == ""
    again = ss.ok(["nerve", "sync"], one)
    assert "was not written by this clone" not in again.stderr  # reported once
    ss.ok(["nerve", "sync"], two)
    shown = json.loads(ss.ok(["worker", "show", "later", "--json"], two).stdout)
    assert "task_assign" in {e["kind"] for e in shown["events"]}


def test_claims_with_forged_task_names_are_refused_reported_once_and_warned_in_status(tmp_path):
    bare = ss.origin(tmp_path)
    one, two, evil = ss.team(tmp_path, str(bare), ["one", "two", "evil"])
    ss.ok(["worker", "spawn", "real"], one)
    for ref_task, task in (("x1", "a\nb"), ("x2", "../x"), ("x3", "other")):
        _forge_claim(evil, bare, ref_task, task=task)
    proc = ss.ok(["nerve", "sync"], two)
    assert proc.stderr.count("refused evil's record") == 3, proc.stderr
    assert "\nb" not in proc.stderr.replace("\\nb", "")
    rows = json.loads(ss.ok(["worker", "status", "--json"], two).stdout)
    assert [r["task_id"] for r in rows] == ["real"]
    status = ss.ok(["worker", "status"], two)
    assert [ln.split()[0] for ln in status.stdout.splitlines()[2:]] == ["real"]  # no forged row
    assert "3 record(s) from other machines refused here" in status.stderr
    again = ss.ok(["nerve", "sync"], two)
    assert "refused" not in again.stderr  # reported once


def test_a_peer_cannot_complete_this_machines_working_task_before_its_lease_ran_out(tmp_path):
    bare = ss.origin(tmp_path)
    one, evil = ss.team(tmp_path, str(bare), ["one", "evil"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    build.commit_file(Path(ss.row(one, "t").worktree), "t.txt", "work\n")
    ss.ok(["nerve", "sync"], one)
    _forge_claim(evil, bare, "t", state="COMPLETED", verb="merge", machine="evil")
    proc = ss.ok(["nerve", "sync"], one)
    assert "refused evil's record of t" in proc.stderr and "WORKING -> COMPLETED" in proc.stderr
    assert ss.row(one, "t").state == "WORKING"
    _forge_claim(evil, bare, "t", state="ASSIGNED", verb="takeover", machine="evil", owner="evil")
    proc = ss.ok(["nerve", "sync"], one)
    assert "before its lease ran out here" in proc.stderr
    assert ss.row(one, "t").state == "WORKING"
    ss.ok(["worker", "done", "--task", "t"], one)
    last = _record(bare, "refs/nerve/claims/t")
    assert (last["state"], last["owner"], last["machine"]) == ("IN_REVIEW", "one", "one")
    assert build.git(bare, "rev-parse", "refs/heads/feat/t") == build.git(one, "rev-parse", "feat/t")


# -- the smaller points (§8) ------------------------------------------------------------------------------------
def test_a_host_refusing_only_deletions_is_taken_in_the_degraded_mode_and_says_the_probe_stays(tmp_path):
    bare = ss.origin(tmp_path)
    _hook(bare, "pre-receive", "while read old new ref; do case $ref in refs/nerve/*) "
                               "[ $new = 0000000000000000000000000000000000000000 ] && "
                               "{ echo \"deleting $ref is not allowed\"; exit 1; };; esac; done; exit 0\n")
    work = ss.clone(tmp_path, str(bare), "alpha")
    proc = ss.run(["nerve", "init", "--shared"], work)
    assert proc.returncode == 0, proc.stderr
    assert "refuses deletions of refs/nerve/*" in proc.stderr and "finished claims stay live" in proc.stderr
    probes = build.git(bare, "for-each-ref", "--format=%(refname)", "refs/nerve/probe/").split()
    assert len(probes) == 1 and probes[0] in proc.stderr  # it stays, and init says which
    assert 'backend = "git"' in (work / "nerve.toml").read_text()
    ss.ok(["worker", "spawn", "t"], work)  # shared mode works
    assert _record(bare, "refs/nerve/claims/t")["owner"] == "alpha"


def test_a_sync_refused_by_policy_is_named_so_and_status_says_its_view_is_stale(tmp_path):
    bare = ss.origin(tmp_path)
    (one,) = ss.team(tmp_path, str(bare), ["one"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["nerve", "sync"], one)
    _hook(bare, "pre-receive", "echo 'pushes are frozen here'; exit 1\n")
    ss.ok(["nerve", "post", "--task", "t", "--role", "tester", "a round"], one)  # something new for the log
    proc = ss.run(["nerve", "sync"], one)
    assert proc.returncode == 4
    assert "origin refused the sync by policy" in proc.stderr and "pushes are frozen here" in proc.stderr
    status = ss.ok(["worker", "status"], one).stdout
    view = next(ln for ln in status.splitlines() if ln.startswith("view: "))
    assert "refused by policy since" in view and "stale" in view and "unreachable" not in view
    (bare / "hooks" / "pre-receive").unlink()
    ss.ok(["nerve", "sync"], one)
    assert "view: synced" in ss.ok(["worker", "status"], one).stdout


# -- PostgreSQL, where the code differs ---------------------------------------------------------------------------
def test_postgres_a_second_clone_with_a_taken_machine_name_is_refused(tmp_path, db):
    from tests.pg_support import query, schema_of, team

    one, _two = team(tmp_path, db, ["one", "two"], listen=False)
    rows = query(db, f"SELECT machine, instance FROM {schema_of(one)}.machine_names ORDER BY machine")
    assert rows == [("one", build.git(one, "config", "nerve.instance")), ("two", build.git(_two, "config", "nerve.instance"))]
    twin = tmp_path / "twin"
    build.git(tmp_path, "clone", "-q", str(tmp_path / "srv" / "project.git"), str(twin))
    build.git(twin, "config", "nerve.machine", "one")
    build.git(twin, "config", "nerve.database", db)
    proc = ss.run(["nerve", "init"], twin)
    assert proc.returncode == 8 and "machine name one is already claimed by another clone" in proc.stderr
    assert not (twin / ".git" / "nerve" / "bus.db").exists()
    sync = ss.run(["nerve", "sync"], twin)
    assert sync.returncode == 8 and "git config nerve.machine" in sync.stderr
    ss.ok(["nerve", "sync"], one)  # the name's own clone goes on


def test_postgres_credentials_refused_are_named_so_and_status_says_the_view_is_stale(tmp_path, db, pg_server):
    from tests.pg_support import team

    (one,) = team(tmp_path, db, ["one"], listen=False)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["nerve", "sync"], one)
    role = f"alice_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**6}"
    pg_server.psql(f"CREATE ROLE {role} LOGIN PASSWORD 'right'")
    hba = pg_server.data / "pg_hba.conf"
    hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    pg_server.psql("SELECT pg_reload_conf()")
    build.git(one, "config", "nerve.database", db.replace("postgres@", f"{role}:wrong@", 1))
    proc = ss.run(["nerve", "sync"], one)
    assert proc.returncode == 5, proc.stderr
    assert "refused this machine's credentials" in proc.stderr and "cannot reach" not in proc.stderr
    view = next(ln for ln in ss.ok(["worker", "status"], one).stdout.splitlines() if ln.startswith("view: "))
    assert "database refused this machine's credentials since" in view and "stale" in view
