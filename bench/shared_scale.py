#!/usr/bin/env python3
"""Benchmark of shared mode at scale (issue 36): --machines clones of one project (each its own machine), on the
git remote served by `git daemon` on 127.0.0.1 and on PostgreSQL (a real server, as the tests start it), side by
side in one run. Prints figures; asserts nothing.

Every machine runs --rounds rounds at the same time as the others, each round as an agent and its person would:
`git worker spawn`, `git worker start`, a commit in the task's worktree, `git worker done` (its branch pushed),
`git nerve sync`. Each command is a real process (`git-worker` / `git-nerve`), timed whole, as a person waits for
it. The machines share this one computer, so at most --parallel commands run at once (the machines' commands
interleave on the store; more at once measures this computer's CPU, not the store: 20 at once on two cores puts
every command at 15-30 s). Background syncs are off (`[shared] background = false`, and no PostgreSQL
listeners): the loop's own sync publishes, so the figures are the commands' and nothing else runs beside them.

Printed per backend: the transitions' wall time (spawn, start, done: each moves the task's claim on the shared
store) p50 / p99, the sync's p50 / p99, and after two final sync rounds (everyone publishes, then everyone reads)
the events lost and doubled: for each pair of machines, how many of one's events the other's cache lacks or holds
more than once (0 and 0 is the promise).

Run from the repository root with the venv's interpreter (a few minutes with the defaults on two cores):
    .venv/bin/python bench/shared_scale.py [--machines 20] [--rounds 1] [--parallel 4] [--only git|postgres]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import postgres_bench  # noqa: E402
from fixtures.repos import build  # noqa: E402
from tests import shared_support as ss  # noqa: E402

TRANSITIONS = ("spawn", "start", "done")
#: at most --parallel commands at once (set by main)
SLOTS = threading.BoundedSemaphore(4)


def _timed(args: list[str], work: Path, times: dict[str, list[float]], key: str) -> None:
    with SLOTS:
        t0 = time.perf_counter()
        proc = ss.run(args, work, timeout=600)
        times.setdefault(key, []).append((time.perf_counter() - t0) * 1000)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} on {work.name} exited {proc.returncode}: {proc.stderr.strip()[-400:]}")


def _loop(work: Path, rounds: int) -> dict[str, list[float]]:
    """One machine's rounds (see the module); {spawn, start, done, sync: [ms]}."""
    times: dict[str, list[float]] = {}
    for r in range(rounds):
        task = f"{work.name}-r{r}"
        _timed(["worker", "spawn", task, "-d", f"round {r} of {work.name}"], work, times, "spawn")
        _timed(["worker", "start", "--task", task], work, times, "start")
        wt = Path(ss.row(work, task).worktree)
        with SLOTS:
            build.commit_file(wt, f"{task}.txt", f"{task}\n")
        _timed(["worker", "done", "--task", task], work, times, "done")
        _timed(["nerve", "sync"], work, times, "sync")
    return times


def _events(works: list[Path]) -> tuple[int, int]:
    """(lost, doubled) over every ordered pair of machines, after everyone published and then read."""
    from git_nerve.bus import shared as cache

    for _ in range(2):
        for w in works:
            ss.ok(["nerve", "sync"], w)
    produced, got = {}, {}
    for w in works:
        with ss.bus(w) as bus:
            produced[w.name], got[w.name] = cache.local_count(bus.conn), cache.event_counts(bus.conn)
    names = list(produced)
    lost = sum(max(0, produced[o] - got[m].get(o, 0)) for m in names for o in names if o != m)
    doubled = sum(max(0, got[m].get(o, 0) - produced[o]) for m in names for o in names if o != m)
    return lost, doubled


def _run(works: list[Path], rounds: int) -> dict:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(works)) as pool:
        loops = list(pool.map(lambda w: _loop(w, rounds), works))
    took = time.perf_counter() - t0
    times: dict[str, list[float]] = {}
    for one in loops:
        for key, values in one.items():
            times.setdefault(key, []).extend(values)
    lost, doubled = _events(works)
    transitions = [v for k in TRANSITIONS for v in times.get(k, [])]
    return {"transition": _pcts(transitions), "sync": _pcts(times.get("sync", [])), "lost": lost,
            "doubled": doubled, "seconds": took, "commands": sum(len(v) for v in times.values())}


def _pcts(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[98]


def _git(root: Path, machines: list[str]) -> list[Path]:
    bare = ss.origin(root)
    daemon = ss.Daemon(bare.parent)
    daemon.start()
    _git.daemon = daemon  # stopped by main
    return ss.team(root, daemon.url("project.git"), machines, shared="background = false\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machines", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--parallel", type=int, default=4, help="commands running at once (default 4)")
    ap.add_argument("--only", choices=("git", "postgres"))
    args = ap.parse_args()
    from tests.pg_support import team

    global SLOTS
    SLOTS = threading.BoundedSemaphore(max(1, args.parallel))
    machines = [f"m{i:02d}" for i in range(args.machines)]
    results = {}
    with postgres_bench("nerve-bench-scale-") as (root, server):
        if args.only != "postgres":
            (root / "git").mkdir()
            try:
                results["git daemon"] = _run(_git(root / "git", machines), args.rounds)
            finally:
                getattr(_git, "daemon", None) and _git.daemon.stop()
        if args.only != "git":
            (root / "pg").mkdir()
            works = team(root / "pg", server.create_database("scale"), machines, background=False, listen=False)
            results["PostgreSQL"] = _run(works, args.rounds)
    print(f"{args.machines} machines x {args.rounds} rounds of spawn/start/commit/done/sync, all machines at once, "
          f"at most {args.parallel} commands at a time (each a real process, timed whole):")
    print(f"{'backend':<12} {'transition p50':>15} {'p99':>9} {'sync p50':>10} {'p99':>9} {'lost':>5} {'doubled':>8} "
          f"{'commands':>9} {'wall':>8}")
    for name, r in results.items():
        (tp50, tp99), (sp50, sp99) = r["transition"], r["sync"]
        print(f"{name:<12} {tp50:12.0f} ms {tp99:6.0f} ms {sp50:7.0f} ms {sp99:6.0f} ms {r['lost']:5d} "
              f"{r['doubled']:8d} {r['commands']:9d} {r['seconds']:7.1f}s")


if __name__ == "__main__":
    main()
