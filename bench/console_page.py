#!/usr/bin/env python3
"""Benchmark of the console *page* in real Chromium at 64 live workers (issue 23). Prints figures; asserts nothing.

bench/console.py measures the server (bus change -> event on the wire); this measures what a person sees:
a real repository with ``--workers`` spawned workers heartbeating (staggered, each every ``--interval``
seconds, as bench/console.py does) and one commit in a worktree every ``--commit-every`` seconds, the real
`git-nerve console`, and the page in Debian's Chromium (tests/browser_driver.py, the test suite's Playwright).

* heartbeat -> page: from the heartbeat's transaction to the moment the page's workers table shows its status;
* commit -> page: from `git commit` exiting to the page showing it as the task's last commit;
* diff in the page: from following a link to a task's file to its diff drawn (files list + diff fetched and
  rendered), alternating tasks, while the workers heartbeat.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/console_page.py [--workers 64] [--interval 5] [--duration 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench import console as console_bench  # noqa: E402
from bench.console import pct  # noqa: E402
from bench.common import spawned_workers, worktrees_of  # noqa: E402

# records, in the page, when each "beat N" status and each "bench commit N" first appears in the workers table
OBSERVE = """() => {
  window.__seen = {};
  const look = () => {
    for (const n of document.querySelectorAll('#workers td div')) {
      const t = n.textContent, m = /(beat \\d+|bench commit \\d+)$/.exec(t);
      if (m && !(m[1] in window.__seen)) window.__seen[m[1]] = Date.now();
    }
  };
  new MutationObserver(look).observe(document.getElementById('workers'), {childList: true, subtree: true});
}"""

# follows one link to a file's diff and waits until it is drawn; milliseconds
DIFF = """async ([task, path]) => {
  const t0 = performance.now();
  location.hash = '#/task/' + task + '/diff/' + path;
  const drawn = () => document.querySelector('#task-id').textContent === task &&
    (document.querySelector('#diff [data-testid=diff-path]') || {}).textContent === path &&
    document.querySelector('#diff table.diff tr.line') !== null;
  while (!drawn()) await new Promise(r => requestAnimationFrame(r));
  return performance.now() - t0;
}"""


def heartbeats(work: Path, tasks: list[str], worktrees: dict[str, Path], args, out: dict) -> None:
    """bench/console.py's heartbeats and commits; when each was made, in ``out`` by the status or message the page
    shows."""
    def beaten(task: str, status: str) -> None:
        out["beat"][status] = time.time()

    def committed(task: str, wt: Path, n: int) -> None:
        out["commit"][f"bench commit {n}"] = time.time()

    console_bench.heartbeats(work, tasks, worktrees, args, beaten, committed)


def line(name: str, ms: list[float], of: int) -> str:
    return f"{name:<18} p50 {pct(ms, 50):7.1f} ms  p99 {pct(ms, 99):7.1f} ms  max {max(ms, default=0):7.1f} ms  ({len(ms)}/{of})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=64, help="at least 1")
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--commit-every", type=float, default=1.0)
    parser.add_argument("--diff-files", type=int, default=20, help="files each of the first 8 tasks changes")
    args = parser.parse_args()
    if args.workers < 1 or args.diff_files < 1:
        parser.error("--workers and --diff-files need at least 1")
    from console_support import Browser, Console

    with tempfile.TemporaryDirectory(prefix="nerve-bench-page-") as tmp:
        work, tasks, t0 = spawned_workers(Path(tmp), args.workers)
        worktrees = worktrees_of(work)
        reviewed = tasks[:8]  # fewer when fewer workers run
        for t in reviewed:  # something to review: files of 40 lines each
            wt = worktrees[t]
            for k in range(args.diff_files):
                (wt / f"src/{t}-{k}.py").write_text("".join(f"line {n} of {t}\n" for n in range(40)))
            subprocess.run(["git", "add", "-A"], cwd=wt, check=True)
            subprocess.run(["git", "commit", "-q", "-m", f"{t}: its files"], cwd=wt, check=True)
        print(f"spawned {args.workers} workers in {time.perf_counter() - t0:.1f}s", flush=True)

        console = Console(work)
        browser = Browser.start()
        out: dict = {"beat": {}, "commit": {}}
        diff_ms: list[float] = []
        try:
            browser("goto", url=console.url)
            browser("wait", selector=f"tr.worker[data-task={tasks[-1]}]", timeout=60_000)
            browser("eval", js=OBSERVE)
            feeder = threading.Thread(target=heartbeats, args=(work, tasks, worktrees, args, out), daemon=True)
            feeder.start()
            n = 0
            while feeder.is_alive():
                t = reviewed[n % len(reviewed)]
                path = f"src/{t}-{n % args.diff_files}.py"
                diff_ms.append(browser("eval", js=f"({DIFF})({json.dumps([t, path])})", timeout=30_000))
                n += 1
                time.sleep(0.5)
            feeder.join()
            time.sleep(2.0)
            seen = browser("eval", js="window.__seen")
            served = browser("eval", js="performance.getEntriesByType('resource').map(e => [e.name, e.duration])")
        finally:
            browser.close()
            console.stop()

    beat = [(seen[k] / 1000 - at) * 1000 for k, at in out["beat"].items() if k in seen]
    commit = [(seen[k] / 1000 - at) * 1000 for k, at in out["commit"].items() if k in seen]
    print(f"{args.workers} workers heartbeating every {args.interval:g}s for {args.duration:g}s, the page open in Chromium")
    print(line("heartbeat -> page", beat, len(out["beat"])))
    print(line("commit -> page", commit, len(out["commit"])))
    print(line("diff in the page", diff_ms, len(diff_ms)))
    for name, part in (("  of which /files", "/files"), ("  of which /diff", "/diff?"), ("  of which /task", None)):
        ms = [d for u, d in served if (part in u if part else u.split("?")[0].rsplit("/", 2)[-2] == "task")]
        print(line(name, ms, len(ms)))


if __name__ == "__main__":
    main()
