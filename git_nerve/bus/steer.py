"""Steering tables: the inbox (`git nerve tell`), one cursor per consumer, the outbox.

The inbox is append-only: draining never deletes or edits a message, it
moves the consumer's cursor. Every function that writes takes the
connection of the caller's ``bus.write()`` transaction, so a drain reads the
messages after its cursor, writes its outbox lines and moves its cursor in
one commit (or not at all). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
import sqlite3


SCOPES = ("task", "all", "queue")
KINDS = ("stop", "skip", "add", "note")


@dataclass(frozen=True)
class InboxMessage:
    id: int
    ts: float
    scope: str  #: 'task' | 'all' | 'queue'
    task_id: str | None  #: the task addressed (scope 'task')
    kind: str  #: 'stop' | 'skip' | 'add' | 'note'
    target: str | None  #: the task named by skip/add
    text: str


@dataclass(frozen=True)
class OutboxLine:
    id: int
    ts: float
    consumer: str | None
    inbox_id: int | None
    kind: str
    text: str


_INBOX = "SELECT id, ts, scope, task_id, kind, target, text FROM inbox"
_OUTBOX = "SELECT id, ts, consumer, inbox_id, kind, text FROM outbox"


# -- the inbox ------------------------------------------------------------------------


def enqueue(
    conn: sqlite3.Connection, *, scope: str, kind: str, text: str, ts: float,
    task_id: str | None = None, target: str | None = None,
) -> int:
    """Append one message; returns its id."""
    if scope not in SCOPES or kind not in KINDS:
        raise ValueError(f"scope {scope!r} / kind {kind!r}")
    cur = conn.execute(
        "INSERT INTO inbox(ts, scope, task_id, kind, target, text) VALUES (?, ?, ?, ?, ?, ?)",
        (ts, scope, task_id, kind, target, text),
    )
    return int(cur.lastrowid)


def message(conn: sqlite3.Connection, inbox_id: int) -> InboxMessage | None:
    """One inbox message by id."""
    row = conn.execute(f"{_INBOX} WHERE id = ?", (inbox_id,)).fetchone()
    return InboxMessage(*row) if row else None


def last_id(conn: sqlite3.Connection) -> int:
    """The newest inbox id (0 when the inbox is empty)."""
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM inbox").fetchone()[0])


def for_task_after(conn: sqlite3.Connection, task_id: str, after: int, *, all_since: float | None) -> list[InboxMessage]:
    """Messages after id ``after`` that a run of ``task_id`` must see, oldest first.

    Those addressed to the task, and those addressed to every task (scope
    'all') queued at or after ``all_since`` (the task's creation: a message
    to "every task" does not reach tasks spawned after it). ``all_since``
    None leaves the 'all' messages out.
    """
    return _concerning(conn, "(scope = 'task' AND task_id = ?)", [task_id], all_since, after=after)


def for_queue_after(conn: sqlite3.Connection, after: int) -> list[InboxMessage]:
    """Messages after id ``after`` for the merge queue (scope 'queue' or 'all'), oldest first."""
    cur = conn.execute(f"{_INBOX} WHERE id > ? AND scope IN ('queue', 'all') ORDER BY id", (after,))
    return [InboxMessage(*r) for r in cur]


def about_task(conn: sqlite3.Connection, task_id: str, *, all_since: float | None) -> list[InboxMessage]:
    """Every message concerning ``task_id`` (addressed to it, to every task, or naming it), oldest first."""
    return _concerning(conn, "(scope = 'task' AND task_id = ?) OR (scope = 'queue' AND target = ?)",
                       [task_id, task_id], all_since)


def _concerning(conn: sqlite3.Connection, who: str, params: list, all_since: float | None, *,
                after: int | None = None) -> list[InboxMessage]:
    """The inbox messages matching ``who`` or, with ``all_since``, addressed to every task at or after it (and only
    those after id ``after`` when given), oldest first."""
    everyone = "" if all_since is None else " OR (scope = 'all' AND ts >= ?)"
    newer = "" if after is None else " AND id > ?"
    params = [*params, *[v for v in (all_since, after) if v is not None]]
    return [InboxMessage(*r) for r in conn.execute(f"{_INBOX} WHERE ({who}{everyone}){newer} ORDER BY id", params)]


# -- cursors --------------------------------------------------------------------------


def cursor(conn: sqlite3.Connection, consumer: str) -> int:
    """The last inbox id ``consumer`` has acted on (0 for a consumer never seen)."""
    row = conn.execute("SELECT last_id FROM cursors WHERE consumer = ?", (consumer,)).fetchone()
    return int(row[0]) if row else 0


def advance(conn: sqlite3.Connection, consumer: str, to: int, ts: float) -> None:
    """Move ``consumer``'s cursor to ``to``; a cursor never moves backwards."""
    conn.execute(
        "INSERT INTO cursors(consumer, last_id, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT(consumer) DO UPDATE SET last_id = MAX(last_id, excluded.last_id), updated_at = excluded.updated_at",
        (consumer, to, ts),
    )


