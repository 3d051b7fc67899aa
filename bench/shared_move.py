#!/usr/bin/env python3
"""Benchmark of moving a repository between the shared stores (issue 29, `git nerve init --shared X --move`), and
what the move's mark costs every PostgreSQL transition. Prints figures; asserts nothing.

1. PostgreSQL transition latency, median of --runs, with the mark check every transition makes (the move's
   advisory lock taken shared, the mark read) and with it switched off in the same process, side by side;
2. the move's duration for --tasks claims (each spawned, started) and --events events on each of --clones
   clones: the git remote -> PostgreSQL, then back; lost / doubled claims and events.

Run from the repository root with the venv's interpreter (tens of seconds):
    .venv/bin/python bench/shared_move.py [--runs 30] [--clones 3] [--tasks 60] [--events 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.shared_postgres import _median_ms, _state  # noqa: E402
from bench.common import postgres_bench  # noqa: E402
from fixtures.repos import build  # noqa: E402
from tests import shared_support as ss  # noqa: E402


def _latency(work: Path, runs: int) -> tuple[float, float]:
    from git_nerve.shared import postgres_move

    state = _state(work)
    with ss.bus(work) as bus:
        checked = _median_ms(lambda i: state.claim(bus, f"lat-{i}", None, "ASSIGNED", "spawn", take=True), runs)
        real, postgres_move.refuse_moved = postgres_move.refuse_moved, lambda conn: None
        try:
            bare = _median_ms(lambda i: state.claim(bus, f"bare-{i}", None, "ASSIGNED", "spawn", take=True), runs)
        finally:
            postgres_move.refuse_moved = real
    return checked, bare


def _fill(works: list[Path], machines: list[str], tasks: int, events: int) -> None:
    from git_nerve import clock
    from git_nerve.bus import messages

    for k, (m, w) in enumerate(zip(machines, works)):
        state = _state(w)
        with ss.bus(w) as bus:
            for i in range(k, tasks, len(works)):
                state.claim(bus, f"t{i}", None, "ASSIGNED", "spawn", take=True)
                if i % 2:
                    state.claim(bus, f"t{i}", "ASSIGNED", "WORKING", "start")
            with bus.write() as conn:
                for i in range(events):
                    messages.publish(conn, None, "note", {"from": m, "n": i}, clock.now())
            state.sync(bus)


def _move(work: Path, to: str) -> float:
    t0 = time.perf_counter()
    ss.ok(["nerve", "init", "--shared", to, "--move"], work)
    return time.perf_counter() - t0


def _check(work: Path, machines: list[str], works: list[Path], tasks: int) -> tuple[int, int]:
    """(claims lost or doubled, events lost or doubled) in the store ``work``'s nerve.toml names."""
    from git_nerve.bus import shared as cache

    snap = _dump(work)
    bad_claims = abs(len(snap.claims) - tasks) + len(set(snap.claims) ^ {f"t{i}" for i in range(tasks)})
    bad_events = 0
    for m, w in zip(machines, works):
        with ss.bus(w) as bus:
            want = {e["id"] for e in cache.local_events(bus.conn, m, {})[0]}
        got = [e["id"] for e in snap.events.get(m, [])]
        bad_events += len(want ^ set(got)) + len(got) - len(set(got))
    return bad_claims, bad_events


def _dump(work: Path):
    from git_nerve.shared import config, open_state
    from git_nerve.shared.move import PgStore
    from git_nerve.shared.move_git import GitStore

    state = open_state(Path(build.git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")))
    if state.config.backend == "git":
        return GitStore(work, state.remote, "bench").dump()
    return PgStore(work, state.config.common_dir, "bench", state.config.schema or config.DEFAULT_SCHEMA).dump()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--clones", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--events", type=int, default=100)
    args = ap.parse_args()
    from tests.pg_support import team

    with postgres_bench("nerve-bench-move-") as (root, server):
        (root / "lat").mkdir()
        (lat,) = team(root / "lat", server.create_database("latency"), ["lat"], background=False)
        checked, bare = _latency(lat, args.runs)
        print(f"PostgreSQL transition latency (median of {args.runs}): with the move's mark check {checked:6.2f} ms"
              f" | without {bare:6.2f} ms | ratio {checked / bare:4.2f}x")
        machines = [f"m{i}" for i in range(args.clones)]
        works = ss.team(root, str(ss.origin(root)), machines, shared="background = false\n")
        build.git(works[0], "config", "nerve.database", server.create_database("moved"))
        _fill(works, machines, args.tasks, args.events)
        to_pg = _move(works[0], "postgres")
        pg_bad = _check(works[0], machines, works, args.tasks)
        to_git = _move(works[0], "git")
        git_bad = _check(works[0], machines, works, args.tasks)
        print(f"move of {args.tasks} claims and {args.clones}x{args.events}+ events: git remote -> PostgreSQL "
              f"{to_pg:5.2f} s (claims / events lost or doubled: {pg_bad[0]} / {pg_bad[1]}) | PostgreSQL -> git "
              f"remote {to_git:5.2f} s ({git_bad[0]} / {git_bad[1]})")


if __name__ == "__main__":
    main()
