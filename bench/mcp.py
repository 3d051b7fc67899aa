#!/usr/bin/env python3
"""Benchmark of `git nerve mcp` (issue 15). Prints figures; asserts nothing.

In a worker's worktree of a throw-away repository, side by side in one run:

1. start-up: `git nerve mcp` from spawn to its answer to `initialize` (what a CLI waits for before it
   lists the tools; Gemini CLI's `mcp list` gives up after 5 s), against `git nerve thread` run once;
2. per call: the `thread` tool over one long-lived stdio session, against `git nerve thread` as a
   new process each time (what an agent pays through its shell tool), and the `heartbeat` tool
   against `git worker heartbeat`.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/mcp.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos import build  # noqa: E402

BIN = Path(sys.executable).parent
NERVE, WORKER = str(BIN / "git-nerve"), str(BIN / "git-worker")


def _msg(proc: subprocess.Popen, obj: dict) -> dict | None:
    proc.stdin.write(json.dumps(obj) + "\n")
    proc.stdin.flush()
    if "id" not in obj:
        return None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the server closed its output")
        data = json.loads(line)
        if data.get("id") == obj["id"]:
            return data


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def start(wt: Path, env: dict) -> tuple[subprocess.Popen, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([NERVE, "mcp"], cwd=wt, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    _msg(proc, INIT)
    took = time.perf_counter() - t0
    _msg(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proc, took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nerve-bench-mcp-"))
    env = {**build.hermetic_env(tmp / "home"), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    repo = build.simple(tmp)
    subprocess.run([NERVE, "init"], cwd=repo.work, env=env, check=True, capture_output=True)
    subprocess.run([WORKER, "spawn", "t1", "-d", "bench"], cwd=repo.work, env=env, check=True, capture_output=True)
    rows = json.loads(subprocess.run([WORKER, "status", "--json"], cwd=repo.work, env=env, check=True,
                                     capture_output=True, text=True).stdout)
    wt = Path(rows[0]["worktree"])
    for i in range(20):
        subprocess.run([NERVE, "post", "--role", "coder", f"round {i} " + "x" * 400], cwd=wt, env=env, check=True,
                       capture_output=True)

    def cli(argv: list[str]) -> float:
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=wt, env=env, check=True, capture_output=True)
        return time.perf_counter() - t0

    startups, thread_cli = [], []
    for _ in range(max(3, args.runs // 3)):
        proc, took = start(wt, env)
        startups.append(took)
        proc.stdin.close()
        proc.wait()
        thread_cli.append(cli([NERVE, "thread"]))

    proc, _ = start(wt, env)
    tool, cli_thread, hb_tool, hb_cli = [], [], [], []
    for i in range(args.runs):
        t0 = time.perf_counter()
        _msg(proc, {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {"name": "thread", "arguments": {}}})
        tool.append(time.perf_counter() - t0)
        cli_thread.append(cli([NERVE, "thread"]))
        t0 = time.perf_counter()
        _msg(proc, {"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                    "params": {"name": "heartbeat", "arguments": {"status": "bench"}}})
        hb_tool.append(time.perf_counter() - t0)
        hb_cli.append(cli([WORKER, "heartbeat", "--status", "bench"]))
    proc.stdin.close()
    proc.wait()

    def ms(xs: list[float]) -> str:
        return f"median {statistics.median(xs) * 1000:7.1f} ms  (min {min(xs) * 1000:.1f}, n={len(xs)})"

    print(f"start-up to initialize answer:  {ms(startups)}")
    print(f"`git nerve thread` (one run):   {ms(thread_cli)}")
    print(f"thread tool (open session):     {ms(tool)}")
    print(f"`git nerve thread` process:     {ms(cli_thread)}   ratio {statistics.median(cli_thread) / statistics.median(tool):.1f}x")
    print(f"heartbeat tool (open session):  {ms(hb_tool)}")
    print(f"`git worker heartbeat` process: {ms(hb_cli)}   ratio {statistics.median(hb_cli) / statistics.median(hb_tool):.1f}x")


if __name__ == "__main__":
    main()
