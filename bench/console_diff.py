#!/usr/bin/env python3
"""Benchmark of the console's review reads (issue 23). Prints figures; asserts nothing.

A real repository of ``--files`` files (5,000: 50 directories of 100), ``--workers`` spawned workers
(64, heartbeating every 5 s, staggered, each through its own bus connection as `git worker run` does),
one of which (``t00``, spawned from main) changed ``--touched`` files (50) in three commits, and the real
`git-nerve console` as a subprocess. The other workers are spawned from a one-file branch (``small``):
live rows, branches and worktrees all the same, without 63 checkouts of 5,000 files to wait for. Measured through its HTTP server, each request on a fresh connection (as a browser's fetch
after idle):

* ``GET /api/task/t00/files`` (target <= 200 ms) beside its floor, ``git diff --numstat -M base head``;
* ``GET /api/task/t00/diff?path=P`` (target <= 100 ms) beside ``git diff base head -- P``;
* ``GET /`` and ``GET /api/state`` (page/state p50, p99) with the workers beating.

Run from the repository root with the venv's interpreter (well under a minute):
    .venv/bin/python bench/console_diff.py [--files 5000] [--touched 50] [--workers 64] [--rounds 40]
"""

from __future__ import annotations

import argparse
import http.client
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
sys.path.insert(0, str(ROOT / "tests"))

from console_support import Console  # noqa: E402
from fixtures.repos import build  # noqa: E402
from git_nerve.bus.connection import Bus  # noqa: E402
from git_nerve.worker.heartbeat import record  # noqa: E402


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def big_repo(root: Path, files: int) -> Path:
    """``files`` files of 40 lines in directories of 100, one commit (through fast-import: seconds)."""
    work = root / "project"
    work.mkdir()
    build.git(work, "init", "-q", "-b", "main")
    stream = ["commit refs/heads/main", "committer Bench <bench@example.com> 1700000000 +0000", "data 4", "init"]
    for i in range(files):
        body = "".join(f"line {n} of file {i}\n" for n in range(40)).encode()
        stream += [f"M 100644 inline d{i // 100:03d}/f{i % 100:03d}.txt", f"data {len(body)}", body.decode().rstrip("\n")]
    # a small line of work for the other workers to start from (their checkouts stay cheap to make)
    stream += ["commit refs/heads/small", "committer Bench <bench@example.com> 1700000000 +0000", "data 5", "small",
               "M 100644 inline small.txt", "data 6", "small"]
    data = "\n".join(stream).encode() + b"\n"
    subprocess.run(["git", "fast-import", "--quiet"], cwd=work, input=data, check=True)
    build.git(work, "reset", "-q", "--hard", "main")
    return work


def get(port: int, token: str, path: str) -> tuple[float, int, bytes]:
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"X-Nerve-Token": token})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return time.perf_counter() - t0, resp.status, body


