#!/usr/bin/env python3
"""Many workers at once (issue 27). Prints figures as ratios against their floors, side by side in one run;
asserts nothing.

1. 16 `git worker spawn` at once against 16 `git worktree add -b` at once          (goal: <= 2x)
2. one spawn against one `git worktree add -b` (median of alternating runs)         (goal: <= 1.3x)
   (``--only one``: that alone, with more runs, the floor a Python command cannot go below (starting Python,
   importing the CLI's entry module, then the same `git worktree add -b`), and the git processes each
   starts, counted with GIT_TRACE)
3. `start` and `heartbeat` while 8 spawns run (seconds; floor: the same alone)     (goal: <= 0.2 s)
4. N workers (processes: spawn, start, 3 commits through the hooks, done) with `status --json` polled
   meanwhile: spawn, done and status --json p99                                    (goal at 24: 2 s, 2 s, 0.5 s)
5. radar latency: two tasks commit the same line while the others commit         (goal: <= 1 s)

On a generated 3,000-file repository, or with ``--real click`` / ``--real django`` on click 8.1.8's or
Django 5.1.4's sdist (downloaded with pip into $GIT_NERVE_TOOL_CACHE, else ~/.cache/git-nerve-tools, once:
fixtures/repos/sdists.py).

    .venv/bin/python bench/crowd.py [--files 3000] [--workers 8,24] [--real click|django] [--runs 3]
    .venv/bin/python bench/crowd.py --real django --only one --runs 9
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import hermetic  # noqa: E402
from fixtures.repos import build  # noqa: E402

REAL = {"click": ("click", "8.1.8"), "django": ("Django", "5.1.4")}


def run(argv, cwd, env, check=True) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if check and proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed: {proc.stderr.strip()[-800:]}")
    return took, proc


def at_once(argvs: list[tuple[list[str], Path]], env) -> tuple[float, list[float]]:
    """Wall time of running all at once, and each one's time."""
    times = [0.0] * len(argvs)

    def one(i):
        times[i] = run(argvs[i][0], argvs[i][1], env)[0]

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(argvs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, times


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))] if xs else float("nan")


def real_repo(name: str, root: Path, env) -> Path:
    """The sdist's files as one commit (downloaded once into the tool cache with pip: fixtures/repos/sdists.py)."""
    import shutil

    from fixtures.repos.sdists import sdist_tree

    work = root / name
    shutil.copytree(sdist_tree(*REAL[name]), work)
    build.git(work, "init", "-q", "-b", "main", env=env)
    build.git(work, "add", "-A", "-f", env=env)  # the whole sdist
    build.git(work, "commit", "-q", "-m", f"{'=='.join(REAL[name])} sdist", env=env)
    return work


def wt_of(work: Path, task: str) -> Path:
    return work.parent / f"{work.name}.worktrees" / task


def bench_spawns(work: Path, env, n: int, runs: int, before: Path | None = None) -> list[str]:
    out = []
    walls = []
    old_env = {**env, "PYTHONPATH": str(before)} if before else None
    for r in range(runs):  # alternate: drift on the shared machine hits both sides alike
        plain = [(["git", "worktree", "add", "-q", "-b", f"plain-{r}-{i}", str(work.parent / "plain" / f"{r}-{i}"), "main"],
                  work) for i in range(n)]
        ours = [(["git", "worker", "spawn", f"s{r}-{i}", "--no-fetch"], work) for i in range(n)]
        old = [(["git", "worker", "spawn", f"old{r}-{i}", "--no-fetch"], work) for i in range(n)]
        walls.append((at_once(plain, env)[0], at_once(ours, env)[0], at_once(old, old_env)[0] if old_env else 0.0))
    fl, us = statistics.median(w[0] for w in walls), statistics.median(w[1] for w in walls)
    out.append(f"{n} spawns at once      {us:6.2f} s  vs {n} worktree add at once {fl:6.2f} s   ratio {us / fl:5.2f}x  (goal <= 2)")
    if old_env:
        was = statistics.median(w[2] for w in walls)
        out.append(f"  before ({before}): {was:6.2f} s   ratio {was / fl:5.2f}x")
    plain, ours = [], []
    for r in range(max(3, runs)):
        plain.append(run(["git", "worktree", "add", "-q", "-b", f"one-{r}", str(work.parent / "plain" / f"one-{r}"), "main"], work, env)[0])
        ours.append(run(["git", "worker", "spawn", f"one-{r}", "--no-fetch"], work, env)[0])
    fl, us = statistics.median(plain), statistics.median(ours)
    out.append(f"one spawn             {us:6.2f} s  vs one worktree add       {fl:6.2f} s   ratio {us / fl:5.2f}x  (goal <= 1.3)")
    return out


