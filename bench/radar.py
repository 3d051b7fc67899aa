#!/usr/bin/env python3
"""Benchmark of the conflict radar (issue 14). Prints figures; asserts nothing.

On a generated repository of FILES files with WORKERS live workers (real
worktrees, spawned by git-nerve), each worker commits one change; every
eighth worker touches a file a neighbour also touches, so some pairs overlap
or conflict. Measured in one run:

1. a full recompute: every pair of workers (WORKERS*(WORKERS-1)/2) plus each
   against the integration branch, with a look at every worktree;
2. the recompute a commit triggers: one worker commits again, and only its
   pairs (WORKERS-1 plus the integration branch) are compared anew
   (goal: <= 1 s at 64 workers on 5,000 files);
3. the same with uncommitted work in that worker's worktree (a snapshot first).

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/radar.py [--workers 64] [--files 5000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos import build  # noqa: E402

#: the bench drives the radar itself: commits skip our post-commit, which would start background recomputes
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-bench-radar-") as tmp:
        root = Path(tmp)
        env = build.hermetic_env(root / "home")
        os.environ.clear()
        os.environ.update(env)
        repos = build.many_files(root, args.files)
        from git_nerve.radar import scan
        from git_nerve.worker import lifecycle

        t0 = time.perf_counter()
        with lifecycle.open_repo(repos.work) as repo:
            from git_nerve.hooks.install import install_missing

            repo.hook_installer = install_missing  # as the commands do: spawn installs missing hooks
            for i in range(args.workers):
                lifecycle.spawn(repo, f"w{i}", description=f"worker {i}", fetch=False)
        spawn_s = time.perf_counter() - t0
        trees = {f"w{i}": repos.work.parent / "big.worktrees" / f"w{i}" for i in range(args.workers)}
        for i in range(args.workers):
            shared = (i // 8) * 8  # every group of eight shares one file: overlaps and conflicts
            target = f"pkg{shared % 50}/mod{shared}.py" if i % 8 in (0, 1) else f"pkg{i % 50}/mod{i}.py"
            path = trees[f"w{i}"] / target
            path.write_text(path.read_text().replace("return x +", f"return x * {i} +"))
            build.git(trees[f"w{i}"], *NO_HOOKS, "commit", "-qam", f"w{i}: change {target}")
        pairs = args.workers * (args.workers - 1) // 2
        with lifecycle.open_repo(repos.work) as repo:
            t0 = time.perf_counter()
            full = scan.recompute(repo)
            full_s = time.perf_counter() - t0
            w0 = trees["w0"] / "pkg0/mod0.py"
            w0.write_text(w0.read_text() + "# again\n")
            build.git(trees["w0"], *NO_HOOKS, "commit", "-qam", "w0: again")
            t0 = time.perf_counter()
            one = scan.recompute(repo, changed=["w0"])
            one_s = time.perf_counter() - t0
            w0.write_text(w0.read_text() + "# uncommitted\n")
            t0 = time.perf_counter()
            dirty = scan.recompute(repo, changed=["w0"])
            dirty_s = time.perf_counter() - t0
        conflicts = sum(1 for p in full.pairs if p.kind == "conflict")
        overlaps = sum(1 for p in full.pairs if p.kind == "overlap")
        print(f"repository: {args.files} files, {args.workers} live workers (spawned in {spawn_s:.1f}s)")
        print(f"full recompute:          {full_s * 1000:8.0f} ms  ({full.computed} comparisons: {pairs} pairs + "
              f"{args.workers} against integration; {conflicts} conflicts, {overlaps} overlaps)")
        print(f"after one commit:        {one_s * 1000:8.0f} ms  ({one.computed} compared, {one.reused} reused)  goal <= 1000 ms")
        print(f"after one commit, dirty: {dirty_s * 1000:8.0f} ms  ({dirty.computed} compared, snapshot of uncommitted work)")


if __name__ == "__main__":
    main()
