"""Draining the inbox: what a consumer has not seen yet, acted on once.

A consumer (``task:<task-id>`` for `git nerve run` and `git worker run` of
a task, ``merge-all`` for `git worker merge --all`) keeps a cursor on the
bus. :func:`drain` reads the messages after it, decides what they mean,
writes one outbox line per actionable message and moves the cursor, all in
one ``BEGIN IMMEDIATE`` transaction: a consumer that dies before the commit
has changed nothing and sees the same messages again; one that dies after it
has acknowledged them and never sees them again. Nothing is deleted.

What a batch means (:func:`classify`, pure):

* ``stop`` takes absolute precedence wherever it is in the batch: the
  consumer stops; other commands in the batch are acknowledged as not
  applied.
* ``skip``/``add`` are applied in queue order by the merge queue; per task
  the last one wins (``skip t2, add t2`` leaves t2 queued).
* notes are already in the task's thread (`git nerve tell` put them there);
  they are handed back for display and get no outbox line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import clock
from ..bus import steer, workers
from ..bus.steer import quoted, task_consumer  # noqa: F401 - re-exported: the names steer's modules use
from ..bus.connection import Bus
from ..bus.driver import Connection

QUEUE_CONSUMER = "merge-all"




@dataclass(frozen=True)
class Batch:
    """The meaning of the messages one drain read (pure data)."""

    messages: tuple[steer.InboxMessage, ...] = ()
    stop: steer.InboxMessage | None = None  #: the first stop of the batch
    commands: tuple[steer.InboxMessage, ...] = ()  #: skip/add, in queue order
    notes: tuple[steer.InboxMessage, ...] = ()

    @property
    def skip(self) -> tuple[str, ...]:
        return self._last_wins("skip")

    @property
    def add(self) -> tuple[str, ...]:
        return self._last_wins("add")

    def _last_wins(self, kind: str) -> tuple[str, ...]:
        last: dict[str, str] = {}
        for m in self.commands:
            last.pop(m.target or "", None)  # re-insert: the order is that of each task's last command
            last[m.target or ""] = m.kind
        return tuple(t for t, k in last.items() if k == kind)


def classify(messages: list[steer.InboxMessage] | tuple[steer.InboxMessage, ...]) -> Batch:
    """Sort a batch into its stop, its skip/add commands and its notes."""
    stops = [m for m in messages if m.kind == "stop"]
    return Batch(
        messages=tuple(messages),
        stop=stops[0] if stops else None,
        commands=tuple(m for m in messages if m.kind in ("skip", "add")),
        notes=tuple(m for m in messages if m.kind == "note"),
    )


@dataclass(frozen=True)
class Ack:
    """One outbox line answering one message."""

    message: steer.InboxMessage
    text: str




def stop_line(m: steer.InboxMessage) -> str:
    return f"stopped by queued message: {quoted(m)}"


def line(head: str, m: steer.InboxMessage) -> str:
    """``<head>; queued message: "<text>" (queued at <ts>)``; ``head`` starts with the message's kind."""
    return f"{head}; queued message: {quoted(m)}"


def stop_acks(batch: Batch) -> list[Ack]:
    """The lines for a batch holding a stop: the stop, the other stops, the commands not applied."""
    assert batch.stop is not None
    acks = []
    for m in batch.messages:
        if m is batch.stop:
            acks.append(Ack(m, stop_line(m)))
        elif m.kind == "stop":
            acks.append(Ack(m, line("stop: already stopping", m)))
        elif m.kind in ("skip", "add"):
            acks.append(Ack(m, line(f"{m.kind} {m.target}: not applied, stopped by queued message #{batch.stop.id}", m)))
    return acks


def default_acks(conn: Connection, batch: Batch) -> list[Ack]:
    """Acknowledgements of a consumer that only acts on ``stop`` (a task's runs: skip and add
    are addressed to the merge queue alone)."""
    return stop_acks(batch) if batch.stop is not None else []


#: ``respond(conn, batch) -> outbox lines``: runs inside the drain's transaction (bus reads only, no git)
Respond = Callable[[Connection, Batch], list[Ack]]


@dataclass(frozen=True)
class DrainResult:
    consumer: str
    batch: Batch = field(default_factory=Batch)
    acks: tuple[Ack, ...] = ()  #: the outbox lines this drain wrote

    @property
    def stop(self) -> bool:
        return self.batch.stop is not None

    @property
    def stop_message(self) -> str | None:
        """The outbox line of the stop (``stopped by queued message: ...``), or None."""
        return stop_line(self.batch.stop) if self.batch.stop is not None else None

    @property
    def skip(self) -> tuple[str, ...]:
        return self.batch.skip

    @property
    def add(self) -> tuple[str, ...]:
        return self.batch.add

    @property
    def notes(self) -> tuple[steer.InboxMessage, ...]:
        return self.batch.notes

    @property
    def lines(self) -> list[str]:
        return [a.text for a in self.acks]


def drain(bus: Bus, consumer: str, *, task_id: str | None = None, respond: Respond | None = None) -> DrainResult:
    """Read ``consumer``'s new messages, acknowledge them in the outbox and move its cursor, atomically.

    With ``task_id``: the messages for that task (and for every task, from the
    task's creation on); without: the merge queue's (and every task's).
    ``respond`` turns the batch into outbox lines (default: :func:`default_acks`).
    """
    conn = bus.conn
    if steer.last_id(conn) <= steer.cursor(conn, consumer):
        return DrainResult(consumer)  # nothing new: no write lock taken
    with bus.write() as conn:
        after = steer.cursor(conn, consumer)
        if task_id is not None:
            w = workers.get(conn, task_id)
            found = steer.for_task_after(conn, task_id, after, all_since=w.assigned_at if w else None)
        else:
            found = steer.for_queue_after(conn, after)
        batch = classify(found)
        acks = (respond or default_acks)(conn, batch)
        ts = clock.now()
        written = tuple(
            a for a in acks
            if steer.acknowledge(conn, consumer=consumer, inbox_id=a.message.id, kind=a.message.kind, text=a.text, ts=ts)
        )
        steer.advance(conn, consumer, steer.last_id(conn), ts)
    return DrainResult(consumer, batch, written)


__all__ = [
    "QUEUE_CONSUMER", "Ack", "Batch", "DrainResult", "Respond", "classify", "default_acks", "drain", "line",
    "quoted", "stop_acks", "stop_line", "task_consumer",
]