def git_processes(argv: list[str], work: Path, env) -> int:
    """How many git processes ``argv`` starts (``git worker spawn`` itself included), from GIT_TRACE."""
    trace = work.parent / "git-trace.txt"
    trace.unlink(missing_ok=True)
    run(argv, work, {**env, "GIT_TRACE": str(trace)})
    lines = trace.read_text().splitlines()
    return sum(1 for ln in lines if "trace: built-in: git " in ln or "trace: exec: git-" in ln)


def cpu_run(argv, cwd, env) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children, user + system): the CPU figure hardly moves
    with the load other people put on the machine, the wall time does."""
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    took = run(argv, cwd, env)[0]
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return took, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def bench_one(work: Path, env, runs: int, before: Path | None = None) -> list[str]:
    """One spawn against one `git worktree add -b`, and against the floor of a Python command that does it;
    ``before``: the source tree of another git-nerve (``git archive`` of an older commit), timed alongside."""
    floor_py = ("import subprocess, sys; import git_nerve.cli.entry; "
                "subprocess.run(['git', 'worktree', 'add', '-q', '-b', sys.argv[1], sys.argv[2], 'main'], check=True)")
    t: dict[str, list[tuple[float, float]]] = {k: [] for k in ("add", "spawn", "floor", "pass", "before")}
    old_env = {**env, "PYTHONPATH": str(before)} if before else None  # ahead of the editable install's finder
    for r in range(runs):  # alternate: drift on the shared machine hits all sides alike
        if old_env:
            t["before"].append(cpu_run(["git", "worker", "spawn", f"before-{r}", "--no-fetch"], work, old_env))
        t["add"].append(cpu_run(["git", "worktree", "add", "-q", "-b", f"one-{r}", str(work.parent / "plain" / f"one-{r}"),
                                 "main"], work, env))
        t["spawn"].append(cpu_run(["git", "worker", "spawn", f"one-{r}", "--no-fetch"], work, env))
        t["floor"].append(cpu_run([sys.executable, "-c", floor_py, f"floor-{r}", str(work.parent / "plain" / f"floor-{r}")],
                                  work, env))
        t["pass"].append(cpu_run([sys.executable, "-c", "pass"], work, env))
    wall = {k: statistics.median(x[0] for x in v) for k, v in t.items() if v}
    cpu = {k: statistics.median(x[1] for x in v) for k, v in t.items() if v}
    n_ours = git_processes(["git", "worker", "spawn", "one-counted", "--no-fetch"], work, env)
    n_add = git_processes(["git", "worktree", "add", "-q", "-b", "one-counted-plain",
                           str(work.parent / "plain" / "one-counted"), "main"], work, env)

    def fig(k: str) -> str:
        return f"{wall[k] * 1000:6.1f} ms (cpu {cpu[k] * 1000:6.1f})"

    lines = [f"[median of {runs}, alternating; cpu: user+sys of the process tree, steadier on a busy machine]",
             f"one spawn {fig('spawn')}  vs  git worktree add -b {fig('add')}   ratio {wall['spawn'] / wall['add']:5.2f}x "
             f"(cpu {cpu['spawn'] / cpu['add']:5.2f}x)  (goal <= 1.3)"]
    if old_env:
        n_old = git_processes(["git", "worker", "spawn", "before-counted", "--no-fetch"], work, old_env)
        lines.append(f"  before ({before}): spawn {fig('before')}   ratio {wall['before'] / wall['add']:5.2f}x "
                     f"(cpu {cpu['before'] / cpu['add']:5.2f}x), {n_old} git processes")
    return lines + [
        f"  floor: python -c 'import git_nerve.cli.entry' + the same add {fig('floor')}: spawn "
        f"{wall['spawn'] / wall['floor']:4.2f}x of it (cpu {cpu['spawn'] / cpu['floor']:4.2f}x); python -c pass {fig('pass')}",
        f"  git processes: spawn {n_ours} (`git worker` itself and worktree add's own children included), "
        f"git worktree add -b {n_add}"]


def bench_beside_spawns(work: Path, env) -> list[str]:
    run(["git", "worker", "spawn", "beside", "--no-fetch"], work, env)
    wt = wt_of(work, "beside")
    alone_start = run(["git", "worker", "start", "--task", "beside"], work, env)[0]
    alone_hb = run(["git", "worker", "heartbeat"], wt, env)[0]
    done = threading.Event()

    def spawns():
        at_once([(["git", "worker", "spawn", f"busy-{i}", "--no-fetch"], work) for i in range(8)], env)
        done.set()

    th = threading.Thread(target=spawns)
    th.start()
    time.sleep(0.3)  # the spawns are under way
    starts, hbs = [], []
    while not done.is_set() and len(hbs) < 10:
        starts.append(run(["git", "worker", "start", "--task", "beside"], work, env, check=False)[0])
        hbs.append(run(["git", "worker", "heartbeat"], wt, env)[0])
    th.join()
    return [f"start beside 8 spawns   max {max(starts):5.2f} s  (alone {alone_start:5.2f} s)  (goal <= 0.2 s)",
            f"heartbeat beside 8 spawns max {max(hbs):5.2f} s  (alone {alone_hb:5.2f} s)  (goal <= 0.2 s)"]



def one_worker(work: Path, env, task: str, rel: str, times: dict) -> None:
    t, _ = run(["git", "worker", "spawn", task, "--no-fetch"], work, env)
    times.setdefault("spawn", []).append(t)
    wt = wt_of(work, task)
    times.setdefault("start", []).append(run(["git", "worker", "start"], wt, env)[0])
    for k in range(3):
        path = wt / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(f"edit {k} of {task}\n")
        run(["git", "add", "--", rel], wt, env)
        run(["git", "commit", "-q", "-m", f"{task}: edit {k}"], wt, env)  # through the hooks (radar requests)
    t, _ = run(["git", "worker", "done"], wt, env)
    times.setdefault("done", []).append(t)


def bench_load(work: Path, env, n: int) -> list[str]:
    """N workers at once, `status --json` polled meanwhile; each figure's p50/p99 against its floor measured in
    the same run: spawn against N `git worktree add -b` at once just before; start, done and status against a
    Python that starts and imports what they need (sqlite3, json, subprocess), run by the same poller alternately."""
    _, adds = at_once([(["git", "worktree", "add", "-q", "-b", f"floor-{n}-{i}", str(work.parent / "plain" / f"floor-{n}-{i}"),
                         "main"], work) for i in range(n)], env)
    times: dict[str, list[float]] = {}
    stop = threading.Event()
    status: list[float] = []
    floor: list[float] = []  # the same poller, alternately: what any Python command costs right now

    def poll():
        while not stop.is_set():
            status.append(run(["git", "worker", "status", "--json"], work, env)[0])
            floor.append(run([sys.executable, "-c", "import sqlite3, json, subprocess"], work, env)[0])

    poller = threading.Thread(target=poll)
    poller.start()
    t0 = time.perf_counter()
    ws = [threading.Thread(target=one_worker, args=(work, env, f"n{n}-w{i}", f"crowd/n{n}-w{i}.txt", times))
          for i in range(n)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    wall = time.perf_counter() - t0
    stop.set()
    poller.join()
    times["status --json"] = status
    traced = Path(env.get("NERVE_WARM_TRACE") or os.devnull)
    said = [ln.split()[1] for ln in traced.read_text().splitlines()] if traced.is_file() else []
    lines = [f"{n:3d} workers ({wall:5.1f} s, load average {os.getloadavg()[0]:4.1f}; goals at 24: spawn and done p99 "
             f"<= 2 s, status --json p99 <= 0.5 s)"
             + (f"; {said.count('served')} of {len(said)} status --json answered by the warm reader" if said else "")]
    kinds = [("spawn", adds, f"{n} worktree add -b at once"), ("start", floor, "python floor"),
             ("done", floor, "python floor"), ("status --json", status and floor, "python floor")]
    if said and len(said) == len(status):  # the poller is the only one asking: its answers in order
        times["  served"] = [t for t, how in zip(status, said) if how == "served"]
        times["  direct"] = [t for t, how in zip(status, said) if how != "served"]
        kinds += [(k, floor, "python floor") for k in ("  served", "  direct") if times[k]]
    for kind, fl, fl_name in kinds:
        xs = times[kind]
        lines.append(f"  {kind:<13} p50 {statistics.median(xs):5.2f} s  p99 {p99(xs):5.2f} s   vs {fl_name:<26} p50 "
                     f"{statistics.median(fl):5.2f} p99 {p99(fl):5.2f}: {statistics.median(xs) / statistics.median(fl):5.2f}x / "
                     f"{p99(xs) / p99(fl):5.2f}x")
    return lines


def bench_radar(work: Path, env, busy: int) -> list[str]:
    """Two live tasks commit the same line while ``busy`` others commit; seconds until `conflicts --json` shows it."""
    for t in ("ra", "rb"):
        run(["git", "worker", "spawn", t, "--no-fetch"], work, env)
    stop = threading.Event()
    busy_tasks = [f"rbusy-{i}" for i in range(busy)]
    at_once([(["git", "worker", "spawn", t, "--no-fetch"], work) for t in busy_tasks], env)

    def churn(task):
        wt, k = wt_of(work, task), 0
        while not stop.is_set():
            (wt / f"{task}.txt").write_text(f"{k}\n")
            run(["git", "add", "-A"], wt, env)
            run(["git", "commit", "-q", "-m", f"{task} {k}"], wt, env)
            k += 1

    threads = [threading.Thread(target=churn, args=(t,)) for t in busy_tasks]
    commit_s = float("nan")
    polls: list[float] = []
    traced: list[str] = []
    for th in threads:
        th.start()
    try:
        time.sleep(1.0)
        for t, word in (("ra", "alpha"), ("rb", "beta")):
            wt = wt_of(work, t)
            (wt / "planted.txt").write_text(f"{word}\n")
            run(["git", "add", "-A"], wt, env)
            if t == "ra":
                run(["git", "commit", "-q", "-m", f"{t}: planted"], wt, env)
                time.sleep(1.0)
        wall0 = time.time()
        commit_s = run(["git", "commit", "-q", "-m", "rb: planted"], wt_of(work, "rb"), env)[0]
        t0 = time.perf_counter()  # from the end of the commit (its own cost is the floor printed)
        seen = None
        traced = _trace(env)
        while time.perf_counter() - t0 < 30:
            took, proc = run(["git", "worker", "conflicts", "--json"], work, env)
            polls.append(took)
            pairs = json.loads(proc.stdout)["pairs"]
            if any({p["a"], p["b"]} == {"ra", "rb"} and p["kind"] == "conflict" for p in pairs):
                seen = time.perf_counter() - t0
                break
            time.sleep(0.05)
    finally:
        stop.set()
        for th in threads:
            th.join()
    floor = run([sys.executable, "-c", "import pygit2, sqlite3"], work, env)[0]
    computed = _first_pass_after(work, wall0) if seen is not None else None
    shown = f"{seen:5.2f} s" if seen is not None else "not within 30 s"
    if computed is not None:
        shown += (f" (the radar runner had it {computed:4.2f} s after the commit started, {computed - commit_s:+5.2f} s "
                  f"from its end; the rest is the reader, `conflicts --json`)")
    said = [ln.split()[1] for ln in _trace(env)[len(traced):]]
    return [f"radar: a new conflict shows after {shown} with {busy} workers committing  (goal <= 1 s; "
            f"floor: the commit itself took {commit_s:4.2f} s, starting a python that imports pygit2 {floor:4.2f} s)",
            f"  its reader meanwhile: {len(polls)} `conflicts --json` polls, p50 {statistics.median(polls or [0]):4.2f} s, "
            f"max {max(polls or [0]):4.2f} s ({said.count('served')} served by the warm reader, "
            f"{said.count('direct')} direct)"]


def _trace(env) -> list[str]:
    """The warm reader's client trace so far: one line per command that asked it (``served`` or ``direct``)."""
    try:
        return Path(env["NERVE_WARM_TRACE"]).read_text(encoding="utf-8").splitlines()
    except (KeyError, OSError):
        return []


