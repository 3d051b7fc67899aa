"""Staleness (computed, never stored) and the rows `git worker status` shows."""

from __future__ import annotations

from typing import Any

from .. import clock
from ..bus.workers import Worker
from .settings import Settings

LIVE = ("ASSIGNED", "WORKING", "CONFLICTED")


def is_stale(w: Worker, *, stale_after: float, review_stale_after: float, at: float | None = None) -> bool:
    """ASSIGNED/WORKING/CONFLICTED with no heartbeat for ``stale_after``; IN_REVIEW with no activity for ``review_stale_after``."""
    now = at if at is not None else clock.now()
    if w.state in LIVE:
        return now - (w.last_heartbeat or w.assigned_at) > stale_after
    if w.state == "IN_REVIEW":
        return now - w.last_activity > review_stale_after
    return False


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
    }
