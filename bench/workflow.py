#!/usr/bin/env python3
"""Benchmark of the workflow machinery (issue 5). Prints figures; asserts nothing.

Side by side, in one run:

1. the process runner: one agent process (``true``) through
   :func:`git_nerve.workflow.adapters.command.run_process` (own session,
   stdin feeder, drained pipes, group bookkeeping) against a bare
   ``subprocess.run(["true"])``: the cost the runner adds per agent call;
2. the runner's own cost per round (moderator, thread load, prompt, extract,
   heartbeat, round append), with an in-process adapter that answers at once,
   in a real repository with a spawned task: ms per round against the cost of
   one bare ``rounds.append`` transaction;
3. extract on a 100 KB agent output whose result block comes last.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/workflow.py [--calls 40] [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402

from bench.common import median_seconds  # noqa: E402
from fixtures.repos import build  # noqa: E402
from git_nerve import clock  # noqa: E402
from git_nerve.bus import rounds  # noqa: E402
from git_nerve.workflow import END, Role, Workflow  # noqa: E402
from git_nerve.workflow.adapters.base import StartFrame  # noqa: E402
from git_nerve.workflow.adapters.command import run_process  # noqa: E402
from git_nerve.workflow.extract import parse  # noqa: E402
from git_nerve.workflow.runner import Runner  # noqa: E402


class Step(BaseModel):
    done: bool
    note: str = ""


def bench_process(calls: int) -> None:
    abort = threading.Event()
    bare = median_seconds(lambda: subprocess.run(["true"], capture_output=True, check=False), calls) * 1000
    ours = median_seconds(lambda: run_process(["true"], name="true", cwd=None, input_text="prompt", timeout=30, abort=abort), calls) * 1000
    print(f"1. agent process  bare subprocess.run: {bare:6.2f} ms   run_process: {ours:6.2f} ms   ratio {ours / bare:4.2f}")


def bench_rounds(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = build.hermetic_env(Path(tmp) / "home")
        os.environ.update(env)
        repo = build.simple(Path(tmp))
        from git_nerve.worker import lifecycle

        r = lifecycle.open_repo(repo.work)
        from git_nerve.hooks.install import install_missing

        r.hook_installer = install_missing  # as the commands do: spawn installs missing hooks
        lifecycle.spawn(r, "t1", description="bench", fetch=False)
        answer = '```json\n{"done": false, "note": "step"}\n```'
        wf = Workflow(
            name="bench", roles={"worker": Role(lambda p, c: answer, "Step.", Step)},
            moderator=lambda t: END if len(t.rounds) >= n else "worker", max_rounds=n,
        )
        start = StartFrame("t1", "bench", "bench", str(repo.work), first_round=1)
        t0 = time.perf_counter()
        result = Runner(wf, bus=r.bus, start=start, heartbeat_interval=60).run()
        per_round = (time.perf_counter() - t0) * 1000 / n
        assert result.outcome == "completed", result

        def bare_append() -> None:
            with r.bus.write() as conn:
                rounds.append(conn, "t2", role="worker", content=answer, metadata={"done": False}, ts=clock.now())

        append = median_seconds(bare_append, n) * 1000
        r.close()
    print(f"2. runner round   bare rounds.append: {append:6.2f} ms   runner per round: {per_round:6.2f} ms   ratio {per_round / append:4.1f}")


def bench_extract(repeat: int) -> None:
    body = ("The agent explains what it did. " * 3200)[:100_000]
    raw = body + '\n```json\n{"done": true, "note": "last"}\n```\n'
    ms = median_seconds(lambda: parse(raw, Step), repeat) * 1000
    print(f"3. extract        100 KB output, block last: {ms:6.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    bench_process(args.calls)
    bench_rounds(args.rounds)
    bench_extract(50)


if __name__ == "__main__":
    main()
