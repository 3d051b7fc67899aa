#!/usr/bin/env python3
"""Where a `git worker` command's wall time goes under load (issue 27). Prints, asserts nothing.

N workers at once (each a thread running spawn, start, 3 commits through the hooks, done, with `status --json`
polled meanwhile, as bench/crowd.py), then `start` and `heartbeat` beside 8 running spawns. Every git-nerve
command runs with NERVE_WAITS (git_nerve/waits.py) and reports, as it exits, its CPU time (its own, its git
children's) and what it waited for: locks (by name), the bus's write lock, its git children's wall time. For the
median and the p99 command of each kind the wall time is split:

    wall = python CPU + git (wall of its git children; their CPU in brackets) + locks + bus write + bus opening
           (and its spool ingest) + rest

where "rest" is time the command was runnable but not running (2 cores shared by every process of the crowd:
its run-queue wait, Linux's schedstat, given) and its own I/O. A p99 made of "rest" is CPU share; one made of locks/bus is waiting.

``--before SRC``: the same load run first with the git-nerve whose source tree is SRC (``git archive`` of an
older commit on PYTHONPATH): wall figures side by side (that tree reports no split unless it has waits.py).

``--only alone``: start, done and status --json each alone, click-free against click's path (a tree without
the click-free paths takes click's both ways).

    .venv/bin/python bench/waits.py [--workers 8,24] [--files 3000] [--real click|django] [--before SRC]
    .venv/bin/python bench/waits.py --only alone
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import hermetic  # noqa: E402
from bench.crowd import p99, real_repo, run, wt_of  # noqa: E402
from fixtures.repos import build  # noqa: E402

KINDS = ("spawn", "start", "done", "status", "heartbeat")


class Recorder:
    """Runs commands with NERVE_WAITS set to a file of their own; keeps (kind, wall, report) per command."""

    def __init__(self, root: Path, env: dict):
        self.dir, self.env = root / "waits", env
        self.dir.mkdir(exist_ok=True)
        self.seq = itertools.count()
        self.lock = threading.Lock()
        self.seen: list[tuple[str, float, dict | None]] = []

    def __call__(self, kind: str, argv: list[str], cwd: Path, check: bool = True) -> float:
        f = self.dir / f"{next(self.seq)}.jsonl"
        took, _ = run(argv, cwd, {**self.env, "NERVE_WAITS": str(f)}, check=check)
        try:  # the command's own line: its git children's hooks and the background work it starts write theirs too
            lines = [json.loads(x) for x in f.read_text().splitlines()]
            report = next((r for r in reversed(lines) if r["argv"][:1] == argv[2:3]), None)
        except (OSError, ValueError):
            report = None
        with self.lock:
            self.seen.append((kind, took, report))
        return took

    def background(self) -> list[str]:
        """What else reported (hooks' Python, background recomputes and syncs): count and CPU by argv."""
        by: dict[str, list[float]] = {}
        for f in self.dir.iterdir():
            for line in f.read_text().splitlines():
                r = json.loads(line)
                key = " ".join(r["argv"][:2])
                if r["argv"][:1] not in (["spawn"], ["start"], ["done"], ["status"], ["heartbeat"]):
                    by.setdefault(key, []).append(r["cpu_self"] + r["cpu_children"])
        return [f"  also ran: {k or '(no argv)'}: {len(v)}x, cpu {sum(v):5.2f} s in all" for k, v in sorted(by.items())]

    def take(self) -> list[tuple[str, float, dict | None]]:
        with self.lock:
            seen, self.seen = self.seen, []
        return seen


def worker(rec: Recorder, work: Path, task: str, env: dict) -> None:
    rec("spawn", ["git", "worker", "spawn", task, "--no-fetch"], work)
    wt = wt_of(work, task)
    rec("start", ["git", "worker", "start"], wt)
    for k in range(3):
        path = wt / "crowd" / f"{task}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(f"edit {k} of {task}\n")
        run(["git", "add", "--", str(path)], wt, env)
        run(["git", "commit", "-q", "-m", f"{task}: edit {k}"], wt, env)
    rec("done", ["git", "worker", "done"], wt)


def load(rec: Recorder, work: Path, env: dict, n: int, tag: str) -> tuple[float, list]:
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            rec("status", ["git", "worker", "status", "--json"], work)

    poller = threading.Thread(target=poll)
    poller.start()
    t0 = time.perf_counter()
    ws = [threading.Thread(target=worker, args=(rec, work, f"{tag}{n}-w{i}", env)) for i in range(n)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    stop.set()
    poller.join()
    return time.perf_counter() - t0, rec.take()


def beside(rec: Recorder, work: Path, env: dict, tag: str) -> list:
    """`start` and `heartbeat` of a task while 8 spawns of others run."""
    run(["git", "worker", "spawn", f"{tag}beside", "--no-fetch"], work, env)
    wt = wt_of(work, f"{tag}beside")
    done = threading.Event()

    def spawns():
        ts = [threading.Thread(target=rec, args=("spawn8", ["git", "worker", "spawn", f"{tag}busy-{i}", "--no-fetch"], work))
              for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        done.set()

    th = threading.Thread(target=spawns)
    th.start()
    time.sleep(0.2)  # the spawns are under way
    while not done.is_set():
        rec("start", ["git", "worker", "start", "--task", f"{tag}beside"], work, check=False)
        rec("heartbeat", ["git", "worker", "heartbeat"], wt)
    th.join()
    return rec.take()


def alone(work: Path, env: dict, runs: int, tag: str) -> list[str]:
    """Each agent-facing command alone, its click-free path against click's (the same arguments with one
    repeated, which only click reads), interleaved: medians of wall and CPU (user + sys, children included)."""
    import resource

    def timed(argv, cwd):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        took = run(argv, cwd, env, check=False)[0]
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return took, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)

    for t in ("solo", "solo-done"):
        run(["git", "worker", "spawn", tag + t, "--no-fetch"], work, env)
    wt, wt_done = wt_of(work, tag + "solo"), wt_of(work, tag + "solo-done")
    run(["git", "worker", "start"], wt, env)
    run(["git", "worker", "start"], wt_done, env)
    run(["git", "worker", "done", "--allow-empty"], wt_done, env)
    cases = {  # name: (cwd, fast argv, click argv)
        "start (already WORKING)": (wt, ["start"], ["start", "--json", "--json"]),
        "start --json": (wt, ["start", "--json"], ["start", "--json", "--json"]),
        "done (already IN_REVIEW)": (wt_done, ["done"], ["done", "--allow-empty", "--allow-empty"]),
        "status --json": (work, ["status", "--json"], ["status", "--json", "--json"]),
        "show T --json": (work, ["show", tag + "solo", "--json"], ["show", tag + "solo", "--json", "--json"]),
    }
    t: dict[str, list[tuple[float, float]]] = {}
    for _ in range(runs):
        t.setdefault("pass", []).append(timed([sys.executable, "-c", "pass"], work))
        for name, (cwd, fast, slow) in cases.items():
            t.setdefault(name + " fast", []).append(timed(["git", "worker", *fast], cwd))
            t.setdefault(name + " click", []).append(timed(["git", "worker", *slow], cwd))
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in t.items()}
    p = med["pass"]
    lines = [f"each alone, median of {runs} (interleaved); python -c pass {p[0] * 1000:5.1f} ms (cpu {p[1] * 1000:5.1f})"]
    for name in cases:
        f, c = med[name + " fast"], med[name + " click"]
        lines.append(f"  {name:<26} click-free {f[0] * 1000:6.1f} ms (cpu {f[1] * 1000:5.1f}) vs click {c[0] * 1000:6.1f} ms "
                     f"(cpu {c[1] * 1000:5.1f}): {f[0] / c[0]:4.2f}x; {f[0] / p[0]:4.1f}x python -c pass")
    return lines


def split(wall: float, r: dict | None) -> str:
    if r is None:
        return f"{wall:5.2f} s"
    s = r["spent"]
    locks = sum(v for k, v in s.items() if k.startswith("lock:"))
    named = ",".join(f"{k[5:]} {v:.2f}" for k, v in sorted(s.items()) if k.startswith("lock:") and v >= 0.01)
    rest = wall - r["cpu_self"] - s.get("git", 0) - locks - s.get("bus", 0) - s.get("bus_open", 0)
    return (f"{wall:5.2f} s = py {r['cpu_self']:4.2f} + git {s.get('git', 0):4.2f} ({int(s.get('git_n', 0))}x, cpu "
            f"{r['cpu_children']:4.2f}) + locks {locks:4.2f}{f' ({named})' if named else ''} + bus {s.get('bus', 0):4.2f} "
            f"+ open {s.get('bus_open', 0):4.2f} + rest {rest:4.2f}"
            + (f" (of which runnable, waiting for a CPU: {r['runq']:4.2f})" if r.get("runq") is not None else ""))


def summary(seen: list, kinds=KINDS) -> list[str]:
    lines = []
    for kind in kinds:
        xs = sorted((wall, r) for k, wall, r in seen if k == kind)
        if not xs:
            continue
        med = xs[len(xs) // 2]
        top = xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]
        lines.append(f"  {kind:<9} n={len(xs):<3} p50 {split(*med)}")
        lines.append(f"  {'':<9} {'':<5} p99 {split(*top)}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--workers", default="8,24")
    ap.add_argument("--real", choices=("click", "django"))
    ap.add_argument("--before", type=Path, help="also run it all with the git-nerve of this source tree, first")
    ap.add_argument("--only", default="beside,load")
    args = ap.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="nerve-waits-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        env = hermetic(root)
        work = real_repo(args.real, root, env) if args.real else build.many_files(root, args.files).work
        print(f"repository: {args.real or 'generated'}, {build.git(work, 'ls-files', '-z', env=env).count(chr(0))} files;"
              f" {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}", flush=True)
        run(["git", "worker", "spawn", "warmup", "--no-fetch"], work, env)
        sides = [("before", {**env, "PYTHONPATH": str(args.before)}, "b")] if args.before else []
        sides.append(("now", env, "a"))
        for name, side_env, tag in sides:
            rec = Recorder(root, side_env)
            if "alone" in only:
                for line in alone(work, side_env, 15, tag):
                    print(f"[{name}] {line}", flush=True)
            if "beside" in only:
                seen = beside(rec, work, side_env, tag)
                print(f"[{name}] start / heartbeat beside 8 spawns (goal <= 0.2 s):", flush=True)
                for line in summary(seen, ("start", "heartbeat", "spawn8")):
                    print(line, flush=True)
            for n in (int(x) for x in args.workers.split(",") if x and "load" in only):
                wall, seen = load(rec, work, side_env, n, tag)
                print(f"[{name}] {n} workers ({wall:5.1f} s; load average {os.getloadavg()[0]:.1f}) "
                      f"(goals at 24: spawn, done p99 <= 2 s, status --json p99 <= 0.5 s):", flush=True)
                for line in summary(seen) + rec.background():
                    print(line, flush=True)


if __name__ == "__main__":
    main()
