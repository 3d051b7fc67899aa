"""What changes the radar asks for a recompute here, and one runner at a time does them, coalesced.

A commit (post-commit hook), ``done``, ``merge`` and ``cancel`` call :func:`.background.request`: the task it concerns is
left as an empty file in ``<git-common-dir>/nerve/radar-pending/`` and, unless a runner is already at work
(the run lock is held), a detached runner is started (:mod:`.background`). The runner takes every pending
request at once, recomputes the pairs they affect (:func:`.scan.recompute`: a pair is computed again only when
one of its sides moved), tells the agents, and goes on while requests keep arriving; under load many
requests become one recompute instead of a queue of processes waiting on the radar lock.

No request is lost: a requester writes its request *before* it looks at the run lock; the runner looks at the
requests again *after* it let the lock go (and takes it again when there are some). Standard library only
(the post-commit hook calls :func:`request`).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..filedoor import Refused, remove_own_file

PENDING = ("nerve", "radar-pending")
#: the live states the radar compares (:data:`.scan.LIVE`; that module imports pygit2)
LIVE = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")
#: a request for every task (a merge or a cancel: what is live changed, every worktree may be looked at)
ALL = "@all"


def pending_dir(common_dir: str | os.PathLike[str]) -> Path:
    return Path(common_dir).joinpath(*PENDING)


def run_lock(common_dir: str | os.PathLike[str]) -> Path:
    return Path(common_dir) / "nerve" / "locks" / "radar-run.lock"


def add(common_dir: str | os.PathLike[str], tasks: list[str] | None) -> None:
    """Leave a request for ``tasks`` (None: every task)."""
    from ..paths import create_file, make_dirs

    d = make_dirs(pending_dir(common_dir))
    for name in (tasks if tasks is not None else [ALL]):
        if not name or "/" in name or name.startswith("."):
            continue
        try:
            os.close(create_file(d / name, os.O_WRONLY | os.O_CREAT))
        except OSError:
            pass


def take(common_dir: str | os.PathLike[str]) -> tuple[bool, set[str] | None]:
    """(anything pending?, the tasks asked for: None for every task), removing the requests it takes."""
    d = pending_dir(common_dir)
    try:
        names = os.listdir(d)
    except OSError:
        return False, set()
    taken: set[str] = set()
    for name in names:
        try:  # through the door: a request radar.queue.add made (a link or directory there is kept, not taken)
            if not remove_own_file(d / name, within=d, kind="radar-request"):
                continue  # another runner took it (cannot happen under the run lock; harmless)
        except (OSError, Refused):
            continue
        taken.add(name)
    if not taken:
        return False, set()
    return True, (None if ALL in taken else taken)


def waiting(common_dir: str | os.PathLike[str]) -> bool:
    """Is a request pending: a regular file :func:`take` would take (a link or a directory somebody put there is
    no request; counting it would keep a runner looking at it forever)."""
    import stat

    d = pending_dir(common_dir)
    try:
        names = os.listdir(d)
    except OSError:
        return False
    for name in names:
        try:
            if stat.S_ISREG(os.lstat(d / name).st_mode):
                return True
        except OSError:
            continue
    return False


def run(common_dir: str | os.PathLike[str], step, busy=None) -> int:
    """The runner: while requests are pending and nobody else runs, ``step(tasks)`` (tasks: a set, or None
    for all); it keeps the lock while ``busy()`` (work it handed on is under way). Returns how many recomputes
    it made."""
    import time

    from ..locks import LockTimeout, hold

    done = 0
    while waiting(common_dir):
        try:
            with hold(run_lock(common_dir), timeout=0, what="the radar run lock"):
                while True:
                    found, tasks = take(common_dir)
                    if found:
                        step(tasks)
                        done += 1
                    elif busy is not None and busy():
                        time.sleep(0.05)
                    else:
                        break
        except LockTimeout:
            return done  # another runner is at work: it looks at the requests after it lets the lock go
    return done


__all__ = ["ALL", "LIVE", "add", "pending_dir", "run", "run_lock", "take", "waiting"]
