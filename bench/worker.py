#!/usr/bin/env python3
"""Benchmark of the `git worker` lifecycle (issue 2). Prints figures; asserts nothing.

Measured side by side in one run, on a generated 5,000-file repository:

1. `git worker spawn` against plain `git worktree add -b`       (goal: ratio <= 1.3)
2. `git worker heartbeat` against `python3 -c pass`              (goal: ratio <= 4)
3. 32 processes doing 100 transitions or heartbeats each on one bus
   (ops/s, p99 latency, errors and lost writes; goal: both 0)

By default Python's bytecode cache is on (a private PYTHONPYCACHEPREFIX), as
after `pip install`; `--no-bytecode-cache` keeps PYTHONDONTWRITEBYTECODE from
the environment, so every command compiles git_nerve from source.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/worker.py [--files 5000] [--runs 7] [--procs 32] [--ops 100] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import bytecode_cache, timed  # noqa: E402
from fixtures.repos import build  # noqa: E402


def bench_spawn(work: Path, env: dict, runs: int) -> tuple[float, float]:
    plain, ours = [], []
    for i in range(runs):  # alternate, so drift on the machine hits both sides alike
        plain.append(timed(["git", "worktree", "add", "-q", "-b", f"plain-{i}", str(work.parent / "plain" / str(i)), "main"], work, env))
        ours.append(timed(["git", "worker", "spawn", f"task-{i}", "--no-fetch"], work, env))
    return statistics.median(plain), statistics.median(ours)


def bench_heartbeat(work: Path, env: dict, runs: int) -> tuple[float, float]:
    wt = work.parent / f"{work.name}.worktrees" / "task-0"
    base, ours = [], []
    for _ in range(runs):
        base.append(timed([sys.executable, "-c", "pass"], wt, env))
        ours.append(timed(["git", "worker", "heartbeat"], wt, env))
    return statistics.median(base), statistics.median(ours)


def _bus_worker(args: tuple[str, str, int, int]) -> tuple[list[float], list[str], int]:
    bus_path, task, ops, seed = args
    from git_nerve.bus.connection import Bus
    from git_nerve.errors import NerveError
    from git_nerve.worker.heartbeat import record
    from git_nerve.worker.states import State
    from git_nerve.worker.transitions import transition

    bus = Bus(bus_path)
    latencies, errors, writes = [], [], 0
    cycle = [
        (State.WORKING, [State.ASSIGNED]),
        (State.FAILED, [State.WORKING]),
        (State.ASSIGNED, [State.FAILED]),
    ]
    step = 0
    for i in range(ops):
        t0 = time.perf_counter()
        try:
            if (i + seed) % 2:
                record(bus, task, source="bench")
                writes += 1  # one heartbeat message
            else:
                to, frm = cycle[step % 3]
                transition(bus, task, to, allowed_from=frm, verb="bench")
                step += 1
                writes += 1  # one state_change message
        except NerveError as exc:
            errors.append(exc.message)
        latencies.append(time.perf_counter() - t0)
    bus.close()
    return latencies, errors, writes


def bench_bus(tmp: Path, procs: int, ops: int) -> dict:
    from git_nerve import clock
    from git_nerve.bus import workers
    from git_nerve.bus.connection import Bus

    bus_path = tmp / "bus" / "bus.db"
    bus = Bus(bus_path)
    ts = clock.now()
    with bus.write() as conn:
        for p in range(procs):
            workers.insert(conn, workers.Worker(f"b{p}", "ASSIGNED", f"feat/b{p}", f"/x/b{p}", "main", "main", "", ts, ts,
                                                None, ts, None, None, None))
    before = bus.read("SELECT COUNT(*) FROM messages")[0][0]
    bus.close()
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(procs) as pool:
        results = pool.map(_bus_worker, [(str(bus_path), f"b{p}", ops, p) for p in range(procs)])
    wall = time.perf_counter() - t0
    latencies = sorted(l for r in results for l in r[0])
    errors = [e for r in results for e in r[1]]
    expected = sum(r[2] for r in results)
    bus = Bus(bus_path)
    written = bus.read("SELECT COUNT(*) FROM messages")[0][0] - before
    bus.close()
    return {
        "ops": len(latencies),
        "ops_per_s": len(latencies) / wall,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "errors": len(errors),
        "error_samples": errors[:3],
        "lost_writes": expected - written,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--procs", type=int, default=32)
    ap.add_argument("--ops", type=int, default=100)
    ap.add_argument("--no-bytecode-cache", action="store_true", help="compile from source on every run")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="nerve-bench-"))
    env = build.hermetic_env(tmp / "home")
    env.pop("NERVE_DEBUG", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    if not args.no_bytecode_cache:
        bytecode_cache(env, tmp / "pycache")
    os.environ.update({k: v for k, v in env.items() if k.startswith(("GIT_", "HOME", "XDG_"))})
    cache = "off (PYTHONDONTWRITEBYTECODE)" if args.no_bytecode_cache else "on, as after pip install"
    print(f"building a {args.files}-file repository in {tmp} ...; bytecode cache {cache}", flush=True)
    work = build.many_files(tmp, args.files).work
    subprocess.run(["git", "worker", "spawn", "warmup", "--no-fetch"], cwd=work, env=env, check=True, capture_output=True)

    plain, ours = bench_spawn(work, env, args.runs)
    print(f"spawn:     git worktree add -b {plain * 1000:7.1f} ms   git worker spawn {ours * 1000:7.1f} ms   "
          f"ratio {ours / plain:.2f}  (goal <= 1.3)")
    base, hb = bench_heartbeat(work, env, max(args.runs, 15))
    print(f"heartbeat: python3 -c pass       {base * 1000:7.1f} ms   git worker heartbeat {hb * 1000:5.1f} ms   "
          f"ratio {hb / base:.2f}  (goal <= 4)")
    r = bench_bus(tmp, args.procs, args.ops)
    print(f"bus:       {args.procs} processes x {args.ops} ops: {r['ops_per_s']:.0f} ops/s, p50 {r['p50_ms']:.1f} ms, "
          f"p99 {r['p99_ms']:.1f} ms, errors {r['errors']}, lost writes {r['lost_writes']}  (goal: 0 and 0)")
    for sample in r["error_samples"]:
        print(f"           error: {sample}")


if __name__ == "__main__":
    main()
