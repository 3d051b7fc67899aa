"""The append-only message log: every state change, heartbeat, commit, review."""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple


class Message(namedtuple("Message", "id ts task_id kind payload")):
    """One message of the log: id, ts (epoch seconds), task_id (or None), kind, payload (a dict)."""

    __slots__ = ()


def fold_heartbeats(msgs):
    """``msgs`` with each run of heartbeats folded into its count: yields a :class:`Message` or an int (how many
    heartbeats came there), as `git worker show` and the console show a task's history."""
    beats = 0
    for m in msgs:
        if m.kind == "heartbeat":
            beats += 1
            continue
        if beats:
            yield beats
            beats = 0
        yield m
    if beats:
        yield beats


def publish(conn: sqlite3.Connection, task_id: str | None, kind: str, payload: dict[str, object] | None, ts: float) -> int:
    """Append one message; call inside the same write transaction as the change it records."""
    cur = conn.execute(
        "INSERT INTO messages(ts, task_id, kind, payload) VALUES (?, ?, ?, ?)",
        (ts, task_id, kind, json.dumps(payload or {}, ensure_ascii=False, sort_keys=True)),
    )
    return int(cur.lastrowid)


def _row(r: tuple) -> Message:
    return Message(id=r[0], ts=r[1], task_id=r[2], kind=r[3], payload=json.loads(r[4]))


def _select(conn: sqlite3.Connection, where: str, value: object, kinds: tuple[str, ...] | None) -> list[Message]:
    """The messages matching ``where`` (one placeholder, ``value``), of ``kinds`` only when given, oldest first."""
    sql = f"SELECT id, ts, task_id, kind, payload FROM messages WHERE {where}"
    params: list[object] = [value]
    if kinds:
        sql += f" AND kind IN ({','.join('?' * len(kinds))})"
        params.extend(kinds)
    return [_row(r) for r in conn.execute(sql + " ORDER BY id", params)]


def for_task(conn: sqlite3.Connection, task_id: str, *, kinds: tuple[str, ...] | None = None) -> list[Message]:
    return _select(conn, "task_id = ?", task_id, kinds)


def since(conn: sqlite3.Connection, after_id: int = 0, *, kinds: tuple[str, ...] | None = None) -> list[Message]:
    return _select(conn, "id > ?", after_id, kinds)
