#!/usr/bin/env python3
"""Benchmark of `git nerve notes --hook claude` (issue 15): what every tool call of a Claude Code run
pays for the notes hook. Prints figures; asserts nothing.

Measured side by side in one run, in a worker's worktree, runs alternating:

1. the hook with nothing to deliver (the common case: every tool call)
2. the hook delivering one note (a `git nerve tell` queued before each run, not timed)
3. `git nerve outbox` (a click command) and `python -c pass`, for scale

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/notes_hook.py [--runs 21]
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

from bench.common import plain_env  # noqa: E402

BIN = Path(sys.executable).parent


def timed(argv: list[str], cwd: Path, env: dict, stdin: str = "") -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return elapsed, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-bench-notes-") as tmp:
        root = Path(tmp)
        env = plain_env(root)
        work = root / "project"
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True, env=env)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=work, check=True, env=env)
        subprocess.run(["git", "nerve", "init"], cwd=work, check=True, env=env, capture_output=True)
        subprocess.run(["git", "worker", "spawn", "t1", "-d", "bench"], cwd=work, check=True, env=env,
                       capture_output=True)
        wt = Path(json.loads(subprocess.run(["git", "worker", "show", "t1", "--json"], cwd=work, env=env, check=True,
                                            capture_output=True, text=True).stdout)["worker"]["worktree"])
        payload = json.dumps({"hook_event_name": "PostToolUse", "cwd": str(wt), "tool_name": "Bash"})
        hook = [str(BIN / "git-nerve"), "notes", "--hook", "claude"]
        figures: dict[str, list[float]] = {"hook, nothing to deliver": [], "hook, one note delivered": [],
                                           "git nerve outbox (click)": [], "python -c pass": []}
        for i in range(args.runs):
            figures["hook, nothing to deliver"].append(timed(hook, wt, env, payload)[0])
            subprocess.run(["git", "nerve", "tell", "--task", "t1", f"note {i}"], cwd=work, env=env, check=True,
                           capture_output=True)
            took, out = timed(hook, wt, env, payload)
            if f"note {i}" not in out:
                raise SystemExit(f"the note was not delivered: {out!r}")
            figures["hook, one note delivered"].append(took)
            figures["git nerve outbox (click)"].append(timed([str(BIN / "git-nerve"), "outbox"], wt, env)[0])
            figures["python -c pass"].append(timed([sys.executable, "-c", "pass"], wt, env)[0])
        print(f"notes hook, {args.runs} runs each (median / p90, ms)")
        for name, xs in figures.items():
            xs = sorted(xs)
            p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
            print(f"  {name:<28} {statistics.median(xs) * 1000:7.1f} {p90 * 1000:7.1f}")
        base = statistics.median(figures["git nerve outbox (click)"])
        print(f"  ratio hook(nothing) / outbox(click): {statistics.median(figures['hook, nothing to deliver']) / base:.2f}")


if __name__ == "__main__":
    main()