def floor(argv: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def beat(bus_path: Path, tasks: list[str], stop: threading.Event, interval: float) -> None:
    buses = {t: Bus(bus_path, create=False) for t in tasks}
    n = 0
    while not stop.is_set():
        t = tasks[n % len(tasks)]
        record(buses[t], t, status=f"beat {n}", source="bench")
        n += 1
        stop.wait(interval / len(tasks))
    for b in buses.values():
        b.close()


def line(name: str, ours: list[float], theirs: list[float] | None, target: float | None) -> None:
    text = f"{name:<28} p50 {statistics.median(ours) * 1000:7.1f} ms  p99 {pct(ours, 99) * 1000:7.1f} ms"
    if theirs:
        text += (f"   floor p50 {statistics.median(theirs) * 1000:6.1f} ms p99 {pct(theirs, 99) * 1000:6.1f} ms"
                 f" (x{statistics.median(ours) / statistics.median(theirs):.1f} at p50)")
    if target:
        text += f"   target <= {target * 1000:.0f} ms: {'ok' if pct(ours, 99) <= target else 'MISSED at p99' if statistics.median(ours) <= target else 'MISSED'}"
    print(text, flush=True)


def profile(work: Path, path: str) -> None:
    import cProfile
    import pstats

    from git_nerve.console import review
    from git_nerve.paths import discover

    paths = discover(work)
    review.files(paths, "t00")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(10):
        review.files(paths, "t00")
        review.diff(paths, "t00", path, None)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--touched", type=int, default=50)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--profile", action="store_true", help="Profile the two reads in process instead (no server).")
    args = ap.parse_args()
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # a memory filesystem where there is one
    with tempfile.TemporaryDirectory(prefix="nerve-bench-diff-", dir=shm) as tmp:
        os.environ.update(build.hermetic_env(Path(tmp) / "home"))
        os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]  # this git-nerve
        t0 = time.perf_counter()
        work = big_repo(Path(tmp), args.files)
        print(f"repository of {args.files} files: {time.perf_counter() - t0:.1f}s", flush=True)
        # the workers, spawned in process (one interpreter; each still gets its worktree, branch and hooks)
        from git_nerve.worker import lifecycle

        tasks = [f"t{i:02d}" for i in range(args.workers)]
        os.chdir(work)
        with lifecycle.open_repo(create=True) as repo:
            lifecycle.spawn(repo, tasks[0], description="bench", fetch=False)  # the first one installs the hooks

            for t in tasks[1:]:  # from the small branch: 63 checkouts of 5,000 files would take minutes
                lifecycle.spawn(repo, t, description=f"bench {t}", from_ref="small", fetch=False)
            print(f"{args.workers} workers spawned: {time.perf_counter() - t0:.1f}s", flush=True)
            wt = Path(lifecycle.get(repo.bus, "t00").worktree)
            bus_path = repo.paths.bus_path
        touched = [f"d{(i * 7) % 50:03d}/f{(i * 13) % 100:03d}.txt" for i in range(args.touched)]
        half = len(touched) // 2
        for part in (touched[:half], touched[half:]):
            for p in part:
                f = wt / p
                lines = f.read_text().splitlines(keepends=True)
                lines[5] = "changed by t00\n"
                lines.insert(20, "added by t00\n")
                f.write_text("".join(lines))
            build.git(wt, "add", "-A")
            build.git(wt, "commit", "-q", "-m", f"t00 edits {len(part)} files")
        (wt / touched[0]).unlink()
        build.git(wt, "commit", "-q", "-am", "t00 deletes one")
        print(f"{args.files} files, {args.workers} workers, t00 touches {len(touched)}: set up in "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
        if args.profile:
            return profile(work, touched[1])
        stop = threading.Event()
        beater = threading.Thread(target=beat, args=(bus_path, tasks, stop, 5.0), daemon=True)
        c = Console(work)
        beater.start()
        try:
            _, status, body = get(c.port, c.token, "/api/task/t00/files")
            listing = json.loads(body)
            assert status == 200 and len(listing["files"]) == len(touched), (status, body[:300])
            base, head = listing["base"], listing["head"]
            path = touched[1]
            numbers = {"files": [], "diff": [], "page": [], "state": [], "numstat": [], "gitdiff": []}
            for _ in range(args.rounds):
                numbers["files"].append(get(c.port, c.token, "/api/task/t00/files")[0])
                numbers["numstat"].append(floor(["git", "diff", "--numstat", "-M", base, head], work))
                numbers["diff"].append(get(c.port, c.token, f"/api/task/t00/diff?path={path}")[0])
                numbers["gitdiff"].append(floor(["git", "diff", base, head, "--", path], work))
                numbers["page"].append(get(c.port, c.token, "/")[0])
                numbers["state"].append(get(c.port, c.token, "/api/state")[0])
        finally:
            stop.set()
            beater.join(10)
            c.stop()
        print(f"through the HTTP server, {args.rounds} requests each, {args.workers} live workers beating:")
        line("files (50 of 5000)", numbers["files"], numbers["numstat"], 0.200)
        line("one file's diff", numbers["diff"], numbers["gitdiff"], 0.100)
        line("page  GET /", numbers["page"], None, None)
        line("state GET /api/state", numbers["state"], None, None)
        print("floors: `git diff --numstat -M base head` and `git diff base head -- P` (a git process each)")
        print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
