#!/usr/bin/env python3
"""Benchmark of steering (issue 6). Prints figures; asserts nothing.

The drain runs on every heartbeat tick of `git worker run` and between the
rounds of `git nerve run`, so its cost must not grow with the inbox's history
(the cursor makes each drain read only what is new). Measured side by side
in one run, on one bus:

1. the stop hook's tick (open the bus, drain, close) with nothing new, on an
   inbox of 100 against 20,000 old messages                (goal: ratio <= 1.5)
2. a drain that finds one new stop, on the same two histories  (goal: ratio <= 1.5)
3. an idle drain against one heartbeat (`heartbeat.record`), the other work of a tick,
   both on an open bus (the hook also opens its own connection: figure 1)
4. `tell` of a note (queue + thread round, one transaction)

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/steer.py [--runs 300] [--history 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import median_seconds  # noqa: E402
from git_nerve import clock
from git_nerve.bus import steer, workers
from git_nerve.bus.connection import Bus
from git_nerve.steer.drain import drain, task_consumer
from git_nerve.steer.tell import tell
from git_nerve.worker.heartbeat import record


def make_bus(path: Path, history: int) -> None:
    """A bus with tasks t1..t50 and ``history`` old messages (all drained by t1 already)."""
    with Bus(path) as bus:
        ts = clock.now() - 3600
        with bus.write() as conn:
            for i in range(1, 51):
                workers.insert(conn, workers.Worker(
                    task_id=f"t{i}", state="WORKING", branch=f"feat/t{i}", worktree=f"/w/t{i}", base="refs/heads/main",
                    integration="main", description="", assigned_at=ts, state_changed_at=ts, last_heartbeat=None,
                    last_activity=ts, approved_at=None, heartbeat_status=None, progress=None))
            for n in range(history):
                scope = ("task", "all", "queue")[n % 3]
                steer.enqueue(conn, scope=scope, kind="note" if n % 2 else "stop", text=f"message {n}", ts=ts + n * 0.01,
                              task_id=f"t{n % 50 + 1}" if scope == "task" else None)
        drain(bus, task_consumer("t1"), task_id="t1")


def tick(path: Path) -> None:
    bus = Bus(path)
    try:
        drain(bus, task_consumer("t1"), task_id="t1")
    finally:
        bus.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--history", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-bench-steer-") as tmp:
        small, big = Path(tmp) / "small.db", Path(tmp) / "big.db"
        make_bus(small, 100)
        make_bus(big, args.history)

        # 1. idle ticks, alternating so drift hits both alike
        idle_small, idle_big = [], []
        for _ in range(5):
            idle_small.append(median_seconds(lambda: tick(small), args.runs // 5) * 1e6)
            idle_big.append(median_seconds(lambda: tick(big), args.runs // 5) * 1e6)
        s, b = statistics.median(idle_small), statistics.median(idle_big)
        print(f"1. idle tick (open+drain+close): {s:8.0f} us with 100 old messages, {b:8.0f} us with "
              f"{args.history:,}  ratio {b / s:.2f}  (goal <= 1.5)")

        # 2. a drain that acts on one new stop
        def stop_then_drain(path: Path) -> float:
            with Bus(path) as bus:
                with bus.write() as conn:
                    steer.enqueue(conn, scope="task", kind="stop", text="stop", ts=clock.now(), task_id="t1")
                t0 = time.perf_counter()
                result = drain(bus, task_consumer("t1"), task_id="t1")
                elapsed = time.perf_counter() - t0
                assert result.stop
                return elapsed

        busy_small = [stop_then_drain(small) for _ in range(args.runs // 3)]
        busy_big = [stop_then_drain(big) for _ in range(args.runs // 3)]
        s, b = statistics.median(busy_small) * 1e6, statistics.median(busy_big) * 1e6
        print(f"2. drain acting on a new stop:    {s:8.0f} us with 100 old messages, {b:8.0f} us with "
              f"{args.history:,}  ratio {b / s:.2f}  (goal <= 1.5)")

        # 3. against the heartbeat the same tick records, both on an open bus
        with Bus(big) as bus:
            beat = median_seconds(lambda: record(bus, "t1", status="bench", source="bench"), args.runs) * 1e6
            idle = median_seconds(lambda: drain(bus, task_consumer("t1"), task_id="t1"), args.runs) * 1e6
        print(f"3. idle drain on an open bus {idle:.0f} us against one heartbeat {beat:.0f} us (ratio {idle / beat:.2f})")

        # 4. tell a note
        with Bus(big) as bus:
            told = median_seconds(lambda: tell(bus, "use the new logger", task="t2"), args.runs) * 1e6
        print(f"4. tell (note: queue + thread round): {told:.0f} us")


if __name__ == "__main__":
    main()
