"""The recompute a commit (or done, merge, cancel) starts and never waits for: ``python -m
git_nerve.radar.background --cwd WORKTREE [--task T]``.

One runner at a time per repository takes every pending request at once (:mod:`.queue`); a request landing
while it runs is picked up by the same runner.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def spawn(worktree: str | os.PathLike[str], task_id: str | None, log: str | os.PathLike[str]) -> subprocess.Popen:
    """Start the recompute detached (new session, no terminal, output to ``log``: :func:`git_nerve.detach.start`)."""
    from .. import detach
    from ..git.cli import clean_env

    return detach.start("git_nerve.radar.background",
                        ["--cwd", os.fspath(worktree), *(["--task", task_id] if task_id else [])],
                        cwd=worktree, log=log, env=clean_env())


def request(common_dir: str | os.PathLike[str], worktree: str | os.PathLike[str], tasks: list[str] | None) -> bool:
    """Ask for a recompute of ``tasks``' pairs (None: all), run from ``worktree``; never waits. True when a
    runner was started (False: one already runs and will take the request)."""
    from ..locks import is_held
    from . import queue

    queue.add(common_dir, tasks)
    if is_held(queue.run_lock(common_dir)):
        return False
    spawn(worktree, None, Path(common_dir) / "nerve" / "radar.log")
    return True


def after(repo, tasks: list[str] | None) -> None:
    """``done``, ``merge`` or ``cancel`` changed what the radar compares (a branch rebased, the integration
    branch moved, a task finished): ask for a recompute of ``tasks``' pairs (None: all) in the background, when
    there is something to compare (two live tasks, or one once the radar ever ran). Never fails the command."""
    from ..bus import workers
    from . import cache, queue

    common = repo.paths.common_dir
    try:
        found = workers.all_workers(repo.bus.conn, states=queue.LIVE)
        _withdraw_finished(found)
        live = len(found)
        if live >= 2 or (live == 1 and cache.path(common).exists()):
            request(common, repo.cwd, tasks)
    except (OSError, ValueError):
        pass


def _withdraw_finished(live) -> None:
    """Now, before the recompute: the live tasks' pending hook notices lose their lines naming a task that
    finished (their next commit must not print it as a live conflict)."""
    from ..dotgit import locate
    from . import notice

    names = {w.task_id for w in live}
    for w in live:
        where = locate(w.worktree) if w.worktree and os.path.isdir(w.worktree) else None
        if where is not None:
            notice.withdraw_finished(where[0], names)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import time

    parser = argparse.ArgumentParser(prog="git_nerve.radar.background")
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--task", action="append", default=[])
    args = parser.parse_args(argv)
    from ..bus import workers
    from ..errors import NerveError
    from ..worker.lifecycle import open_repo
    from . import notify, queue, scan
    from .looker import Looker

    try:
        with open_repo(args.cwd) as repo:
            common = repo.paths.common_dir
            if args.task:
                queue.add(common, args.task)

            looker = Looker(args.cwd)

            def step(tasks):
                # committed work first (no `git status`): a new conflict a commit made shows at once
                result = scan.recompute(repo, changed=tasks, worktrees_too=False)
                notify.after(repo, result)
                print(f"radar {time.time():.3f}: {'all' if tasks is None else len(tasks)} task(s) asked: {result.computed} pair(s) "
                      f"computed, {result.reused} reused in {result.duration_s} s"
                      f"{f', {len(result.new_conflicts)} new conflict(s)' if result.new_conflicts else ''}", flush=True)
                # then every live worktree's uncommitted work, in the looker's thread: a side's snapshot is known
                # from its worktree only (another task's edit since the last look changes its pairs too); the
                # tasks asked for first
                live = sorted(w.task_id for w in workers.all_workers(repo.bus.conn, states=scan.LIVE))
                looker.ask(sorted(tasks or ()) + [t for t in live if t not in (tasks or ())])

            try:
                queue.run(common, step, busy=looker.busy)
            finally:
                looker.close()
    except NerveError as exc:
        print(f"radar: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
