#!/usr/bin/env python3
"""Benchmark of shared mode (issue 24). Prints figures; asserts nothing.

For 4, 8 and 16 clones of one bare remote (each its own machine), side by side in one run:

1. the uncontended compare-and-set of a claim (one transition pushed), over file:// and over `git daemon`
   on 127.0.0.1 (median of --runs): a spawn's (it fetches the archive refs first) and a start's;
2. every clone publishing --events bus messages, then one sync round (each clone once, in turn): the time of
   a first sync that ingests everyone's events, and of a sync when nothing changed;
3. the check that each clone ingested exactly the others' events (lost / duplicated printed);
4. a sync when nothing changed, with 5,000 finished tasks and 50 machines' logs on the remote: with the 5,000
   claim refs live (as before archiving), then after this machine archived them (the far machines' leases ran
   out), on a machine that joined after, and as the whole `git nerve sync` command.

Run from the repository root with the venv's interpreter (tens of seconds):
    .venv/bin/python bench/shared.py [--sizes 4,8,16] [--runs 5] [--events 50]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos import build  # noqa: E402
from tests import shared_support as ss  # noqa: E402


def _state(work: Path):
    from git_nerve.shared import open_state

    common = Path(build.git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    return open_state(common)


def _cas_ms(work: Path, runs: int, prefix: str) -> tuple[float, float]:
    """Median ms of one claim's compare-and-set pushed alone: a new task's (spawn: the archive refs are fetched
    first, so that a finished task's id is never taken again), then its start (the CAS alone)."""
    state = _state(work)
    spawns, starts = [], []
    with ss.bus(work) as bus:
        for i in range(runs):
            t0 = time.perf_counter()
            state.claim(bus, f"{prefix}-{i}", None, "ASSIGNED", "spawn", take=True)
            spawns.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            state.claim(bus, f"{prefix}-{i}", "ASSIGNED", "WORKING", "start")
            starts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(spawns), statistics.median(starts)


def _publish(work: Path, machine: str, events: int) -> None:
    from git_nerve import clock
    from git_nerve.bus import messages

    with ss.bus(work) as bus, bus.write() as conn:
        for i in range(events):
            messages.publish(conn, None, "note", {"from": machine, "n": i}, clock.now())


def _sync_round(works: list[Path]) -> list[float]:
    times = []
    for w in works:
        state = _state(w)
        with ss.bus(w) as bus:
            t0 = time.perf_counter()
            state.sync(bus)
            times.append((time.perf_counter() - t0) * 1000)
    return times


def _counts(works: list[Path], machines: list[str]) -> tuple[int, int]:
    """(events lost, events duplicated) over every clone's ingest."""
    from git_nerve.bus import shared as cache

    produced = {}
    for m, w in zip(machines, works):
        with ss.bus(w) as bus:
            produced[m] = cache.local_count(bus.conn)
    lost = dup = 0
    for m, w in zip(machines, works):
        with ss.bus(w) as bus:
            got = cache.event_counts(bus.conn)
        for o in machines:
            if o != m:
                lost += max(0, produced[o] - got.get(o, 0))
                dup += max(0, got.get(o, 0) - produced[o])
    return lost, dup


def _git_floor_ms(work: Path, runs: int) -> float:
    """Median ms of one trivial git process here (a CAS runs about six): the machine's load in one figure."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        build.git(work, "rev-parse", "HEAD")
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def one_size(root: Path, n: int, runs: int, events: int) -> None:
    bare = ss.origin(root)
    daemon = ss.Daemon(bare.parent)
    daemon.start()
    try:
        machines = [f"m{i:02d}" for i in range(n)]
        works = ss.team(root, str(bare), machines, init=False)
        file_ms = _cas_ms(works[0], runs, "file")
        build.git(works[1], "remote", "set-url", "origin", daemon.url("project.git"))
        daemon_ms = _cas_ms(works[1], runs, "daemon")
        build.git(works[1], "remote", "set-url", "origin", str(bare))
        for m, w in zip(machines, works):
            _publish(w, m, events)
        first = _sync_round(works)  # each publishes; later ones already see the earlier ones' logs
        full = _sync_round(works)  # everyone ingests everyone
        idle = _sync_round(works)  # nothing changed
        lost, dup = _counts(works, machines)
        floor = _git_floor_ms(works[0], runs)
        print(f"{n:>3} clones | one git process {floor:5.1f} ms | CAS spawn/start file:// {file_ms[0]:5.1f}/{file_ms[1]:5.1f} ms  "
              f"git daemon {daemon_ms[0]:5.1f}/{daemon_ms[1]:5.1f} ms | "
              f"sync publish {statistics.median(first):6.1f} ms  ingest {statistics.median(full):6.1f} ms  "
              f"idle {statistics.median(idle):6.1f} ms (median per clone) | lost {lost} duplicated {dup}")
    finally:
        daemon.stop()


def _fast_import(bare: Path, tasks: int, machines: int) -> None:
    """``tasks`` finished tasks' claim chains (one record each) and ``machines`` machines' logs (one batch of
    20 events each) written straight into the bare remote by `git fast-import`."""
    import json

    out = []
    mark = 0

    def commit(ref: str, name: str, data: bytes) -> None:
        nonlocal mark
        mark += 1
        out.append(b"blob\nmark :%d\ndata %d\n%s\n" % (mark, len(data), data))
        out.append(b"commit %s\ncommitter git-nerve <git-nerve@localhost> 1700000000 +0000\ndata 6\nrecord\n"
                   b"M 100644 :%d %s\n\n" % (ref.encode(), mark, name.encode()))

    for i in range(tasks):
        rec = {"task": f"done-{i}", "state": "COMPLETED", "previous": "APPROVED", "verb": "merge",
               "machine": f"far{i % machines:02d}", "owner": f"far{i % machines:02d}", "seq": 6, "ts": 1.0}
        commit(f"refs/nerve/claims/done-{i}", "record.json", json.dumps(rec).encode())
    for m in range(machines):
        events = b"".join(json.dumps({"id": f"far{m:02d}:m{k}", "machine": f"far{m:02d}", "ts": 1.0, "task": None,
                                      "kind": "note", "payload": {}}).encode() + b"\n" for k in range(20))
        commit(f"refs/nerve/log/far{m:02d}", "events.jsonl", events)
    import subprocess

    subprocess.run(["git", "fast-import", "--quiet"], cwd=bare, input=b"".join(out), check=True)
    subprocess.run(["git", "pack-refs", "--all"], cwd=bare, check=True)  # as a server's gc keeps them


def scale(root: Path, tasks: int, machines: int, runs: int) -> None:
    """The issue's scale figure: a sync when nothing changed, with ``tasks`` finished tasks and ``machines`` logs,
    before the claims are archived (5,000 claim refs on the remote) and after (the same tasks in archive refs)."""
    bare = ss.origin(root)
    (work,) = ss.team(root, str(bare), ["here"], init=False, shared="background = false\n")
    _fast_import(bare, tasks, machines)
    state = _state(work)
    with ss.bus(work) as bus:
        with _as_before():  # the figures as they were before archiving and the ls-remote check existed
            live = _ms(lambda: state.sync(bus))  # observes the 50 machines' logs
            loose = _idle_ms(state, bus, runs)
            build.git(work, "pack-refs", "--all")  # as `git gc` leaves them
            packed = _idle_ms(state, bus, runs)
        print(f"scale: {tasks} finished tasks' claim refs live, {machines} machines' logs | first sync {live:7.1f} ms | "
              f"sync with nothing changed, as before (no archive, a fetch each time): {loose:6.1f} ms (the clone's refs "
              f"loose), {packed:6.1f} ms (packed)")
        time.sleep(0.01)  # the far machines' leases (0.001 s for this one sync) ran out: it archives their claims
        archiver, syncs, archived = _with_lease(state, 0.001), [], 0
        while True:  # a backlog drains over several syncs, each archiving at most archive.BATCH claims
            t0 = time.perf_counter()
            n = archiver.sync(bus)["archived"]
            syncs.append((time.perf_counter() - t0) * 1000)
            archived += n
            if not n:
                break
        after = _idle_ms(state, bus, runs)
        left = len(build.git(bare, "for-each-ref", "refs/nerve/claims/").splitlines())
        t0 = time.perf_counter()
        rebuilt = state.sync(bus, rebuild=True)
        rebuild_ms = (time.perf_counter() - t0) * 1000
    fresh = ss.clone(root, str(bare), "joiner")
    ss.ok(["nerve", "init"], fresh)
    joiner = _state(fresh)
    with ss.bus(fresh) as bus:
        first_ms = _ms(lambda: joiner.sync(bus))
        joined = _idle_ms(joiner, bus, runs)
    cli = _cli_ms(fresh, runs)
    print(f"scale: archived {archived} claims over {len(syncs) - 1} syncs, {sum(syncs):7.1f} ms in all, the longest "
          f"{max(syncs):6.1f} ms ({left} claim refs left) | "
          f"sync with nothing changed: {after:6.1f} ms here, {joined:6.1f} ms on a machine that joined after "
          f"(its first sync {first_ms:7.1f} ms), `git nerve sync` command {cli:6.1f} ms | --rebuild {rebuild_ms:7.1f} ms "
          f"({rebuilt['claims']} claims) (medians of {runs}; goal < 500 ms)")


def _with_lease(state, seconds: float):
    from dataclasses import replace

    from git_nerve.shared.gitremote import GitRemoteState

    return GitRemoteState(replace(state.config, lease=seconds))


@contextlib.contextmanager
def _as_before():
    """No archiving, and a fetch at every sync (as before the ls-remote "nothing changed" check)."""
    from git_nerve.shared import archive, sync

    real, archive.archive = archive.archive, lambda *a: []
    behind, sync._behind = sync._behind, lambda *a: True
    try:
        yield
    finally:
        archive.archive, sync._behind = real, behind


def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _cli_ms(work: Path, runs: int) -> float:
    """Median ms of the whole `git nerve sync` command (a new process: Python start-up included)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ss.ok(["nerve", "sync"], work)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _idle_ms(state, bus, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        state.sync(bus)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4,8,16")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--events", type=int, default=50)
    ap.add_argument("--scale", default="5000,50", help="TASKS,MACHINES for the idle-sync figure ('' to skip)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-bench-shared-") as tmp:
        os.environ.update(build.hermetic_env(Path(tmp) / "home"))
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        for n in (int(s) for s in args.sizes.split(",") if s):
            one_size(Path(tmp) / f"n{n}", n, args.runs, args.events)
        if args.scale:
            tasks, machines = (int(x) for x in args.scale.split(","))
            scale(Path(tmp) / "scale", tasks, machines, args.runs)


if __name__ == "__main__":
    main()
