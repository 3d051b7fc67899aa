#!/usr/bin/env python3
"""Benchmark of the git hooks (issue 3). Prints figures; asserts nothing.

Measured side by side in one run, in a worker's worktree (runs alternate, so
drift on the machine hits both sides alike):

1. `git commit` with git-nerve's hooks against the same commit with no hooks
   (`-c core.hooksPath=<empty dir>`)                     (goal: hooks add <= 10 ms to the median)
1b. a 20-commit `git rebase` with and without the hooks  (goal: ratio <= 1.3x)
2. `git push` of one new commit to a local bare remote, with and without hooks
3. the same push once the integration branch has moved, so pre-push runs its
   in-memory merge check (the one place pygit2 loads)
4. the floor under any Python hook: `python -S -c pass`, the standard-library
   modules any bus-writing hook needs, and importing our hook's modules

By default Python's bytecode cache is on (a private PYTHONPYCACHEPREFIX), as
after `pip install`; `--no-bytecode-cache` keeps PYTHONDONTWRITEBYTECODE from
the environment, so every hook compiles git_nerve from source.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/hooks.py [--runs 21] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import hermetic  # noqa: E402
from bench.common import timed as run  # noqa: E402
from fixtures.repos import build  # noqa: E402


def no_hooks(empty: Path) -> list[str]:
    return ["git", "-c", f"core.hooksPath={empty}"]


def trivial_hooks(root: Path) -> Path:
    """A hooks dir whose hooks are `#!/bin/sh` + `exit 0`: what any hook costs git to start."""
    d = root / "trivial-hooks"
    d.mkdir()
    for name in ("post-commit", "post-merge", "post-rewrite", "pre-push"):
        (d / name).write_text("#!/bin/sh\nexit 0\n")
        (d / name).chmod(0o755)
    return d


def bench_commit(wt: Path, env: dict, empty: Path, runs: int, trivial: Path) -> tuple[float, float, float]:
    plain, ours, floor_ = [], [], []
    for i in range(runs + 2):
        for side, prefix in ((ours, ["git"]), (plain, no_hooks(empty)), (floor_, no_hooks(trivial))):
            name = f"bench-{i}-{id(side)}.txt"
            (wt / name).write_text(f"{i}\n")
            run(["git", "add", name], wt, env)
            elapsed = run([*prefix, "commit", "-q", "-m", f"bench {name}"], wt, env)
            if i >= 2:  # the first two are warm-up (and fill the bytecode cache)
                side.append(elapsed)
    return statistics.median(plain), statistics.median(ours), statistics.median(floor_)


def bench_rebase(wt: Path, env: dict, empty: Path, runs: int, trivial: Path) -> tuple[float, float]:
    """A 20-commit rebase onto a moved main, reset and redone, with and without hooks."""
    quiet = no_hooks(empty)
    base = run_out(["git", "rev-parse", "HEAD"], wt, env)
    for i in range(20):
        (wt / f"rebase-{i}.txt").write_text(f"{i}\n")
        run(["git", "add", f"rebase-{i}.txt"], wt, env)
        run([*quiet, "commit", "-q", "-m", f"rebase step {i}"], wt, env)
    tip = run_out(["git", "rev-parse", "HEAD"], wt, env)
    # the branch to rebase onto: the base plus one commit of its own
    run([*quiet, "checkout", "-q", "--detach", base], wt, env)
    (wt / "onto.txt").write_text("onto\n")
    run(["git", "add", "onto.txt"], wt, env)
    run([*quiet, "commit", "-q", "-m", "onto"], wt, env)
    onto = run_out(["git", "rev-parse", "HEAD"], wt, env)
    run([*quiet, "checkout", "-q", "-B", "feat/t1", tip], wt, env)
    plain, ours, floor_ = [], [], []
    for i in range(runs + 1):
        for side, prefix in ((ours, ["git"]), (plain, quiet), (floor_, no_hooks(trivial))):
            run([*quiet, "reset", "-q", "--hard", tip], wt, env)
            elapsed = run([*prefix, "rebase", "-q", onto], wt, env)
            if i >= 1:
                side.append(elapsed)
    run([*quiet, "reset", "-q", "--hard", tip], wt, env)
    return statistics.median(plain), statistics.median(ours), statistics.median(floor_)


def run_out(argv: list[str], cwd: Path, env: dict) -> str:
    import subprocess

    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.strip()


def bench_push(wt: Path, env: dict, empty: Path, runs: int) -> tuple[float, float]:
    plain, ours = [], []
    for i in range(runs + 2):
        for side, prefix in ((ours, ["git"]), (plain, no_hooks(empty))):
            run([*no_hooks(empty), "commit", "-q", "--allow-empty", "-m", f"push {i}"], wt, env)
            elapsed = run([*prefix, "push", "-q", "origin", "HEAD:refs/heads/feat/t1"], wt, env)
            if i >= 2:
                side.append(elapsed)
    return statistics.median(plain), statistics.median(ours)


def floor(env: dict, runs: int) -> tuple[float, float, float]:
    """Medians of `python -S` doing nothing, importing what any bus-writing hook needs, and importing ours."""
    codes = [
        "pass",
        "import sqlite3, json, subprocess",
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import git_nerve.hooks.runtime",
    ]
    times: list[list[float]] = [[] for _ in codes]
    for i in range(runs + 2):
        for code, got in zip(codes, times):
            elapsed = run([sys.executable, "-S", "-c", code], ROOT, env)
            if i >= 2:
                got.append(elapsed)
    base, stdlib, ours = (statistics.median(t) for t in times)
    return base, stdlib, ours


def line(label: str, plain: float, ours: float, goal: str = "") -> str:
    return (f"{label:<44} no hooks {plain * 1000:7.1f} ms   hooks {ours * 1000:7.1f} ms   "
            f"added {(ours - plain) * 1000:6.1f} ms   ratio {ours / plain:5.2f}x{goal}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--no-bytecode-cache", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="nerve-bench-hooks-") as tmp:
        root = Path(tmp)
        env = hermetic(root, keep_bytecode=not args.no_bytecode_cache)
        empty = root / "no-hooks"
        empty.mkdir()
        repos = build.with_origin(root / "repo")
        work = repos.work
        run(["git", "worker", "spawn", "t1", "--no-fetch"], work, env)  # installs the hooks
        run(["git", "worker", "start", "--task", "t1"], work, env)
        wt = work.parent / f"{work.name}.worktrees" / "t1"

        trivial = trivial_hooks(root)
        commit_plain, commit_ours, commit_trivial = bench_commit(wt, env, empty, args.runs, trivial)
        rebase_plain, rebase_ours, rebase_trivial = bench_rebase(wt, env, empty, max(5, args.runs // 2), trivial)
        push_plain, push_ours = bench_push(wt, env, empty, args.runs)
        build.commit_file(work, "upstream.txt", "elsewhere\n", "main moves on")
        run(["git", "push", "-q", "origin", "main"], work, env)
        moved_plain, moved_ours = bench_push(wt, env, empty, args.runs)
        python_s, stdlib_import, hook_import = floor(env, args.runs)

    cache = "off (PYTHONDONTWRITEBYTECODE)" if args.no_bytecode_cache else "on, as after pip install"
    print(f"git-nerve hooks: median of {args.runs} runs each, side by side; bytecode cache {cache}")
    print(line("git commit in a worker's worktree", commit_plain, commit_ours, "   (goal: added <= 10 ms)"))
    print(line("20-commit git rebase in a worker's worktree", rebase_plain, rebase_ours, "   (goal: ratio <= 1.3x)"))
    print(line("  the same commit, `exit 0` sh hooks only", commit_plain, commit_trivial, "   (the floor: git starting any hook)"))
    print(line("  the same rebase, `exit 0` sh hooks only", rebase_plain, rebase_trivial))
    print(f"  ours over the floor: commit +{(commit_ours - commit_trivial) * 1000:.1f} ms, "
          f"rebase {rebase_ours / rebase_trivial:.2f}x")
    print(line("git push to a local bare remote", push_plain, push_ours))
    print(line("git push, integration moved (pygit2 check)", moved_plain, moved_ours))
    print(f"floor of a Python hook: `python -S -c pass` {python_s * 1000:.1f} ms; "
          f"+ sqlite3, json, subprocess {(stdlib_import - python_s) * 1000:.1f} ms; "
          f"+ git_nerve.hooks.runtime and its imports {(hook_import - python_s) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
