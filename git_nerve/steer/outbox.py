"""`git nerve outbox`: the acknowledgements and notifications the consumers wrote, oldest first."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from .. import clock
from ..text import clean, clean_line
from ..bus import steer
from ..bus.connection import Bus

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: seconds between two looks at the outbox under --follow
POLL = 0.5


def as_dict(line: steer.OutboxLine) -> dict[str, Any]:
    return {"id": line.id, "ts": clock.iso(line.ts), "consumer": line.consumer, "inbox_id": line.inbox_id,
            "kind": line.kind, "text": line.text}


def render(line: steer.OutboxLine) -> str:
    return f"{clock.iso(line.ts)}  {clean_line(line.consumer or '-'):<16} {clean(line.text)}"


def lines(bus: Bus, after: int = 0) -> list[steer.OutboxLine]:
    return steer.outbox_after(bus.conn, after)


def follow(bus: Bus, after: int = 0, *, poll: float = POLL) -> Iterator[steer.OutboxLine]:
    """Every line after ``after``, then each new one as it is written; never ends (Ctrl-C does)."""
    while True:
        found = steer.outbox_after(bus.conn, after)
        for line in found:
            after = line.id
            yield line
        if not found:
            time.sleep(poll)


def open_here(cwd: str | os.PathLike[str] | None = None, *, create: bool = False) -> Bus | None:
    """The bus of the repository at ``cwd``; None when it has none yet (and ``create`` is False)."""
    from ..paths import discover

    path = discover(cwd).bus_path
    if not create and not path.exists():
        return None
    return Bus(path)


__all__ = ["POLL", "as_dict", "follow", "lines", "open_here", "render"]
