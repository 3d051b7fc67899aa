"""A team of five machines on PostgreSQL through one run (issue 29): five clones of one origin, each its own
machine, on a real PostgreSQL started here (tests/pg_support.py), background syncs and listeners on. Claim
races, work with real commits, reviews and merges made by other machines than the holders, one machine cut off
from the database (a TCP proxy on 127.0.0.1 closed and opened again) while its agent keeps committing, the
database restarted mid-run, and `merge --all` on two machines at once; then the several-machines invariants:
one owner per task, every finished task merged exactly once, 0 lost or doubled events, every view equal."""

from __future__ import annotations

import json
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fixtures.repos import build
from tests import shared_support as ss
from tests.pg_support import listener_lock, query, schema_of, team
from tests.waiting import wait_until

pytestmark = pytest.mark.real

_row = ss.row
_schema = schema_of
_query = query

MACHINES = ["m1", "m2", "m3", "m4", "m5"]
CUT = "m5"  # the machine cut off from the database for a while
HOT = ["hot-0", "hot-1"]  # raced for by every machine at once


@pytest.fixture(scope="module")
def pg_server():
    from tests.pg_support import Server

    server = Server()  # this module's own (conftest's db takes it here): the test restarts it
    server.start()
    yield server
    server.remove()


class Proxy:
    """A TCP forwarder on 127.0.0.1 to the database server: the cut-off machine's only way to it. :meth:`close`
    cuts every connection through it and refuses new ones (nothing listens on its port); :meth:`open` listens on
    the same port again."""

    def __init__(self, target: int):
        self.target = target
        self.port = ss.free_port()
        self.lock = threading.Lock()
        self.server: socket.socket | None = None
        self.conns: set[socket.socket] = set()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def open(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        s.settimeout(0.1)  # the accept loop looks whether it was closed (closing wakes no accept() everywhere)
        with self.lock:
            self.server = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, s: socket.socket) -> None:
        while self.server is s:
            try:
                client, _ = s.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                if self.server is not s:
                    client.close()
                    upstream.close()
                    return
                self.conns |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        with self.lock:
            s, self.server = self.server, None
            conns, self.conns = self.conns, set()
        if s is not None:
            s.close()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()


def _commit(work: Path, task: str, n: int) -> str:
    """The task's agent commits (in its worktree: the hooks record it in the spool, the bus ingests it)."""
    wt = Path(_row(work, task).worktree)
    return build.commit_file(wt, f"{task}.txt", f"{task}'s work, take {n}\n", f"{task}: take {n}").strip()


def _done(work: Path, task: str) -> str:
    """`git worker done`: rebased onto main, pushed, in review; the tip it asked to be reviewed."""
    ss.ok(["worker", "done", "--task", task], work)
    return build.git(Path(_row(work, task).worktree), "rev-parse", "HEAD")


def _followed(work: Path, task: str) -> list[tuple]:
    """(from, to, the machine) of each move of ``task``'s row that followed another machine's transition."""
    from git_nerve.bus import messages

    with ss.bus(work) as b:
        return [(m.payload["from"], m.payload["to"], m.payload["machine"])
                for m in messages.for_task(b.conn, task, kinds=("state_change",)) if m.payload.get("machine")]


_rounds = ss.rounds_of


_merges_of = ss.merges_of


def _status(work: Path) -> dict[str, tuple[str, str]]:
    return {r["task_id"]: (r["state"], r["machine"])
            for r in json.loads(ss.ok(["worker", "status", "--json"], work).stdout)}


def _stop_listener(work: Path) -> None:
    import signal

    from git_nerve import locks

    lock = listener_lock(work)
    pid = locks.holder(lock)
    if locks.is_held(lock) and pid is not None:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not locks.is_held(lock), timeout=10, what="the listener to stop")


def _local_ids(work: Path, machine: str) -> set[str]:
    """The ids of every event this machine recorded that a sync publishes (git_nerve.bus.shared.local_events)."""
    from git_nerve.bus import shared as cache

    with ss.bus(work) as b:
        return {e["id"] for e in cache.local_events(b.conn, machine, {})[0]}


def _cached_ids(work: Path) -> dict[str, set[str]]:
    """{machine: ids of its events this clone's cache ingested}."""
    with ss.bus(work) as b:
        out: dict[str, set[str]] = {}
        for event_id, machine in b.conn.execute("SELECT event_id, machine FROM shared_events"):
            out.setdefault(machine, set()).add(event_id)
    return out


