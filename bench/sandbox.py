#!/usr/bin/env python3
"""Benchmark of the agent box (issue 41). Prints figures; asserts nothing.

The cost of the box per agent start: one agent process started the way an adapter starts it
(:func:`git_nerve.workflow.adapters.command.run_process`, its own process group, pipes drained) with the box
(`bwrap`, the argv :func:`git_nerve.workflow.sandbox.bwrap_argv` builds for a task of a real repository) and
without, side by side in one run (alternating), for two agents: `true` (the bare start) and `python3 -c pass`
(an interpreter's start, as a Python CLI's). Medians in milliseconds, and their ratio.

Run from the repository root with the venv's interpreter (bwrap on PATH):
    .venv/bin/python bench/sandbox.py [--runs 30]
"""

from __future__ import annotations

import argparse
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


def _one(argv: list[str], cwd: Path, env: dict) -> float:
    from git_nerve.workflow.adapters.command import run_process

    t0 = time.perf_counter()
    run_process(argv, name="bench", cwd=cwd, input_text=None, timeout=60, env=env)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    from git_nerve.workflow import sandbox
    from git_nerve.workflow.adapters.command import git_dirs

    kind = sandbox.choose("bwrap")
    with tempfile.TemporaryDirectory(prefix="nerve-bench-sandbox-") as tmp_name:
        tmp = Path(tmp_name)
        env = build.hermetic_env(tmp / "home")
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        os.environ.update(env)
        work = build.simple(tmp).work
        subprocess.run(["git", "worker", "spawn", "t1", "-d", "bench"], cwd=work, env=env, check=True,
                       capture_output=True)
        wt = work.parent / f"{work.name}.worktrees" / "t1"
        branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=wt, capture_output=True,
                                text=True, check=True).stdout.strip()
        git_dir, common = git_dirs(str(wt))
        box_tmp = tmp / "box"
        box_tmp.mkdir()
        box = sandbox.make_box(workdir=str(wt), git_dir=git_dir, common_dir=common, branch=branch, task_id="t1",
                               tmp_parent=str(box_tmp), env=env)
        print(f"agent start, {args.runs} runs each, alternating (box: {kind})")
        print(f"{'agent':<22} {'unboxed ms':>11} {'boxed ms':>10} {'ratio':>7} {'+ms':>7}")
        for label, agent in (("true", ["true"]), ("python3 -c pass", [sys.executable, "-c", "pass"])):
            plain, boxed = [], []
            for _ in range(args.runs):
                plain.append(_one(agent, wt, env))
                argv, benv = sandbox.wrap(kind, box, agent, env)
                boxed.append(_one(argv, wt, benv))
            p, b = statistics.median(plain) * 1000, statistics.median(boxed) * 1000
            print(f"{label:<22} {p:>11.1f} {b:>10.1f} {b / p:>7.2f} {b - p:>7.1f}")


if __name__ == "__main__":
    main()
