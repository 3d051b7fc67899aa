"""Time as the bus stores it (epoch seconds) and as people read it (ISO 8601 UTC)."""

from __future__ import annotations

import time


def now() -> float:
    return time.time()


def iso(ts: float | None) -> str | None:
    """``2026-04-23T13:00:00Z`` (seconds precision, UTC), or None."""
    if ts is None:
        return None
    # imported here: the hooks import this module on every commit
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(ts: float | None, at: float | None = None) -> str:
    """A short human age: ``45s``, ``12m``, ``3h``, ``2d``; ``--`` for None."""
    if ts is None:
        return "--"
    secs = max(0, int((at if at is not None else now()) - ts))
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m"
    if secs < 86400:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"
