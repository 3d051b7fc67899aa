"""`git nerve outbox`: the acknowledgements and notifications the consumers wrote, oldest first."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from .. import clock
from ..text import clean, clean_line
from ..bus import shared, steer, told
from ..bus.connection import Bus
from .delivery import DELIVERED

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: seconds between two looks at the outbox under --follow
POLL = 0.5


#: a message told but not read yet by any consumer (no outbox line): listed as ``queued``
QUEUED = "queued"


#: a note, stop or post left for a task another machine held (shared mode): listed as ``told elsewhere``
ELSEWHERE = "told elsewhere"


def status(line: steer.OutboxLine | steer.InboxMessage | told.Sent) -> str:
    """Where a told message stands: queued (nobody has read it), delivered (an agent has it), acknowledged; one
    left for another machine: pending, delivered (on some machine) or not delivered."""
    if isinstance(line, told.Sent):
        return {True: "delivered", False: "not delivered"}.get(line.delivered, "pending")
    if isinstance(line, steer.InboxMessage):
        return QUEUED
    return "delivered" if line.kind == DELIVERED else "acknowledged"


def as_dict(line: steer.OutboxLine | steer.InboxMessage | told.Sent) -> dict[str, Any]:
    if isinstance(line, told.Sent):
        return {"id": None, "ts": clock.iso(line.ts), "consumer": None, "inbox_id": None, "kind": line.what,
                "text": _sent_text(line), "status": status(line), "task": line.task_id, "machine": line.machine}
    if isinstance(line, steer.InboxMessage):
        return {"id": None, "ts": clock.iso(line.ts), "consumer": None, "inbox_id": line.id, "kind": line.kind,
                "text": _queued_text(line), "status": QUEUED}
    return {"id": line.id, "ts": clock.iso(line.ts), "consumer": line.consumer, "inbox_id": line.inbox_id,
            "kind": line.kind, "text": line.text, "status": status(line)}


def _queued_text(m: steer.InboxMessage) -> str:
    to = {"task": f"to {m.task_id}", "all": "to every task", "queue": "to the merge queue"}.get(m.scope, m.scope)
    return f'#{m.id} {m.kind} {to}: "{m.text}" (queued: nobody has read it yet)'


def _sent_text(x: told.Sent) -> str:
    text = x.text if len(x.text) <= 60 else x.text[:57] + "..."
    return f'{x.what} to {x.task_id}: "{text}": {x.status}'


def render(line: steer.OutboxLine | steer.InboxMessage | told.Sent) -> str:
    if isinstance(line, told.Sent):
        return f"{clock.iso(line.ts)}  {ELSEWHERE:<16} {clean(_sent_text(line))}"
    if isinstance(line, steer.InboxMessage):
        return f"{clock.iso(line.ts)}  {QUEUED:<16} {clean(_queued_text(line))}"
    return f"{clock.iso(line.ts)}  {clean_line(line.consumer or '-'):<16} {clean(line.text)}"


def lines(bus: Bus, after: int = 0) -> list[steer.OutboxLine | steer.InboxMessage]:
    """The acknowledgements after id ``after`` and, with ``after`` 0, the messages still queued and (shared mode)
    those left for tasks other machines held, with where each was delivered (:func:`git_nerve.bus.told.sent`),
    oldest first."""
    found: list = steer.outbox_after(bus.conn, after)
    if after == 0:  # (shared mode: with what was left for other machines' tasks, and where it stands)
        elsewhere = told.sent(bus.conn, shared.get_meta(bus.conn, shared.MACHINE) or "")
        found = sorted([*found, *steer.unanswered(bus.conn), *elsewhere], key=lambda x: x.ts)
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


__all__ = ["ELSEWHERE", "POLL", "QUEUED", "as_dict", "follow", "lines", "open_here", "render", "status"]
