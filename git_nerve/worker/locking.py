"""The locks the lifecycle (:mod:`.lifecycle`) and :mod:`.merged` both take: the fetch lock
(``fetch_branches``: one fetch at a time) and a task's lock (``task_lock``: held by a merge from publishing
to COMPLETED). Below both, so that neither imports the other for them; ``repo`` is a
:class:`.lifecycle.Repo` (not imported: this module sits below it).
"""

from __future__ import annotations

from pathlib import Path

from ..bus import workers
from ..git import remote as gitremote
from ..locks import hold


def fetch_branches(repo, remote: str, branches: list[str]) -> None:
    """Fetch, one command at a time: concurrent fetches into one repository fail
    ("did not send all necessary objects") when they race on the same objects."""
    with hold(repo.lock_path("fetch"), what="the fetch lock"):
        gitremote.fetch(repo.cwd, remote, branches)


def task_lock(repo, w: workers.Worker) -> Path:
    """The lock a merge holds from publishing to COMPLETED, and that moves out of APPROVED wait for."""
    return repo.lock_path(f"task-{workers.task_key(w.task_id)}")


def add_lock(repo, path) -> Path:
    """The lock of one worktree path, held while a ``git worktree add`` makes it (spawn, a recreated worktree)
    and while a repair removes what a killed add left there: adds of different paths run side by side (git has
    its own locks for what they share), and a repair never races an add of the same path."""
    import hashlib
    import os

    digest = hashlib.sha1(os.path.realpath(os.fspath(path)).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return repo.lock_path(f"add-{digest}")
