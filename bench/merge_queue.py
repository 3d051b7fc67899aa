#!/usr/bin/env python3
"""Benchmark of the merge queue (issue 14). Prints figures; asserts nothing.

TASKS approved tasks, BROKEN of which break the check (a check that takes
CHECK_S seconds, like a real test suite), merged by `git worker merge --all
--check` one at a time and with `--batch N`, on two identical repositories
built in this run. Printed side by side: check runs, wall time, tasks merged.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/merge_queue.py [--tasks 32] [--broken 3] [--batch 8] [--check-seconds 0.5]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos import build  # noqa: E402

CHECKER = """import pathlib, sys, time
time.sleep({seconds})
runs = pathlib.Path({log!r})
runs.write_text(str(int(runs.read_text() or 0) + 1) if runs.exists() else "1")
bad = [p.name for p in pathlib.Path('.').glob('task-*.txt') if 'BROKEN' in p.read_text()]
sys.exit(1 if bad else 0)
"""


def prepare(root: Path, tasks: int, broken: set[int], seconds: float) -> tuple[Path, Path]:
    from git_nerve.worker import lifecycle

    repos = build.simple(root)
    log = root / "check-runs"
    build.commit_file(repos.work, "check.py", CHECKER.format(seconds=seconds, log=str(log)), "a check")
    with lifecycle.open_repo(repos.work) as repo:
        from git_nerve.hooks.install import install_missing

        repo.hook_installer = install_missing  # as the commands do: spawn installs missing hooks
        for i in range(tasks):
            t = f"t{i:02d}"
            lifecycle.spawn(repo, t, description=t, fetch=False)
            tree = repos.work.parent / "project.worktrees" / t
            build.write(tree, f"task-{t}.txt", "BROKEN\n" if i in broken else "fine\n")
            build.git(tree, "add", "-A")
            # no hooks: the background radar they start would compete with the queue being measured
            build.git(tree, "-c", "core.hooksPath=/dev/null", "commit", "-qm", f"{t}: work")
            lifecycle.start(repo, t)
            lifecycle.done(repo, t)
            lifecycle.approve(repo, t)
    return repos.work, log


def run_queue(work: Path, log: Path, batch: int) -> tuple[float, int, int]:
    argv = ["git", "worker", "merge", "--all", "--check", "python3 check.py"] + (["--batch", str(batch)] if batch > 1 else [])
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=work, capture_output=True, text=True, env=os.environ)
    wall = time.perf_counter() - t0
    merged = int(subprocess.run(["git", "rev-list", "--count", "--merges", "main"], cwd=work, capture_output=True,
                                text=True).stdout.strip() or 0)
    return wall, int(log.read_text()) if log.exists() else 0, merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--broken", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--check-seconds", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    broken = set(random.Random(args.seed).sample(range(args.tasks), args.broken))
    with tempfile.TemporaryDirectory(prefix="nerve-bench-queue-") as tmp:
        root = Path(tmp)
        env = build.hermetic_env(root / "home")
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        os.environ.clear()
        os.environ.update(env)
        figures = []
        for label, batch in (("one at a time", 1), (f"--batch {args.batch}", args.batch)):
            work, log = prepare(root / label.replace(" ", "-"), args.tasks, broken, args.check_seconds)
            figures.append((label, *run_queue(work, log, batch)))
    print(f"{args.tasks} approved tasks, {args.broken} break the check (tasks {sorted(broken)}), "
          f"check takes {args.check_seconds:g}s")
    print(f"{'':<16} {'check runs':>10} {'wall s':>8} {'merged':>7}")
    for label, wall, runs, merged in figures:
        print(f"{label:<16} {runs:>10} {wall:>8.1f} {merged:>7}")
    (_, w1, r1, _), (_, w2, r2, _) = figures
    print(f"ratio (batch / one at a time): check runs {r2 / max(r1, 1):.2f}, wall time {w2 / max(w1, 1e-9):.2f}")


if __name__ == "__main__":
    main()
