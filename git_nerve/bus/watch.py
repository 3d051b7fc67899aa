"""Cheap looks at the bus for a live view (`git nerve console`): has anything changed, and where.

Standard library only. Every query here is answered from an index or a
primary key, so a view can ask several times a second without scanning the
message log.
"""

from __future__ import annotations

import json
import sqlite3

from .steer import OutboxLine


def data_version(conn: sqlite3.Connection) -> int:
    """SQLite's ``PRAGMA data_version``: it changes whenever *another* connection commits."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def last_message_id(conn: sqlite3.Connection, task_id: str) -> int:
    """The id of the newest message about ``task_id`` (0 when none): the messages_task index."""
    row = conn.execute("SELECT MAX(id) FROM messages WHERE task_id = ?", (task_id,)).fetchone()
    return int(row[0] or 0)


def last_of_kind(conn: sqlite3.Connection, task_id: str, kind: str) -> tuple[int, float, dict] | None:
    """The newest message of ``kind`` about ``task_id`` as ``(id, ts, payload)``, or None."""
    row = conn.execute(
        "SELECT id, ts, payload FROM messages WHERE task_id = ? AND kind = ? ORDER BY id DESC LIMIT 1", (task_id, kind)
    ).fetchone()
    if row is None:
        return None
    try:
        payload = json.loads(row[2])
    except ValueError:
        payload = {}
    return int(row[0]), float(row[1]), payload if isinstance(payload, dict) else {}


def steering_mark(conn: sqlite3.Connection) -> tuple[int, int, int, int]:
    """(last inbox id, last outbox id, deliveries, deliveries acted on): changes with any steering write."""
    inbox = conn.execute("SELECT COALESCE(MAX(id), 0) FROM inbox").fetchone()[0]
    outbox = conn.execute("SELECT COALESCE(MAX(id), 0) FROM outbox").fetchone()[0]
    delivered, acted = conn.execute("SELECT COUNT(*), COUNT(acted_at) FROM deliveries").fetchone()
    return int(inbox), int(outbox), int(delivered), int(acted)


def outbox_tail(conn: sqlite3.Connection, limit: int) -> list[OutboxLine]:
    """The newest ``limit`` outbox lines, oldest first."""
    rows = conn.execute(
        "SELECT id, ts, consumer, inbox_id, kind, text FROM outbox ORDER BY id DESC LIMIT ?", (limit,)
    ).fetchall()
    return [OutboxLine(*r) for r in reversed(rows)]


__all__ = ["data_version", "last_message_id", "last_of_kind", "outbox_tail", "steering_mark"]