def _cached_claims(work: Path) -> dict[str, tuple]:
    from git_nerve.bus import shared as cache

    with ss.bus(work) as b:
        return {c.task_id: (c.owner, c.state, c.seq) for c in cache.claims(b.conn)}


def _events_settled(db: str, schema: str, works: dict[str, Path]) -> str:
    """'' once, after a `git nerve sync` on every machine, every event each machine recorded is in the database
    exactly once and every clone cached every other machine's events; else what is still missing (a background
    radar or a listener's follow may record something after a sync: the next round publishes it)."""
    for w in works.values():
        ss.ok(["nerve", "sync"], w)
    in_db: dict[str, set[str]] = {}
    for event_id, machine in _query(db, f"SELECT event_id, machine FROM {schema}.events"):
        in_db.setdefault(machine, set()).add(event_id)
    for m, w in works.items():
        mine = _local_ids(w, m)
        published = in_db.get(m, set())
        if mine != published:
            return f"{m}: {len(mine - published)} recorded not published, {len(published - mine)} not recorded"
    for m, w in works.items():
        cached = _cached_ids(w)
        for other in works:
            if other != m and cached.get(other, set()) != in_db.get(other, set()):
                return f"{m}'s cache of {other}'s events differs from the database"
    return ""


@dataclass
class Run:
    """The team and what the scenario did: who owns each task, its agent's commits, the tip of its last `done`."""

    works: dict[str, Path]
    db: str
    schema: str
    origin: Path
    owner: dict[str, str] = field(default_factory=dict)
    made: dict[str, list[str]] = field(default_factory=dict)  # as committed (`done` rebases them onto main)
    tips: dict[str, str] = field(default_factory=dict)
    offline: list[str] = field(default_factory=list)  # the cut-off machine's commits made while cut off


def test_five_machines_race_review_merge_lose_the_database_and_agree_at_the_end(tmp_path, db, pg_server):
    proxy = Proxy(pg_server.port)
    proxy.open()
    try:
        works = dict(zip(MACHINES, team(tmp_path, db, MACHINES)))  # background syncs and listeners on
        build.git(works[CUT], "config", "nerve.database", proxy.url(db.rsplit("/", 1)[1]))  # m5: through the proxy
        _stop_listener(works[CUT])  # (one started before would hold a direct connection)
        ss.ok(["nerve", "sync"], works[CUT])
        run = Run(works, db, _schema(works["m1"]), tmp_path / "srv" / "project.git")
        _race(run)
        _work(run)
        _cut_off(run, proxy)
        _restart(run, pg_server)
        _back(run, proxy)
        _merge_all(run)
        _invariants(run)
    finally:
        proxy.close()


def _race(run: Run) -> None:
    """Every machine spawns each hot task at once: exactly one wins, each other one is told which (exit 8)."""
    barrier = threading.Barrier(len(MACHINES))

    def race(m: str):
        out = []
        for t in HOT:
            barrier.wait()
            out.append((t, m, ss.run(["worker", "spawn", t], run.works[m])))
        return out

    with ThreadPoolExecutor(max_workers=len(MACHINES)) as pool:
        raced = [r for rs in pool.map(race, MACHINES) for r in rs]
    for t in HOT:
        won = [m for tt, m, p in raced if tt == t and p.returncode == 0]
        assert len(won) == 1, [(m, p.returncode, p.stderr) for tt, m, p in raced if tt == t]
        run.owner[t] = won[0]
        for tt, m, p in raced:
            if tt == t and m != won[0]:
                assert p.returncode == 8 and f"task {t} is held by machine {won[0]}" in p.stderr, p


def _work(run: Run) -> None:
    """Every machine at once: its own tasks and the hot ones it won, spawn/start/commit/done (m5-b stays WORKING)."""
    def work(m: str) -> None:
        w = run.works[m]
        mine = [f"{m}-a", f"{m}-b"] if m == CUT else [f"{m}-a"]
        for t in mine:
            ss.ok(["worker", "spawn", t, "-d", f"the {t} task"], w)
            run.owner[t] = m
        for t in mine + [t for t in HOT if run.owner[t] == m]:
            ss.ok(["worker", "start", "--task", t], w)
            run.made[t] = [_commit(w, t, 1)]
            if t != f"{CUT}-b":
                run.tips[t] = _done(w, t)

    with ThreadPoolExecutor(max_workers=len(MACHINES)) as pool:
        list(pool.map(work, MACHINES))
    ss.ok(["nerve", "sync"], run.works[CUT])  # what it did so far is published (its background sync may lag)


