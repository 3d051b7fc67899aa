"""Notes reaching an agent while it runs: delivered (to which process, when), then acted on.

`git nerve tell --task T "..."` queues a note and appends it to T's thread at
once. A running agent gets it at its next safe point through whichever door
its CLI has: the CLI's own hook (Claude Code's ``PostToolUse``, for example),
the MCP notes tool, or, failing both, the next role's prompt. Each door calls
:func:`deliver`, which hands back the notes this task's agents have not read
yet and, in the same transaction, records who read them, in which process and
when, with one outbox line per note (``git nerve outbox`` shows it). When the
agent has acted on them (its next commit, a stop obeyed, or the agent saying
so through MCP), :func:`acted` records how, again with an outbox line.

A note is delivered once per task: the first door to take it wins, and a
second reader (a retry, another process) does not see it again as new. The
note's text is the person's, never an agent's: it is cleaned of control codes
before any agent sees it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import clock
from ..bus import messages, steer, workers
from ..bus.connection import Bus
from ..text import clean
from .drain import quoted, task_consumer

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: outbox kinds of the lines written here (messages' own kinds are stop/skip/add/note)
DELIVERED = steer.DELIVERED
ACTED = "acted"


_who = steer.who


def deliver(bus: Bus, task_id: str, *, reader: str, via: str, pid: int | None = None) -> list[steer.InboxMessage]:
    """The notes ``task_id``'s agents have not read yet, now marked delivered to ``reader``/``pid``.

    Empty when there is nothing new (no write lock is taken then).
    """
    conn = bus.conn
    w = workers.get(conn, task_id)
    since = w.assigned_at if w else None
    if not steer.undelivered_notes(conn, task_id, all_since=since):
        return []
    if getattr(bus, "boxed", False):
        return _deliver_from_box(conn, task_id, since, reader=reader, via=via, pid=pid)
    with bus.write() as conn:
        found = steer.undelivered_notes(conn, task_id, all_since=since)
        steer.deliver_notes(conn, task_id, found, reader=reader, via=via, pid=pid, ts=clock.now())
    return found


def _deliver_from_box(conn, task_id: str, since, *, reader: str, via: str, pid: int | None) -> list:
    """Inside an agent's box (issue 41): the notes not yet handed over (the bus, or the box's spool, says which
    were), recorded through the box's spool; git-nerve records the delivery outside."""
    from ..bus import spool

    given = spool.box_delivered()
    found = [m for m in steer.undelivered_notes(conn, task_id, all_since=since) if m.id not in given]
    if found:
        spool.append_box("deliver", {"ids": [m.id for m in found], "reader": reader, "via": via, "pid": pid,
                                     "ts": clock.now()})
    return found


def acted(bus: Bus, task_id: str, *, how: str, inbox_ids: list[int] | None = None) -> list[steer.Delivery]:
    """Record that the notes delivered to ``task_id`` (or only ``inbox_ids``) were acted on, and how."""
    conn = bus.conn
    if getattr(bus, "boxed", False) or not any(d.acted_at is None for d in steer.deliveries_for(conn, task_id)):
        return []  # inside a box: settled outside (the runner's own calls, the next hook outside)
    with bus.write() as conn:
        ts = clock.now()
        done = steer.mark_acted(conn, task_id=task_id, acted=how, ts=ts, inbox_ids=inbox_ids)
        for d in done:
            text = _acted_line(conn, d, how)
            steer.acknowledge(conn, consumer=task_consumer(task_id), inbox_id=d.inbox_id, kind=ACTED, ts=ts, text=text)
    return done


def settle(bus: Bus, task_id: str) -> list[steer.Delivery]:
    """Delivered notes a later commit of the task acted on: ``commit <sha7>`` (the first commit recorded
    at or after the delivery's second: git's commit times have whole seconds)."""
    conn = bus.conn
    open_ = [d for d in steer.deliveries_for(conn, task_id) if d.acted_at is None]
    if not open_:
        return []
    commits = [m for m in messages.for_task(conn, task_id, kinds=("commit",)) if m.payload.get("sha")]
    done: list[steer.Delivery] = []
    by_commit: dict[str, list[int]] = {}
    for d in open_:
        after = next((m for m in commits if m.ts >= int(d.ts)), None)
        if after is not None:
            by_commit.setdefault(str(after.payload["sha"]), []).append(d.inbox_id)
    for sha, ids in by_commit.items():
        done += acted(bus, task_id, how=f"commit {sha[:7]}", inbox_ids=ids)
    return done


