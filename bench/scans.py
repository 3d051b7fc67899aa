#!/usr/bin/env python3
"""What every `git worker` command pays before its own work, as the number of worktrees grows (issue 27).

Two looks run on every command: (a) the leftover check (``worker.repair.clean_git_leftovers``, what
``repair_leftovers`` runs) and (b) the spool ingest (``bus.spool.ingest``, run when the bus is opened).
Timed in process (median of ``--runs``) in a repository with 8, 24 and 64 linked worktrees that look like
workers' (each with its ``nerve`` dir and context), with nothing to repair and nothing spooled (the common
case), and (b) again with one event spooled in one worktree. Directory looks (``os.scandir`` /
``os.listdir``) and ``stat`` calls (``os.stat`` / ``os.lstat``) are counted per call.

``--before SRC``: the same, side by side, for the git-nerve whose source tree is SRC (``git archive`` of an
older commit, unpacked); each side runs in a child process importing its own ``git_nerve``. Asserts nothing.

``--live K``: K other live commands (liveness tokens held, each with a git child recorded), which the leftover
check reads too.

    .venv/bin/python bench/scans.py [--workers 8,24,64] [--runs 50] [--live 24] [--before /tmp/old-src]
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


def git(*args, cwd) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(where: Path, n: int, env: dict) -> Path:
    """A repository with ``n`` linked worktrees, each with what a worker's has in its git dir."""
    top = where / "main"
    top.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=top, check=True, env=env)
    for i in range(20):
        (top / f"f{i}.txt").write_text(f"{i}\n")
    subprocess.run(["git", "add", "-A"], cwd=top, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=top, check=True, env=env)
    for i in range(n):
        subprocess.run(["git", "worktree", "add", "-q", "-b", f"w{i:02d}", str(where / f"w{i:02d}")], cwd=top,
                       check=True, env=env)
        admin = top / ".git" / "worktrees" / f"w{i:02d}"
        (admin / "nerve").mkdir()
        (admin / "nerve" / ".worker-ctx.json").write_text(json.dumps({"task_id": f"w{i:02d}"}))
    return top


class Counter:
    """Counts directory looks and stats made through ``os`` while active."""

    NAMES = {"scandir": "dirs", "listdir": "dirs", "stat": "stats", "lstat": "stats"}

    def __init__(self):
        self.counts = {"dirs": 0, "stats": 0}
        self._orig = {}

    def __enter__(self):
        for name, what in self.NAMES.items():
            orig = self._orig[name] = getattr(os, name)

            def wrapped(*a, _orig=orig, _what=what, **kw):
                self.counts[_what] += 1
                return _orig(*a, **kw)

            setattr(os, name, wrapped)
        return self

    def __exit__(self, *exc):
        for name, orig in self._orig.items():
            setattr(os, name, orig)


def measure(fn, runs: int) -> dict:
    with Counter() as c:
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"ms": statistics.median(times) * 1000, **c.counts}


def hold_live_tokens(common: Path, k: int) -> list[int]:
    """``k`` tokens of other live commands, each running a git child in a worktree (held by this process
    through descriptors of their own: a lock another descriptor cannot take, as another process's)."""
    import fcntl

    alive = common / "nerve" / "alive"
    alive.mkdir(parents=True, exist_ok=True)
    fds = []
    for i in range(k):
        ident = f"{900000 + i}-{i:x}"
        fd = os.open(alive / ident, os.O_RDWR | os.O_CREAT, 0o664)
        fcntl.flock(fd, fcntl.LOCK_EX)
        fds.append(fd)
        admin = os.path.realpath(common / "worktrees" / f"w{i % 8:02d}")
        (alive / f"{ident}.1").write_text(json.dumps({"kind": "git", "git_dir": admin, "add": None,
                                                       "argv": ["status"]}))
    return fds


def child(top: Path, runs: int, live: int = 0) -> dict:
    """In the child: (a) and (b) timed against the repository at ``top`` with this process's git_nerve."""
    import contextlib
    import io

    from git_nerve import liveness
    from git_nerve.bus import spool
    from git_nerve.bus.connection import Bus
    from git_nerve.paths import discover
    from git_nerve.worker import repair

    liveness.enable()
    paths = discover(top)
    common = paths.common_dir
    liveness.token(common)  # the command's own token, as every command has once it ran git
    bus = Bus(paths.bus_path, ingest=False)
    out = {}
    fds = hold_live_tokens(common, live) if live else []
    with contextlib.redirect_stderr(io.StringIO()):
        out["leftovers"] = measure(lambda: repair.clean_git_leftovers(common, cwd=top, worktree_lock=None), runs)
        spool.ingest(bus)  # whatever the setup left
        out["ingest"] = measure(lambda: spool.ingest(bus), runs)
        one = common / "worktrees" / "w00" / "nerve" / "spool"

        def spooled_one():
            with open(one, "a") as fh:  # what the shim does (a line that is no event: nothing reaches the bus)
                fh.write("noop\n")
            marker = getattr(spool, "mark_spooled", None)
            if marker is not None:
                marker(common)
            spool.ingest(bus)

        out["ingest, one spooled"] = measure(spooled_one, max(5, runs // 5))
    bus.close()
    for fd in fds:
        os.close(fd)
    if live:
        from git_nerve.filedoor import keep_or_remove

        alive = common / "nerve" / "alive"
        for name in os.listdir(alive):
            if name.startswith("9000"):  # the markers this bench planted, through the door as every removal
                keep_or_remove(alive / name, within=alive, kind="liveness")
    return out


def run_child(src: Path, top: Path, runs: int, live: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, __file__, "--child", str(top), "--runs", str(runs), "--live", str(live)],
                          env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child ({src}) failed: {proc.stderr.strip()[-800:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="8,24,64")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--before", type=Path, help="the source tree of another git-nerve, timed alongside")
    ap.add_argument("--live", type=int, default=0,
                    help="that many other live commands, each with a git child running (their liveness tokens)")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.runs, args.live)))
        return
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}
    sides = [("now", ROOT)] + ([("before", args.before.resolve())] if args.before else [])
    print(f"per-command overhead, median of {args.runs} in process, {args.live} other live command(s); "
          f"dirs = scandir/listdir calls, stats = stat/lstat")
    with tempfile.TemporaryDirectory(prefix="nerve-scans-") as tmp:
        for n in (int(x) for x in args.workers.split(",")):
            top = make_repo(Path(tmp) / f"n{n}", n, env)
            res = {name: run_child(src, top, args.runs, args.live) for name, src in sides}
            for what in res["now"]:
                cells = []
                for name, _ in sides:
                    r = res[name][what]
                    cells.append(f"{name} {r['ms']:7.3f} ms {r['dirs']:4d} dirs {r['stats']:4d} stats")
                ratio = ""
                if args.before:
                    ratio = f"   before/now {res['before'][what]['ms'] / max(res['now'][what]['ms'], 1e-9):6.1f}x"
                print(f"{n:3d} worktrees  {what:20s} " + "  |  ".join(cells) + ratio)


if __name__ == "__main__":
    main()