def _cut_off(run: Run, proxy: Proxy) -> None:
    """m5 cut off: its transitions fail fast and change nothing, its agent goes on committing (the hooks' records
    wait in its bus); meanwhile the others review and merge tasks they do not hold, m5's among them."""
    from git_nerve.bus import messages

    proxy.close()
    cut, task = run.works[CUT], f"{CUT}-b"
    run.offline = [_commit(cut, task, n) for n in (2, 3)]
    run.made[task] += run.offline
    proc = ss.run(["worker", "done", "--task", task], cut)
    assert proc.returncode == 5 and len(proc.stderr.splitlines()) == 1, proc
    assert "cannot reach the database" in proc.stderr and "nothing changed here" in proc.stderr, proc
    assert _row(cut, task).state == "WORKING"
    assert ss.run(["nerve", "sync"], cut).returncode == 5
    assert "database unreachable since" in ss.ok(["worker", "status"], cut).stdout
    with ss.bus(cut) as b:
        queued = [m.payload["sha"] for m in messages.for_task(b.conn, task, kinds=("commit",))]
    assert set(run.offline) <= set(queued)
    assert _query(run.db, f"SELECT count(*) FROM {run.schema}.events WHERE kind = 'commit' AND payload->>'sha' = "
                          "ANY(%s)", (run.offline,)) == [(0,)]
    for m, w in run.works.items():
        if m != CUT:
            ss.ok(["nerve", "sync"], w)
    ss.ok(["worker", "approve", f"{CUT}-a", "--comment", "approved by m1"], run.works["m1"])
    merged = ss.ok(["worker", "merge", f"{CUT}-a"], run.works["m2"])
    assert f"Held by machine {CUT}" in merged.stdout and "(pushed)" in merged.stdout, merged.stdout
    ss.ok(["worker", "request-changes", "m2-a", "--comment", "say it twice"], run.works["m4"])
    wait_until(lambda: _row(run.works["m2"], "m2-a").state == "WORKING", timeout=30,
               what="m2's listener to follow m4's request for changes")
    run.made["m2-a"].append(_commit(run.works["m2"], "m2-a", 2))


def _restart(run: Run, pg_server) -> None:
    """The database restarted mid-run (m5 still cut off): a transition meanwhile fails and changes nothing; then
    the work goes on."""
    m2 = run.works["m2"]
    pg_server.stop()
    try:
        proc = ss.run(["worker", "done", "--task", "m2-a"], m2)
        assert proc.returncode == 5 and "nothing changed here" in proc.stderr, proc
        assert _row(m2, "m2-a").state == "WORKING"
    finally:
        pg_server.start()
    run.tips["m2-a"] = _done(m2, "m2-a")
    # the comment travels in m4's published events (its background sync), which may come after the claim moved
    wait_until(lambda: ("reviewer", "say it twice", "m4") in _rounds(m2, "m2-a"), timeout=30,
               what="m4's comment in m2-a's thread")
    assert _rounds(m2, "m2-a").count(("reviewer", "say it twice", "m4")) == 1
    ss.ok(["worker", "approve", "m1-a", "--comment", "approved by m3"], run.works["m3"])


def _back(run: Run, proxy: Proxy) -> None:
    """m5 back: its task goes to review; approved by m1 and merged by m2 while it was away, its other task's row
    follows both steps (not stuck IN_REVIEW), and its sync cleans up its worktree."""
    proxy.open()
    cut = run.works[CUT]
    run.tips[f"{CUT}-b"] = _done(cut, f"{CUT}-b")
    ss.ok(["nerve", "sync"], cut)
    assert _row(cut, f"{CUT}-a").state == "COMPLETED"
    assert _followed(cut, f"{CUT}-a") == [("IN_REVIEW", "APPROVED", "m1"), ("APPROVED", "COMPLETED", "m2")]
    assert _rounds(cut, f"{CUT}-a").count(("reviewer", "approved by m1", "m1")) == 1  # the comment: once
    assert not Path(_row(cut, f"{CUT}-a").worktree).exists()  # the sync cleaned it up as a merge would (issue 36)
    cleaned = ss.ok(["worker", "merge", f"{CUT}-a"], cut)
    assert "already COMPLETED" in cleaned.stdout, cleaned.stdout


