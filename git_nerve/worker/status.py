"""Staleness (computed, never stored) and the rows `git worker status` shows."""

from __future__ import annotations

from .. import clock
from ..bus.workers import Worker
from .settings import Settings

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

LIVE = ("ASSIGNED", "WORKING", "CONFLICTED")


def is_stale(w: Worker, *, stale_after: float, review_stale_after: float, at: float | None = None) -> bool:
    """ASSIGNED/WORKING/CONFLICTED with no heartbeat for ``stale_after``; IN_REVIEW with no activity for ``review_stale_after``."""
    now = at if at is not None else clock.now()
    if w.state in LIVE:
        return now - (w.last_heartbeat or w.assigned_at) > stale_after
    if w.state == "IN_REVIEW":
        return now - w.last_activity > review_stale_after
    return False


def worktree_missing(w: Worker) -> bool:
    """A live task (an agent works there) whose worktree is gone from the disk (removed by hand): status, show and
    the console say so, with the command that recreates it."""
    import os

    return w.state in LIVE and bool(w.worktree) and not os.path.isdir(w.worktree)


def row(w: Worker, settings: Settings | None, at: float | None = None) -> dict[str, Any]:
    stale_after = settings.stale_after if settings else 300.0
    review_after = settings.review_stale_after if settings else 3600.0
    return {
        "task_id": w.task_id,
        "state": w.state,
        "branch": w.branch,
        "worktree": w.worktree,
        "base": w.base,
        "integration": w.integration,
        "description": w.description,
        "assigned_at": clock.iso(w.assigned_at),
        "state_changed_at": clock.iso(w.state_changed_at),
        "last_heartbeat": clock.iso(w.last_heartbeat),
        "last_activity": clock.iso(w.last_activity),
        "status": w.heartbeat_status,
        "progress": w.progress,
        "stale": is_stale(w, stale_after=stale_after, review_stale_after=review_after, at=at),
        "worktree_missing": worktree_missing(w),
    }


#: states whose radar marks `status` shows (a finished task collides with nothing any more)
RADAR_LIVE = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")


def radar_marks(conn, everyone: dict[str, Worker], task_id: str, found: list[str],
                at: float | None) -> tuple[list[str], bool]:
    """The radar marks `status` shows for ``task_id`` and whether they are stale.

    A finished task (COMPLETED, FAILED) carries none, and no mark names one (the radar's last result may
    predate its merge). Stale: the task committed after the radar computed them.
    """
    from ..bus import messages

    w = everyone.get(task_id)
    if w is None or w.state not in RADAR_LIVE:
        return [], False
    shown = []
    for mark in found:
        other = mark.split(": ", 1)[1] if ": " in mark else ""
        if other in everyone and everyone[other].state not in RADAR_LIVE:
            continue
        shown.append(mark)
    if not shown or at is None:
        return shown, False
    commits = messages.for_task(conn, task_id, kinds=("commit", "rewrite"))
    return shown, bool(commits) and commits[-1].ts > at
