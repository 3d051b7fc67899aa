#!/usr/bin/env python3
"""Benchmark of `git nerve demo` (real agents on the scripted model). Prints figures; asserts nothing.

Runs the full demo and the fast one side by side in fresh directories, and prints each one's wall time, then
per task and role of the full demo: the agent process's own time (``duration_s``) and what the runner spent
around it (``overhead_s`` where the runner records it), from the threads on the bus.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/demo.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_demo(args: list[str], where: Path) -> float:
    env = {**os.environ, "NO_COLOR": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.monotonic()
    proc = subprocess.run(["git", "nerve", "demo", *args, "--dir", str(where)], env=env, capture_output=True, text=True)
    took = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"demo {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return took


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from git_nerve.bus import rounds
    from git_nerve.bus.connection import Bus

    with tempfile.TemporaryDirectory(prefix="bench-demo-") as tmp:
        full = run_demo([], Path(tmp) / "full")
        fast = run_demo(["--fast"], Path(tmp) / "fast")
        print(f"git nerve demo:        {full:6.1f}s wall")
        print(f"git nerve demo --fast: {fast:6.1f}s wall  (full / fast = {full / fast:.1f}x)")
        print(f"{'task':10} {'round':>5} {'role':9} {'agent s':>8} {'overhead s':>10}")
        with Bus(Path(tmp) / "full" / "shop" / ".git" / "nerve" / "bus.db") as bus:
            for task in ("tax-rate", "tax-label", "readme"):
                last = rounds.last_round(bus.conn, task)
                for r in rounds.load(bus.conn, task, list(range(1, last + 1))):
                    if r.metadata.get("adapter"):
                        over = r.metadata.get("overhead_s")
                        print(f"{task:10} {r.round:>5} {r.role:9} "
                              f"{r.metadata.get('duration_s', '?'):>8} {over if over is not None else '-':>10}")


if __name__ == "__main__":
    main()
