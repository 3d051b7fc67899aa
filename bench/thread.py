#!/usr/bin/env python3
"""Benchmark of `git nerve thread` (issue 4). Prints figures; asserts nothing.

One bus holds two threads with the same kind of rounds (content of 800-1,200
characters plus a little metadata): one of 100,000 rounds, one of 10. For
each, the median time of the service call behind the command (select, load,
render: :func:`git_nerve.thread.service.view` + ``render()``, no process
start-up) is measured side by side, for

1. the default query (round 1 + the newest rounds within the budget), and
2. a ``--before`` query (100,000 rounds: ``--before 50000``; 10 rounds:
   ``--before 10``), each filling about the same budget,

and printed as a ratio big/small (goal: at most 2, the cost must not grow
with the thread's length). "view only" leaves out the rendering (YAML), to
show the bus query alone.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/thread.py [--rounds 100000] [--repeat 300] [--budget 8000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import median_seconds  # noqa: E402
from git_nerve.bus import Bus, rounds  # noqa: E402
from git_nerve.thread import service  # noqa: E402

WORDS = "the agent ran the tests and fixed three files before asking for a review of the change".split()


def contents(rng: random.Random, count: int = 64) -> list[str]:
    """A pool of texts of 800-1,200 characters."""
    pool = []
    for _ in range(count):
        target, words, length = rng.randint(800, 1200), [], 0
        while length < target:
            words.append(rng.choice(WORDS))
            length += len(words[-1]) + 1
        pool.append(" ".join(words))
    return pool


def fill(bus: Bus, thread: str, n: int, rng: random.Random, pool: list[str]) -> None:
    batch = 10_000
    for start in range(0, n, batch):
        with bus.write() as conn:
            for i in range(start, min(n, start + batch)):
                rounds.append(
                    conn, thread, role=rng.choice(("coder", "tester", "reviewer")), content=rng.choice(pool),
                    metadata={"exit_code": rng.randint(0, 1), "step": i + 1}, ts=1_700_000_000.0 + i,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--budget", type=int, default=service.DEFAULT_BUDGET)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-thread-") as tmp:
        bus = Bus(Path(tmp) / "bus.db")
        rng = random.Random(4)
        t0 = time.perf_counter()
        pool = contents(rng)
        fill(bus, "small", 10, rng, pool)
        fill(bus, "big", args.rounds, rng, pool)
        print(f"bus: {args.rounds:,} + 10 rounds written in {time.perf_counter() - t0:.1f} s "
              f"({(Path(tmp) / 'bus.db').stat().st_size / 1e6:.0f} MB)")

        def query(thread: str, before: int | None, render: bool):
            if render:
                return lambda: service.view(bus, thread, before=before, budget=args.budget).render()
            return lambda: service.view(bus, thread, before=before, budget=args.budget)

        half = args.rounds // 2
        for name, before_big, before_small in (("default", None, None), ("--before", half, 10)):
            shown_big = len(service.view(bus, "big", before=before_big, budget=args.budget).rounds)
            shown_small = len(service.view(bus, "small", before=before_small, budget=args.budget).rounds)
            for what, render in (("view+render", True), ("view only", False)):
                big, small = query("big", before_big, render), query("small", before_small, render)
                # warm up, then alternate in blocks so drift hits both sides alike
                big(), small()
                b_times, s_times = [], []
                for _ in range(10):
                    b_times.append(median_seconds(big, args.repeat // 10 or 1) * 1000)
                    s_times.append(median_seconds(small, args.repeat // 10 or 1) * 1000)
                b, s = statistics.median(b_times), statistics.median(s_times)
                print(f"{name:8} {what:11}  {args.rounds:,} rounds: {b:6.3f} ms ({shown_big} shown)   "
                      f"10 rounds: {s:6.3f} ms ({shown_small} shown)   ratio {b / s:4.2f}  (goal <= 2)")
        bus.close()


if __name__ == "__main__":
    main()