# -- the outbox -----------------------------------------------------------------------


def acknowledge(
    conn: sqlite3.Connection, *, consumer: str | None, inbox_id: int | None, kind: str, text: str, ts: float
) -> bool:
    """Append an outbox line; False when ``consumer`` already has one for this message and kind."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO outbox(ts, consumer, inbox_id, kind, text) VALUES (?, ?, ?, ?, ?)",
        (ts, consumer, inbox_id, kind, text),
    )
    return cur.rowcount == 1


def outbox_after(conn: sqlite3.Connection, after: int = 0, *, limit: int | None = None) -> list[OutboxLine]:
    """Outbox lines after id ``after``, oldest first."""
    sql = f"{_OUTBOX} WHERE id > ? ORDER BY id"
    params: list = [after]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [OutboxLine(*r) for r in conn.execute(sql, params)]


def unanswered(conn: sqlite3.Connection) -> list[InboxMessage]:
    """The messages no consumer has written an outbox line for yet (queued: no agent or queue has read them)."""
    cur = conn.execute(f"{_INBOX} WHERE id NOT IN (SELECT inbox_id FROM outbox WHERE inbox_id IS NOT NULL) ORDER BY id")
    return [InboxMessage(*r) for r in cur]


def outbox_for(conn: sqlite3.Connection, inbox_ids: list[int]) -> list[OutboxLine]:
    """The outbox lines answering the given inbox messages, oldest first."""
    out: list[OutboxLine] = []
    for start in range(0, len(inbox_ids), 500):
        chunk = inbox_ids[start:start + 500]
        cur = conn.execute(f"{_OUTBOX} WHERE inbox_id IN ({','.join('?' * len(chunk))}) ORDER BY id", chunk)
        out.extend(OutboxLine(*r) for r in cur)
    out.sort(key=lambda line: line.id)
    return out


# -- deliveries: notes handed to a running agent -------------------------------------------


@dataclass(frozen=True)
class Delivery:
    inbox_id: int
    task_id: str
    ts: float
    reader: str
    pid: int | None
    via: str  #: 'hook' | 'mcp' | 'prompt'
    acted_at: float | None
    acted: str | None


_DELIVERY = "SELECT inbox_id, task_id, ts, reader, pid, via, acted_at, acted FROM deliveries"
VIAS = ("hook", "mcp", "prompt")


def undelivered_notes(conn: sqlite3.Connection, task_id: str, *, all_since: float | None) -> list[InboxMessage]:
    """The notes for ``task_id`` (to it, or to every task from ``all_since`` on) no agent of it has read yet."""
    sql = (f"{_INBOX} WHERE kind = 'note' AND ((scope = 'task' AND task_id = ?)"
           + (" OR (scope = 'all' AND ts >= ?)" if all_since is not None else "")
           + ") AND id NOT IN (SELECT inbox_id FROM deliveries WHERE task_id = ?) ORDER BY id")
    params: list = [task_id] + ([all_since] if all_since is not None else []) + [task_id]
    return [InboxMessage(*r) for r in conn.execute(sql, params)]


#: the outbox kind of a delivery's line
DELIVERED = "delivered"


def task_consumer(task_id: str) -> str:
    """The consumer of a task's runs: `git nerve run` and `git worker run` share it, so a
    ``stop`` for the task is acted on once, by whichever runs next."""
    return f"task:{task_id}"


def quoted(m: InboxMessage) -> str:
    """``"<full text>" (queued at <ISO timestamp>)``: how every outbox line names its message."""
    from .. import clock

    return f'"{m.text}" (queued at {clock.iso(m.ts)})'


def who(reader: str, pid: int | None, via: str) -> str:
    return f"{reader}" + (f" (pid {pid})" if pid else "") + f" via {via}"


def deliver_notes(conn: sqlite3.Connection, task_id: str, notes: list[InboxMessage], *, reader: str, via: str,
                  pid: int | None, ts: float) -> None:
    """Record that ``notes`` reached ``task_id``'s agent (``reader``/``pid``), one outbox line each, in the
    caller's transaction (steer.delivery.deliver, and the box spool's ``deliver`` lines: bus/spool.py)."""
    for m in notes:
        record_delivery(conn, inbox_id=m.id, task_id=task_id, reader=reader, pid=pid, via=via, ts=ts)
        acknowledge(conn, consumer=task_consumer(task_id), inbox_id=m.id, kind=DELIVERED, ts=ts,
                    text=f"note delivered to {who(reader, pid, via)}; queued message: {quoted(m)}")


def last_stop(conn: sqlite3.Connection, task_id: str) -> InboxMessage | None:
    """The newest ``stop`` addressed to ``task_id`` (its own or to all) since it was assigned."""
    from . import workers

    w = workers.get(conn, task_id)
    stops = [m for m in about_task(conn, task_id, all_since=w.assigned_at if w else None) if m.kind == "stop"]
    return stops[-1] if stops else None


def stop_delivered(conn: sqlite3.Connection, task_id: str, m: InboxMessage, *, reader: str, via: str,
                   pid: int | None, ts: float) -> bool:
    """Outbox: the stop ``m`` reached ``task_id``'s running agent (once per stop), in the caller's transaction."""
    return acknowledge(conn, consumer=task_consumer(task_id), inbox_id=m.id, kind=DELIVERED, ts=ts,
                       text=f"stop delivered to {who(reader, pid, via)}: the agent is asked to end now; "
                            f"queued message: {quoted(m)}")


def record_delivery(
    conn: sqlite3.Connection, *, inbox_id: int, task_id: str, reader: str, pid: int | None, via: str, ts: float
) -> bool:
    """Note that ``inbox_id`` reached ``task_id``'s agent; False when it had already (the first delivery stands)."""
    if via not in VIAS:
        raise ValueError(f"via {via!r}")
    cur = conn.execute(
        "INSERT OR IGNORE INTO deliveries(inbox_id, task_id, ts, reader, pid, via) VALUES (?, ?, ?, ?, ?, ?)",
        (inbox_id, task_id, ts, reader, pid, via),
    )
    return cur.rowcount == 1


