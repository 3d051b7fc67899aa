#!/usr/bin/env python3
"""The conflict radar measured against git (issue 37). Prints counts, precision and recall; asserts nothing.

A real project's files (``--real click``: click 8.1.8's sdist, downloaded with pip into the tool cache once:
fixtures/repos/sdists.py; else a generated Python project) become a sequence of tasks that edit real code, in
phases: tasks spawned from the integration branch commit edits (some leave them uncommitted, some do nothing);
some are merged (the others are left behind), the integration branch moves on by itself too, new tasks are
spawned after the merges; and so on. After each phase every radar verdict (`git worker conflicts --refresh
--json`) is compared with git's under the rule of docs/architecture.md ("A conflict belongs to the work that
makes it"), computed with the git binary only:

* a task's side S: its branch tip, or `git stash create` of its worktree when it has uncommitted changes;
* its own change replayed on the integration tip I: R = `git merge-tree --write-tree I S` (its merge base with
  I is the base); the task conflicts with the integration branch when that merge conflicts;
* two tasks conflict when `git merge-tree --write-tree` of commit-tree(R_a, parent I) and commit-tree(R_b,
  parent I) (their merge base: I) conflicts.

    .venv/bin/python bench/radar_truth.py [--real click] [--tasks 12] [--phases 4] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos import build  # noqa: E402

REAL = {"click": ("click", "8.1.8"), "django": ("Django", "5.1.4")}
INTEGRATION = "@integration"


@dataclass
class Counts:
    pairs: int = 0  #: task pairs compared
    integration: int = 0  #: task <-> integration pairs compared
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    wrong: list[str] = field(default_factory=list)
    pair_conflicts: int = 0  #: of the task pairs, git's conflicts
    integration_conflicts: int = 0  #: of the task <-> integration pairs, git's conflicts

    def add(self, key: str, radar: bool, truth: bool) -> None:
        if radar and truth:
            self.tp += 1
        elif radar:
            self.fp += 1
            self.wrong.append(f"radar says conflict, git does not: {key}")
        elif truth:
            self.fn += 1
            self.wrong.append(f"git says conflict, the radar does not: {key}")
        else:
            self.tn += 1

    def precision(self) -> float:
        return 100.0 * self.tp / (self.tp + self.fp) if self.tp + self.fp else 100.0

    def recall(self) -> float:
        return 100.0 * self.tp / (self.tp + self.fn) if self.tp + self.fn else 100.0


def git(cwd: Path, *args: str, env=None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def worker(cwd: Path, *args: str, env=None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", "worker", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git worker {' '.join(args)}: {proc.stdout.strip()} {proc.stderr.strip()}")
    return proc


def generated_files(seed: int, count: int = 6, functions: int = 12) -> dict[str, str]:
    """A small Python project: ``count`` modules of ``functions`` functions (the fallback without a sdist)."""
    rnd = random.Random(seed)
    files = {}
    for i in range(count):
        body = [f'"""Module {i}."""', ""]
        for j in range(functions):
            body += [f"def f{i}_{j}(x):", f"    y = x * {rnd.randint(2, 9)}", f"    return y + {j}", ""]
        files[f"pkg/mod{i}.py"] = "\n".join(body) + "\n"
    return files


def real_files(name: str, limit: int = 6) -> dict[str, str]:
    """The ``limit`` largest Python files of the sdist (the code tasks edit; the rest of the tree is kept too)."""
    from fixtures.repos.sdists import sdist_tree

    tree = sdist_tree(*REAL[name])
    found = sorted((p for p in tree.rglob("*.py") if p.is_file()), key=lambda p: -p.stat().st_size)[:limit]
    return {str(p.relative_to(tree)): p.read_text(encoding="utf-8") for p in found}


#: lines of each edited file the tasks work on (a function or two: tasks of one project meet there)
WINDOW = 40


def edit(text: str, rnd: random.Random, tag: str, start: int = 0) -> str:
    """One to three changes of real lines (a line changed, one inserted, one deleted) among the ``WINDOW`` lines
    from ``start``, near each other or not."""
    lines = text.splitlines()
    for _ in range(rnd.randint(1, 3)):
        at = min(len(lines) - 1, start + rnd.randrange(WINDOW))
        what = rnd.random()
        if what < 0.6:
            lines[at] = lines[at] + f"  # {tag}"
        elif what < 0.85:
            lines.insert(at, f"# {tag} was here")
        elif len(lines) > 5:
            del lines[at]
    return "\n".join(lines) + "\n"


class Scenario:
    def __init__(self, work: Path, env, hot: list[str], seed: int):
        self.work, self.env, self.hot = work, env, hot
        self.rnd = random.Random(seed)
        self.live: list[str] = []
        self.n = 0
        self.start = {rel: self.rnd.randrange(max(1, (work / rel).read_text().count("\n") - WINDOW))
                      for rel in hot}

    def wt(self, task: str) -> Path:
        return self.work.parent / f"{self.work.name}.worktrees" / task

    def commit(self, cwd: Path, message: str) -> None:
        git(cwd, "add", "-A", env=self.env)
        git(cwd, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", message, env=self.env)

    def touch(self, cwd: Path, tag: str) -> None:
        for rel in self.rnd.sample(self.hot, self.rnd.choice((1, 1, 2))):
            p = cwd / rel
            p.write_text(edit(p.read_text(encoding="utf-8"), self.rnd, tag, self.start[rel]), encoding="utf-8")

    def spawn(self, count: int) -> None:
        """``count`` new tasks from the integration branch: most commit edits, some leave them uncommitted (or
        add uncommitted ones on top), some do nothing."""
        for _ in range(count):
            self.n += 1
            task = f"t{self.n:03d}"
            worker(self.work, "spawn", task, "--no-fetch", "-d", f"edit code ({task})", env=self.env)
            self.live.append(task)
            roll = self.rnd.random()
            if roll < 0.1:
                continue  # a task with no work yet
            if roll < 0.85:
                for k in range(self.rnd.randint(1, 2)):
                    self.touch(self.wt(task), f"{task} {k}")
                    self.commit(self.wt(task), f"{task}: edit {k}")
            if roll >= 0.7:
                self.touch(self.wt(task), f"{task} uncommitted")

    def merge(self, count: int) -> None:
        """Merge up to ``count`` live tasks whose work is committed and applies (`done` rebases them); the
        integration branch then moves on by itself once."""
        for task in self.rnd.sample(self.live, len(self.live)):
            if count <= 0:
                break
            wt = self.wt(task)
            if git(wt, "status", "--porcelain", env=self.env).stdout.strip():
                continue
            worker(wt, "start", env=self.env, check=False)
            if worker(wt, "done", env=self.env, check=False).returncode != 0:
                git(wt, "rebase", "--abort", env=self.env, check=False)  # CONFLICTED, left behind: still live
                continue
            worker(self.work, "approve", task, env=self.env)
            worker(self.work, "merge", task, env=self.env)
            self.live.remove(task)
            count -= 1
        self.touch(self.work, "main moved on")
        self.commit(self.work, "main moved on")

    def side(self, task: str) -> str:
        wt = self.wt(task)
        made = git(wt, "stash", "create", env=self.env).stdout.strip()  # uncommitted work, as the radar's snapshot
        return made or git(wt, "rev-parse", "HEAD", env=self.env).stdout.strip()

    def truth(self) -> tuple[dict[str, bool], dict[tuple[str, str], bool]]:
        """git's verdicts: per task against the integration branch, per pair of tasks."""
        tip = git(self.work, "rev-parse", "main", env=self.env).stdout.strip()
        own: dict[str, str] = {}
        with_integration: dict[str, bool] = {}
        for task in sorted(self.live):
            proc = git(self.work, "merge-tree", "--write-tree", tip, self.side(task), env=self.env, check=False)
            if proc.returncode not in (0, 1):
                raise RuntimeError(proc.stderr)
            with_integration[task] = proc.returncode == 1
            tree = proc.stdout.split("\n", 1)[0]
            own[task] = git(self.work, "commit-tree", tree, "-p", tip, "-m", f"{task} replayed", env=self.env).stdout.strip()
        pairs = {}
        tasks = sorted(self.live)
        for i, a in enumerate(tasks):
            for b in tasks[i + 1:]:
                proc = git(self.work, "merge-tree", "--write-tree", own[a], own[b], env=self.env, check=False)
                if proc.returncode not in (0, 1):
                    raise RuntimeError(proc.stderr)
                pairs[(a, b)] = proc.returncode == 1
        return with_integration, pairs

    def radar(self) -> set[tuple[str, str]]:
        data = json.loads(worker(self.work, "conflicts", "--refresh", "--json", env=self.env).stdout)
        return {(p["a"], p["b"]) if p["b"] == INTEGRATION else tuple(sorted((p["a"], p["b"])))
                for p in data["pairs"] if p["kind"] == "conflict"}

    def check(self, counts: Counts) -> None:
        with_integration, pairs = self.truth()
        said = self.radar()
        for task, truth in with_integration.items():
            counts.integration += 1
            counts.integration_conflicts += truth
            counts.add(f"{task} <-> integration", (task, INTEGRATION) in said, truth)
        for (a, b), truth in pairs.items():
            counts.pairs += 1
            counts.pair_conflicts += truth
            counts.add(f"{a} <-> {b}", (a, b) in said, truth)


