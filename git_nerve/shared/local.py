"""One machine: the SQLite bus is the whole state (today's behaviour): claims and sync do nothing."""

from __future__ import annotations

from ..bus.connection import Bus
from . import SharedState
from .config import SharedConfig


class LocalState(SharedState):
    """No capability beyond the interface (:class:`SharedState`'s are all False)."""

    def __init__(self, config: SharedConfig):
        self.config = config

    def claim(self, bus: Bus, task_id: str, expected: str | None, new: str, verb: str, *, take: bool = False) -> None:
        return None

    def prepare_with_push(self, task_id: str, expected: str | None, new: str, verb: str, remote: str, *,
                          fresh: bool = False) -> None:
        return None

    def landed(self, bus: Bus, pending: object) -> None:
        return None

    def lost(self, pending: object) -> None:
        return None

    def learn(self, bus: Bus, task_id: str) -> None:
        return None

    def takeable(self, bus: Bus) -> list[str]:
        return []

    def take(self, bus: Bus, task_id: str) -> str:
        from ..errors import UsageError

        raise UsageError("takeover moves a task between machines: it needs shared mode (`git nerve init --shared`)")

    def sync(self, bus: Bus, *, rebuild: bool = False) -> dict:
        return {"backend": "local", "machine": None, "exported": 0, "ingested": 0, "claims": 0}

    def freshness(self, bus: Bus) -> str:
        return ""
