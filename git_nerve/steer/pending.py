"""The notes hook's "something pending" markers: ``<git-common-dir>/nerve/notes-pending/<task>``.

Every tool call of a Claude Code agent runs its notes hook; almost always there is nothing to hand over.
The hook command is a POSIX sh gate (``notes-hook.sh`` beside this module) that tests the task's marker
(and the runner's stop-request file) and exits at once when neither exists; only then is Python started.

The protocol, so that no note is ever missed (a marker left behind only costs one Python start):

* a writer (`git nerve tell` of a note or a stop) sets the marker of every task it addresses inside its
  transaction, before the commit (a writer killed after its commit still leaves it), and again after the
  commit (a hook that cleared it in between, having read the bus before the commit, is covered);
* the hook clears the marker *before* it reads the bus, and sets it again when, after its run, something is
  still pending (a stop, a delivery not yet acted on by a commit) or when it failed.
"""

from __future__ import annotations

from pathlib import Path

from ..bus import workers
from ..fs import clear_marker, notes_marker, set_marker

#: the message kinds the notes hook hands over (skip/add steer the merge queue)
KINDS = ("note", "stop")
FINISHED = ("COMPLETED", "FAILED")


def addressed(conn, *, scope: str, kind: str, task_id: str | None) -> list[str]:
    """The tasks whose notes hook a message concerns (canonical ids, as the runner names their markers)."""
    if kind not in KINDS:
        return []
    if scope == "task" and task_id is not None:
        w = workers.get(conn, task_id)
        return [w.task_id] if w is not None else []
    if scope == "all":
        return [w.task_id for w in workers.all_workers(conn) if w.state not in FINISHED]
    return []


def mark(nerve_dir: Path, task_ids: list[str]) -> None:
    for task_id in task_ids:
        set_marker(notes_marker(nerve_dir, task_id))


def clear(nerve_dir: Path, task_id: str) -> None:
    clear_marker(notes_marker(nerve_dir, task_id))


__all__ = ["KINDS", "addressed", "clear", "mark"]
