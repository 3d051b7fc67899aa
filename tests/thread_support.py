"""What the tests read of a task's thread straight from the bus."""

from __future__ import annotations

from pathlib import Path

from git_nerve.bus import Bus, rounds


def thread_rounds(bus_path: Path, task: str = "t1") -> list[rounds.Round]:
    """Every round of ``task``'s thread, oldest first."""
    bus = Bus(bus_path)
    try:
        return rounds.load(bus.conn, task, list(range(1, rounds.last_round(bus.conn, task) + 1)))
    finally:
        bus.close()