last_stop = steer.last_stop


def stop_delivered(bus: Bus, task_id: str, *, reader: str, via: str, pid: int | None = None) -> bool:
    """Outbox: the task's stop reached its running agent (once per stop)."""
    m = last_stop(bus.conn, task_id)
    if m is None:
        return False
    if getattr(bus, "boxed", False):  # inside an agent's box: through its spool, recorded outside
        from ..bus import spool

        spool.append_box("deliver", {"stop": m.id, "reader": reader, "via": via, "pid": pid, "ts": clock.now()})
        return True
    with bus.write() as conn:
        return steer.stop_delivered(conn, task_id, m, reader=reader, via=via, pid=pid, ts=clock.now())


def stop_reached(conn, task_id: str) -> str | None:
    """Who the task's last stop was delivered to while its agent ran (the outbox line's words), or None."""
    m = last_stop(conn, task_id)
    if m is None:
        return None
    for line in steer.outbox_for(conn, [m.id]):
        if line.kind == DELIVERED and line.consumer == task_consumer(task_id):
            return line.text.split(":", 1)[0].removeprefix("stop delivered to ")
    return None


def stop_obeyed(bus: Bus, task_id: str, *, how: str) -> bool:
    """Outbox: how the task's stop ended its agent and where its work is (once per stop)."""
    m = last_stop(bus.conn, task_id)
    if m is None or getattr(bus, "boxed", False):  # inside a box: the stop is obeyed, its outbox line not written
        return False
    with bus.write() as conn:
        return steer.acknowledge(conn, consumer=task_consumer(task_id), inbox_id=m.id, kind=ACTED, ts=clock.now(),
                                 text=f"stop acted on: {how}; queued message: {quoted(m)}")


def _acted_line(conn, d: steer.Delivery, how: str) -> str:
    m = steer.message(conn, d.inbox_id)
    quote = quoted(m) if m is not None else f"#{d.inbox_id}"
    return f"note acted on by {d.reader}: {how}; queued message: {quote}"


def for_agent(notes: list[steer.InboxMessage]) -> str:
    """The text an agent is handed: the person's notes, oldest first (empty when there are none)."""
    if not notes:
        return ""
    lines = ["Notes from the person in charge of this task (git nerve tell), oldest first:"]
    lines += [f"- [note #{m.id}, {clock.iso(m.ts)}] {clean(m.text)}" for m in notes]
    return "\n".join(lines)


@dataclass(frozen=True)
class NoteStatus:
    """Where one note stands for one task: queued, delivered, acted on."""

    message: steer.InboxMessage
    delivery: steer.Delivery | None

    @property
    def state(self) -> str:
        if self.delivery is None:
            return "queued"
        return "acted on" if self.delivery.acted_at is not None else "delivered"

    def describe(self) -> str:
        d = self.delivery
        if d is None:
            return "queued (in the thread; no running agent has read it yet)"
        text = f"delivered to {_who(d.reader, d.pid, d.via)} at {clock.iso(d.ts)}"
        if d.acted_at is not None:
            text += f"; acted on at {clock.iso(d.acted_at)}: {d.acted}"
        return text

    def as_dict(self) -> dict[str, Any]:
        d = self.delivery
        return {
            "state": self.state,
            "delivered": None if d is None else {"reader": d.reader, "pid": d.pid, "via": d.via, "ts": clock.iso(d.ts)},
            "acted": None if d is None or d.acted_at is None else {"ts": clock.iso(d.acted_at), "how": d.acted},
        }


def statuses(conn, task_id: str, notes: list[steer.InboxMessage]) -> dict[int, NoteStatus]:
    """Each note's status for ``task_id``, by inbox id."""
    by_id = {d.inbox_id: d for d in steer.deliveries_for(conn, task_id)}
    return {m.id: NoteStatus(m, by_id.get(m.id)) for m in notes if m.kind == "note"}


__all__ = ["ACTED", "DELIVERED", "NoteStatus", "acted", "deliver", "for_agent", "last_stop", "settle", "statuses",
           "stop_delivered", "stop_obeyed", "stop_reached"]
