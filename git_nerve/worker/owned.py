"""Whose a task's branch is: what git-nerve may delete of it, and the record a spawn keeps while it makes one.

* A branch that existed before its task (``git worker spawn --adopt``, recorded as the row's ``adopted``)
  is the person's: git-nerve never deletes it, locally or on a remote (merge --delete-branch,
  cancel --cleanup). A task spawned before git-nerve recorded this (``adopted`` NULL) is kept too:
  cannot tell means keep.
* On a remote, git-nerve deletes only a branch it pushed there itself (``done``'s push, recorded as the
  row's ``pushed``), never one it merely found there.
* While ``spawn`` makes a branch it keeps ``<git-common-dir>/nerve/spawn-<task key>`` (the task, the branch,
  whether it was adopted): a spawn killed before its bus row is finished by running it again without taking
  the branch it made for a person's, and a spawn of an id differing only in case is told it collides.

:func:`keep_branch` and :func:`keep_on_remote` are the one check every deletion of a task's branch makes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..bus.workers import Worker, task_key
from ..git import destroy
from ..paths import RepoPaths, create_file, make_dirs


def keep_branch(w: Worker) -> str | None:
    """Why the task's branch must never be deleted (locally or on a remote), as the command says it; None: it may."""
    if w.adopted:
        return f"kept branch {w.branch} (adopted: it existed before the task)"
    if w.adopted is None:
        return (f"kept branch {w.branch} (spawned by an older git-nerve, which did not record whether it existed "
                "before the task)")
    return None


def keep_on_remote(w: Worker, remote: str) -> str | None:
    """Why the task's branch must not be deleted on ``remote``; None when git-nerve pushed it there itself."""
    why = keep_branch(w)
    if why:
        return f"{why} on {remote}"
    if not w.pushed:
        return f"kept branch {w.branch} on {remote} (git-nerve did not push it there)"
    return None


# -- the record of a spawn in progress ------------------------------------------------------------


def _spawn_record(paths: RepoPaths, task_id: str) -> Path:
    return paths.nerve_dir / f"spawn-{task_key(task_id)}"


def spawning(paths: RepoPaths, task_id: str) -> dict | None:
    """The unfinished spawn of ``task_id`` or of an id differing only in case: {task_id, branch, adopted}, or None."""
    try:
        data = json.loads(_spawn_record(paths, task_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("task_id"), str) or not isinstance(data.get("branch"), str):
        return None
    return data


def mark_spawning(paths: RepoPaths, task_id: str, branch: str, *, adopted: bool) -> None:
    """Written before spawn's git work (under the spawn lock of the task's key). Written in place, no temporary
    file a kill could leave: a torn record reads as none, and it is torn only when the git work had not begun."""
    path = _spawn_record(paths, task_id)
    make_dirs(path.parent)
    fd = create_file(path)
    try:
        os.write(fd, json.dumps({"task_id": task_id, "branch": branch, "adopted": adopted}).encode())
    finally:
        os.close(fd)


def clear_spawning(paths: RepoPaths, task_id: str) -> None:
    """The spawn finished (or was rolled back): its record goes, through the door (a regular file of its name)."""
    destroy.remove_own_file(_spawn_record(paths, task_id), within=paths.nerve_dir, kind="spawn-record")


__all__ = ["clear_spawning", "keep_branch", "keep_on_remote", "mark_spawning", "spawning"]
