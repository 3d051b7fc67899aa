"""The one ownership record: what git-nerve made, so that only that is ever deleted (read by the door,
:mod:`.destroy`, and written by every command that makes something). This module is the only one that reads or
writes it.

* ``<common>/nerve/owned/<kind>-<hash>.json`` (:func:`record`): git-nerve is about to create ``name`` (a task
  worktree, a temporary checkout, a branch, a run's log, a man page link), for ``task``. Written BEFORE the
  thing is made (record-then-create): a kill leaves at most a record of something missing, never an unrecorded
  thing of ours; it outlives the task's bus row; it goes (:func:`forget`) once the thing is gone.
* A task's branch (kind ``branch``) also says whether it is the person's (``adopted``: it existed before the
  task, ``spawn --adopt``, or cannot tell; only ``False`` lets the door delete it) and what git-nerve last pushed
  of it (``pushed``: ``{"remote", "sha"}``, :func:`record_pushed`), the value every write of the branch on the
  remote leases; the door deletes it there only at that value.
* While ``spawn`` makes a branch it keeps ``<common>/nerve/spawn-<task key>`` (:func:`mark_spawning`: the task,
  the branch, whether it was adopted), removed once the bus row is in: a spawn killed before its row is finished
  by running it again, and a spawn of an id differing only in case is told it collides.

Records written by an older git-nerve lack ``adopted`` and ``pushed``; the tasks it spawned are listed once by
the bus (its migration 7) and their records completed from their rows by the first reader
(:func:`git_nerve.worker.owned.branch_record`). Standard library only (repairs and hooks read the records).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..filedoor import keep_or_remove, remove_own_file

#: ownership records, under the common dir
OWNED_DIR = ("nerve", "owned")


def _key(kind: str, name: str) -> str:
    if kind in ("worktree", "tmp"):
        p = os.path.abspath(name)
        name = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
    return name


def _record_path(common: Path, kind: str, name: str) -> Path:
    import hashlib  # here: a reader that imports this module (through the lifecycle) never calls it

    digest = hashlib.sha256(f"{kind}\0{_key(kind, name)}".encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return Path(common).joinpath(*OWNED_DIR) / f"{kind}-{digest}.json"


def record(common: Path, kind: str, name: str, *, task: str | None = None, target: str | None = None,
           **facts: object) -> None:
    """Record that git-nerve is about to create ``name`` (a worktree or tmp path, a branch, a ref; a symbolic
    link to ``target``). ``facts``: a branch's ``adopted``/``pushed``; what a record of the same task already
    says is kept unless given again (a branch restored by ``retry`` is still the one git-nerve pushed)."""
    from ..fs import make_dirs, replace_file

    path = _record_path(common, kind, name)
    make_dirs(path.parent)
    before = recorded(common, kind, name)
    data = {k: v for k, v in (before or {}).items() if k in ("adopted", "pushed")} if (
        before is not None and before.get("task") == task) else {}
    data.update({"kind": kind, "name": _key(kind, name), "task": task, "pid": os.getpid(), "at": time.time()})
    data.update(facts)
    if target is not None:
        data["target"] = target
    replace_file(path, json.dumps(data).encode("utf-8"))


def recorded(common: Path, kind: str, name: str) -> dict | None:
    try:
        data = json.loads(_record_path(common, kind, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("kind") != kind or data.get("name") != _key(kind, name):
        return None
    return data


def recorded_names(common: Path, kind: str) -> list[str]:
    """The names of every record of ``kind`` under ``common`` (a record that cannot be read is left out)."""
    found = []
    for path in sorted(Path(common).joinpath(*OWNED_DIR).glob(f"{kind}-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("kind") == kind and isinstance(data.get("name"), str):
            found.append(data["name"])
    return found


def forget(common: Path, kind: str, name: str) -> None:
    """Drop the record of something that is gone (best effort, through the file door)."""
    keep_or_remove(_record_path(common, kind, name), within=Path(common).joinpath(*OWNED_DIR), kind="owned-record")


# -- a task's branch: whose it is, and what git-nerve last pushed of it -----------------------------------------


def branch_owner(common: Path, branch: str) -> dict | None:
    """The record of ``branch``: {task, adopted, pushed, ...}, or None (git-nerve made no such branch)."""
    return recorded(common, "branch", branch)


def pushed_sha(rec: dict | None) -> tuple[bool, str | None]:
    """(git-nerve pushed the branch of this record, the value it last pushed: None when it cannot tell)."""
    pushed = (rec or {}).get("pushed")
    if not isinstance(pushed, dict):
        return False, None
    sha = pushed.get("sha")
    return True, sha if isinstance(sha, str) and sha else None


def record_pushed(common: Path, branch: str, task: str, remote: str, sha: str | None) -> None:
    """A push of ``task``'s branch landed on ``remote`` at ``sha``: its record says so (what the next write
    there leases, and the only value the door deletes it at)."""
    rec = branch_owner(common, branch)
    adopted = rec.get("adopted") if rec is not None and rec.get("task") == task else None
    record(common, "branch", branch, task=task, adopted=adopted if isinstance(adopted, bool) else None,
           pushed={"remote": remote, "sha": sha})


# -- the record of a spawn in progress ---------------------------------------------------------------------------


def _spawn_record(common: Path, task_id: str) -> Path:
    return Path(common) / "nerve" / f"spawn-{task_id.casefold()}"  # the bus's task key


def spawning(common: Path, task_id: str) -> dict | None:
    """The unfinished spawn of ``task_id`` or of an id differing only in case: {task_id, branch, adopted}, or None."""
    try:
        data = json.loads(_spawn_record(common, task_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("task_id"), str) or not isinstance(data.get("branch"), str):
        return None
    return data


def mark_spawning(common: Path, task_id: str, branch: str, *, adopted: bool) -> None:
    """Written before spawn's git work (under the spawn lock of the task's key). Written in place, no temporary
    file a kill could leave: a torn record reads as none, and it is torn only when the git work had not begun."""
    from ..fs import create_file, make_dirs

    path = _spawn_record(common, task_id)
    make_dirs(path.parent)
    fd = create_file(path)
    try:
        os.write(fd, json.dumps({"task_id": task_id, "branch": branch, "adopted": adopted}).encode())
    finally:
        os.close(fd)


def clear_spawning(common: Path, task_id: str) -> None:
    """The spawn finished (or was rolled back): its record goes, through the door (a regular file of its name)."""
    remove_own_file(_spawn_record(common, task_id), within=Path(common) / "nerve", kind="spawn-record")


__all__ = ["OWNED_DIR", "branch_owner", "clear_spawning", "forget", "mark_spawning", "pushed_sha", "record",
           "record_pushed", "recorded", "recorded_names", "spawning"]