def mark_acted(conn: sqlite3.Connection, *, task_id: str, acted: str, ts: float,
               inbox_ids: list[int] | None = None) -> list[Delivery]:
    """Mark the task's delivered notes not yet acted on (or only ``inbox_ids``) as acted on; returns them."""
    sql = f"{_DELIVERY} WHERE task_id = ? AND acted_at IS NULL"
    params: list = [task_id]
    if inbox_ids is not None:
        if not inbox_ids:
            return []
        sql += f" AND inbox_id IN ({','.join('?' * len(inbox_ids))})"
        params.extend(inbox_ids)
    found = [Delivery(*r) for r in conn.execute(sql + " ORDER BY inbox_id", params)]
    for d in found:
        conn.execute("UPDATE deliveries SET acted_at = ?, acted = ? WHERE inbox_id = ? AND task_id = ?",
                     (ts, acted, d.inbox_id, task_id))
    return found


def deliveries_for(conn: sqlite3.Connection, task_id: str) -> list[Delivery]:
    """Every delivery to ``task_id``'s agents, oldest note first."""
    return [Delivery(*r) for r in conn.execute(f"{_DELIVERY} WHERE task_id = ? ORDER BY inbox_id", (task_id,))]


__all__ = [
    "KINDS", "SCOPES", "VIAS", "Delivery", "InboxMessage", "OutboxLine", "about_task", "acknowledge", "advance",
    "cursor", "deliveries_for", "enqueue", "for_queue_after", "for_task_after", "last_id", "mark_acted", "message",
    "outbox_after", "outbox_for", "record_delivery", "unanswered", "undelivered_notes",
]