def measure(work: Path, env, hot: list[str], *, tasks: int, phases: int, seed: int) -> Counts:
    """Phases of spawns (and merges from the second on), the radar compared with git after each."""
    counts = Counts()
    s = Scenario(work, env, hot, seed)
    for phase in range(phases):
        if phase:
            s.merge(max(1, tasks // 4))
        s.spawn(tasks if phase == 0 else max(2, tasks // 2))
        s.check(counts)
    return counts


def repository(root: Path, env, files: dict[str, str], real: str | None) -> Path:
    import shutil

    work = root / "project"
    if real:
        from fixtures.repos.sdists import sdist_tree

        shutil.copytree(sdist_tree(*REAL[real]), work)
    else:
        work.mkdir(parents=True)
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text, encoding="utf-8")
    git(work, "init", "-q", "-b", "main", env=env)
    git(work, "add", "-A", "-f", env=env)
    git(work, "commit", "-q", "-m", "the project", env=env)
    return work


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", choices=sorted(REAL), help="a real codebase from its PyPI sdist (else generated)")
    ap.add_argument("--tasks", type=int, default=12, help="tasks spawned in the first phase (half as many after)")
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-radar-truth-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        env = build.hermetic_env(root / "home")
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["NERVE_WARM"] = "0"
        files = real_files(args.real) if args.real else generated_files(args.seed)
        work = repository(root, env, files, args.real)
        started = time.monotonic()
        c = measure(work, env, sorted(files), tasks=args.tasks, phases=args.phases, seed=args.seed)
        took = time.monotonic() - started
    print(f"repository: {args.real or 'generated'}; edited files: {len(files)}; {args.phases} phases, seed {args.seed}")
    print(f"compared: {c.pairs} task pairs + {c.integration} task <-> integration pairs in {took:.0f} s")
    print(f"conflicts: git {c.tp + c.fn} ({c.pair_conflicts} between tasks, {c.integration_conflicts} with the integration "
          f"branch), radar {c.tp + c.fp}; true positives {c.tp}, false positives {c.fp}, "
          f"false negatives {c.fn}, true negatives {c.tn}")
    print(f"precision {c.precision():.1f} %, recall {c.recall():.1f} %")
    for line in c.wrong[:20]:
        print("  " + line)


if __name__ == "__main__":
    main()