def _first_pass_after(work: Path, wall0: float) -> float | None:
    """Seconds from ``wall0`` (the planted commit's start) to the first radar pass that found a new conflict
    (radar.log)."""
    try:
        lines = (work / ".git" / "nerve" / "radar.log").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        head = line.split(":", 1)[0].split()
        if len(head) == 2 and head[0] == "radar":
            try:
                at = float(head[1])
            except ValueError:
                continue
            if at >= wall0 and "new conflict" in line:
                return at - wall0
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--workers", default="8,24", help="comma-separated crowd sizes (64 takes minutes on 2 cores)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--real", choices=sorted(REAL), help="a real codebase from its PyPI sdist instead")
    ap.add_argument("--before", type=Path, help="`--only one`/`spawn`: also time the git-nerve whose source tree this is")
    ap.add_argument("--only", default="spawn,beside,load,radar", help="comma-separated; `one`: one spawn alone")
    args = ap.parse_args()
    # ignore_cleanup_errors: a radar runner may still be writing its last result as the directory goes
    with tempfile.TemporaryDirectory(prefix="nerve-crowd-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        env = hermetic(root)
        env["NERVE_WARM_TRACE"] = str(root / "warm-trace")  # the warm reader's client says which it answered
        work = real_repo(args.real, root, env) if args.real else build.many_files(root, args.files).work
        files = int(build.git(work, "ls-files", "-z", env=env).count("\0"))
        print(f"repository: {args.real or 'generated'}, {files} files; {os.cpu_count()} cores; warm reader "
              + ("off (NERVE_WARM=0)" if env.get("NERVE_WARM") == "0" else "on (from 4 live tasks)"))
        run(["git", "worker", "spawn", "warmup", "--no-fetch"], work, env)  # the bus, the hooks
        only = set(args.only.split(","))
        lines = []
        if "one" in only:
            lines += bench_one(work, env, max(args.runs, 5), args.before)
        if "spawn" in only:
            lines += bench_spawns(work, env, 16, args.runs, args.before)
        if "beside" in only:
            lines += bench_beside_spawns(work, env)
        for line in lines:
            print(line, flush=True)
        if "load" in only:
            for n in (int(x) for x in args.workers.split(",") if x):
                for line in bench_load(work, env, n):
                    print(line, flush=True)
        if "radar" in only:
            for line in bench_radar(work, env, 24):
                print(line, flush=True)


if __name__ == "__main__":
    main()
