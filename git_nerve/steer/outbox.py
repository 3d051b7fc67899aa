"""`git nerve outbox`: the acknowledgements and notifications the consumers wrote, oldest first."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from .. import clock
from ..text import clean, clean_line
from ..bus import steer
from ..bus.connection import Bus
from .delivery import DELIVERED

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: seconds between two looks at the outbox under --follow
POLL = 0.5


#: a message told but not read yet by any consumer (no outbox line): listed as ``queued``
QUEUED = "queued"


def status(line: steer.OutboxLine | steer.InboxMessage) -> str:
    """Where a told message stands: queued (nobody has read it), delivered (an agent has it), acknowledged."""
    if isinstance(line, steer.InboxMessage):
        return QUEUED
    return "delivered" if line.kind == DELIVERED else "acknowledged"


def as_dict(line: steer.OutboxLine | steer.InboxMessage) -> dict[str, Any]:
    if isinstance(line, steer.InboxMessage):
        return {"id": None, "ts": clock.iso(line.ts), "consumer": None, "inbox_id": line.id, "kind": line.kind,
                "text": _queued_text(line), "status": QUEUED}
    return {"id": line.id, "ts": clock.iso(line.ts), "consumer": line.consumer, "inbox_id": line.inbox_id,
            "kind": line.kind, "text": line.text, "status": status(line)}


def _queued_text(m: steer.InboxMessage) -> str:
    to = {"task": f"to {m.task_id}", "all": "to every task", "queue": "to the merge queue"}.get(m.scope, m.scope)
    return f'#{m.id} {m.kind} {to}: "{m.text}" (queued: nobody has read it yet)'


def render(line: steer.OutboxLine | steer.InboxMessage) -> str:
    if isinstance(line, steer.InboxMessage):
        return f"{clock.iso(line.ts)}  {QUEUED:<16} {clean(_queued_text(line))}"
    return f"{clock.iso(line.ts)}  {clean_line(line.consumer or '-'):<16} {clean(line.text)}"


def lines(bus: Bus, after: int = 0) -> list[steer.OutboxLine | steer.InboxMessage]:
    """The acknowledgements after id ``after`` and, with ``after`` 0, the messages still queued, oldest first."""
    found: list = steer.outbox_after(bus.conn, after)
    if after == 0:
        found = sorted([*found, *steer.unanswered(bus.conn)], key=lambda x: x.ts)
    return found


def follow(bus: Bus, after: int = 0, *, poll: float = POLL) -> Iterator[steer.OutboxLine]:
    """Every line after ``after``, then each new one as it is written; never ends (Ctrl-C does)."""
    if after == 0:  # first what is queued and what was acknowledged, then each new acknowledgement
        for line in lines(bus):
            if isinstance(line, steer.OutboxLine):
                after = max(after, line.id)
            yield line
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


__all__ = ["POLL", "QUEUED", "as_dict", "follow", "lines", "open_here", "render", "status"]