def _merge_all(run: Run) -> None:
    """Every task still in review approved by the next machine; `merge --all` on m3 and m4 at once merges each
    of them, by one of the two runs."""
    for w in run.works.values():
        ss.ok(["nerve", "sync"], w)
    for (t,) in _query(run.db, f"SELECT task_id FROM {run.schema}.claims WHERE state = 'IN_REVIEW' ORDER BY 1"):
        reviewer = MACHINES[(MACHINES.index(run.owner[t]) + 1) % len(MACHINES)]
        ss.ok(["worker", "approve", t], run.works[reviewer])
    start = threading.Barrier(2)

    def merge_all(m: str):
        start.wait()
        return ss.run(["worker", "merge", "--all", "--json"], run.works[m], timeout=300)

    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(zip(("m3", "m4"), pool.map(merge_all, ("m3", "m4"))))
    reported = []
    for m, p in runs.items():
        assert p.returncode == 0, (m, p.stdout, p.stderr)
        reported += [r["task_id"] for r in json.loads(p.stdout)["merged"]]
    assert sorted(reported) == sorted(set(run.tips) - {f"{CUT}-a"}), reported


def _invariants(run: Run) -> None:
    db, schema = run.db, run.schema
    settled = wait_until(lambda: _events_settled(db, schema, run.works) == "" or None, timeout=60, fail=False)
    assert settled is not None, _events_settled(db, schema, run.works)  # 0 lost, every cache has every event
    claims = {t: (o, s) for t, o, s in _query(db, f"SELECT task_id, owner, state FROM {schema}.claims")}
    assert claims == {t: (run.owner[t], "COMPLETED") for t in run.owner}  # one owner each, every task finished
    assert _query(db, f"SELECT task_id FROM {schema}.transitions GROUP BY 1 HAVING count(DISTINCT owner) <> 1") == []
    subjects = build.git(run.origin, "log", "--format=%s", "main").splitlines()
    for t, tip in run.tips.items():
        assert len(_merges_of(run.origin, tip)) == 1, t  # exactly one merge commit on main, the tip its second parent
        takes = [f"{t}: take {n}" for n in range(len(run.made[t]), 0, -1)]
        assert [s for s in subjects if s.startswith(f"{t}: ")] == takes, t  # its commits on main, once each
    for m in MACHINES:  # each machine's events numbered with no gap and no repeat, as many as it published
        assert _query(db, f"SELECT count(*), count(DISTINCT mseq), COALESCE(max(mseq), 0) FROM {schema}.events "
                          "WHERE machine = %s", (m,)) == \
            _query(db, f"SELECT published, published, published FROM {schema}.machines WHERE machine = %s", (m,))
    assert _query(db, f"SELECT machine, payload->>'sha' FROM {schema}.events WHERE kind = 'commit' "
                      "GROUP BY 1, 2 HAVING count(*) <> 1") == []  # no commit recorded twice by any machine
    offline = sorted(run.offline)  # the cut-off machine's commits made while cut off: in every view, once
    assert sorted(sha for (sha,) in _query(db, f"SELECT payload->>'sha' FROM {schema}.events WHERE kind = 'commit' "
                                               "AND machine = %s", (CUT,)) if sha in offline) == offline
    for m, w in run.works.items():
        if m != CUT:
            with ss.bus(w) as b:
                rows = b.conn.execute("SELECT payload FROM shared_events WHERE kind = 'commit' AND machine = ?", (CUT,))
                assert sorted(s for s in (json.loads(p)["sha"] for (p,) in rows) if s in offline) == offline, m
    db_claims = {t: (o, s, v) for t, o, s, v in
                 _query(db, f"SELECT task_id, owner, state, version FROM {schema}.claims")}
    for m, w in run.works.items():  # every view of every claim equal to the database's
        assert _cached_claims(w) == db_claims, m
        assert _status(w) == {t: (s, o) for t, (o, s, _v) in db_claims.items()}, m
