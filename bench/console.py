#!/usr/bin/env python3
"""Benchmark of `git nerve console` (issue 15). Prints figures; asserts nothing.

A real repository with 64 spawned workers (worktrees, hooks), the real
`git-nerve console` as a subprocess, and one client subscribed to its
server-sent events. For ``--duration`` seconds:

* each of the 64 workers heartbeats every 5 s (staggered: one beat every
  ~78 ms overall), each through its own bus connection like `git worker
  run` does, with a status naming the beat;
* every ``--commit-every`` seconds one worker commits in its worktree (the
  hook only appends to the spool; the console ingests it).

Latency = from the moment the bus change is committed (the heartbeat's
transaction returned / `git commit` exited) to the moment the client has
read an event showing it. Printed: p50, p99 and max for heartbeats and for
commits, events per second, mean event size, and the console's CPU use.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/console.py [--workers 64] [--interval 5] [--duration 60]
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

from bench.common import spawned_workers, worktrees_of  # noqa: E402
from git_nerve.bus.connection import Bus  # noqa: E402
from git_nerve.worker.heartbeat import record  # noqa: E402


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client(threading.Thread):
    """Reads the event stream; for every change it was told to expect, when it was first seen."""

    def __init__(self, port: int, token: str):
        super().__init__(daemon=True)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.request("GET", f"/api/events?token={token}")
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200
        self.expect: dict[tuple[str, str], float] = {}  # (task, status or sha) -> bus change time
        self.lock = threading.Lock()
        self.heartbeat_ms: list[float] = []
        self.commit_ms: list[float] = []
        self.events = 0
        self.bytes = 0
        self.stop = False

    def watch(self, task: str, what: str, at: float) -> None:
        with self.lock:
            self.expect[(task, what)] = at

    def run(self) -> None:
        data: list[str] = []
        while not self.stop:
            line = self.resp.fp.readline()
            if not line:
                return
            text = line.decode().rstrip("\r\n")
            if text.startswith("data:"):
                data.append(text[5:].lstrip())
                continue
            if text or not data:
                continue
            seen = time.time()
            body = "\n".join(data)
            data = []
            self.events += 1
            self.bytes += len(body)
            state = json.loads(body)
            with self.lock:
                for w in state["workers"]:
                    hb = self.expect.pop((w["task_id"], w["status"] or ""), None)
                    if hb is not None:
                        self.heartbeat_ms.append((seen - hb) * 1000)
                    sha = (w["last_commit"] or {}).get("sha", "")
                    done = self.expect.pop((w["task_id"], sha), None) if sha else None
                    if done is not None:
                        self.commit_ms.append((seen - done) * 1000)


def heartbeats(work: Path, tasks: list[str], worktrees: dict[str, Path], args, on_beat, on_commit) -> tuple[int, int]:
    """For ``args.duration`` seconds: the tasks' heartbeats, staggered so that each beats every ``args.interval``
    seconds, each through a bus connection of its own (as `git worker run` does) with the status "beat N", and every
    ``args.commit_every`` seconds a commit "bench commit N" in one task's worktree. ``on_beat(task, status)`` right
    after each heartbeat, ``on_commit(task, worktree, N)`` right after each commit; (heartbeats, commits)."""
    buses = {t: Bus(work / ".git" / "nerve" / "bus.db") for t in tasks}
    step = args.interval / len(tasks)
    start = time.time()
    beat = commit_no = 0
    next_commit = start + args.commit_every
    while time.time() - start < args.duration:
        t = tasks[beat % len(tasks)]
        status = f"beat {beat}"
        record(buses[t], t, status=status, progress=(beat % 100) / 100, source="bench")
        on_beat(t, status)
        beat += 1
        if time.time() >= next_commit:
            ct = tasks[commit_no % len(tasks)]
            wt = worktrees[ct]
            (wt / f"bench-{commit_no}.txt").write_text(f"{commit_no}\n")
            subprocess.run(["git", "add", "-A"], cwd=wt, check=True)
            subprocess.run(["git", "commit", "-q", "-m", f"bench commit {commit_no}"], cwd=wt, check=True)
            on_commit(ct, wt, commit_no)
            commit_no += 1
            next_commit += args.commit_every
        sleep = start + beat * step - time.time()
        if sleep > 0:
            time.sleep(sleep)
    for b in buses.values():
        b.close()
    return beat, commit_no


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between two heartbeats of one worker")
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--commit-every", type=float, default=1.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="nerve-bench-console-") as tmp:
        work, tasks, t0 = spawned_workers(Path(tmp), args.workers)
        subprocess.run(["git", "worker", "start", "--task", tasks[0]], cwd=work, check=True, stdout=subprocess.DEVNULL)
        print(f"spawned {args.workers} workers in {time.perf_counter() - t0:.1f}s", flush=True)
        worktrees = worktrees_of(work)

        console = subprocess.Popen(["git-nerve", "console", "--json"], cwd=work, stdout=subprocess.PIPE, text=True)
        lines = []
        while not lines or lines[-1].strip() != "}":
            lines.append(console.stdout.readline())
        info = json.loads("".join(lines))
        client = Client(info["port"], info["token"])
        client.start()
        time.sleep(1.0)
        cpu0, wall0 = cpu_seconds(console.pid), time.perf_counter()

        def committed(task: str, wt: Path, n: int) -> None:
            sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=wt, check=True, capture_output=True,
                                 text=True).stdout.strip()
            client.watch(task, sha, time.time())

        beat, commit_no = heartbeats(work, tasks, worktrees, args,
                                     lambda t, status: client.watch(t, status, time.time()), committed)
        time.sleep(2.0)  # let the last changes arrive
        cpu = cpu_seconds(console.pid) - cpu0
        wall = time.perf_counter() - wall0
        client.stop = True
        console.send_signal(2)
        console.wait(timeout=30)

    hb, cm = client.heartbeat_ms, client.commit_ms
    print(f"{args.workers} workers heartbeating every {args.interval:g}s for {args.duration:g}s "
          f"({beat} heartbeats, {commit_no} commits in worktrees)")
    print(f"heartbeat -> event  p50 {pct(hb, 50):7.1f} ms  p99 {pct(hb, 99):7.1f} ms  max {max(hb, default=0):7.1f} ms"
          f"  ({len(hb)}/{beat} seen)")
    print(f"commit    -> event  p50 {pct(cm, 50):7.1f} ms  p99 {pct(cm, 99):7.1f} ms  max {max(cm, default=0):7.1f} ms"
          f"  ({len(cm)}/{commit_no} seen)")
    print(f"events: {client.events} ({client.events / wall:.1f}/s), mean size {client.bytes / max(1, client.events) / 1024:.1f} KiB")
    print(f"console CPU: {cpu:.1f}s over {wall:.1f}s ({100 * cpu / wall:.0f}% of one core)")
    if hb:
        print(f"mean heartbeat latency {statistics.mean(hb):.1f} ms")


if __name__ == "__main__":
    main()
