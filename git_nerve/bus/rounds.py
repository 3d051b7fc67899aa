"""Thread rounds: each task's conversation, 1-based and stable per thread.

The round number is assigned inside the write transaction (max + 1 over the
``(thread_id, round, size)`` index), so it never changes once written. Paging
reads ``(round, size)`` from that index alone, newest first, and stops as soon
as the budget is met: the cost depends on the window, not the thread length.
"""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple
from collections.abc import Iterator


TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any


class Round(namedtuple("Round", "round ts role metadata content")):
    """One round of a thread: ``round`` (int), ``ts`` (float), ``role`` (str | None), ``metadata`` (dict),
    ``content`` (str). A named tuple: `git nerve thread`, an agent's hot path, imports no dataclasses."""

    __slots__ = ()


def round_size(content: str, metadata: dict[str, Any] | None) -> int:
    """Characters a round counts against a budget: its content plus its metadata."""
    return len(content) + (len(json.dumps(metadata, ensure_ascii=False)) if metadata else 0)


def append(
    conn: sqlite3.Connection,
    thread_id: str,
    *,
    role: str | None,
    content: str,
    metadata: dict[str, Any] | None,
    ts: float,
) -> int:
    """Append a round inside the caller's write transaction; returns its round id."""
    row = conn.execute("SELECT MAX(round) FROM rounds WHERE thread_id = ?", (thread_id,)).fetchone()
    number = (row[0] or 0) + 1
    conn.execute(
        "INSERT INTO rounds(thread_id, round, ts, role, metadata, content, size) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            thread_id,
            number,
            ts,
            role,
            json.dumps(metadata, ensure_ascii=False, sort_keys=False) if metadata else None,
            content,
            round_size(content, metadata),
        ),
    )
    return number


def last_round(conn: sqlite3.Connection, thread_id: str) -> int:
    row = conn.execute("SELECT MAX(round) FROM rounds WHERE thread_id = ?", (thread_id,)).fetchone()
    return int(row[0] or 0)


def sizes_backwards(conn: sqlite3.Connection, thread_id: str, before: int) -> Iterator[tuple[int, int]]:
    """(round, size) pairs for rounds < ``before``, newest first; lazily, from the index."""
    cur = conn.execute(
        "SELECT round, size FROM rounds WHERE thread_id = ? AND round < ? ORDER BY round DESC",
        (thread_id, before),
    )
    yield from cur


def size_of(conn: sqlite3.Connection, thread_id: str, number: int) -> int | None:
    row = conn.execute("SELECT size FROM rounds WHERE thread_id = ? AND round = ?", (thread_id, number)).fetchone()
    return None if row is None else int(row[0])


def load(conn: sqlite3.Connection, thread_id: str, numbers: list[int]) -> list[Round]:
    """The full rounds for the given round ids, in ascending order."""
    if not numbers:
        return []
    out: list[Round] = []
    for start in range(0, len(numbers), 500):
        chunk = numbers[start:start + 500]
        cur = conn.execute(
            f"SELECT round, ts, role, metadata, content FROM rounds WHERE thread_id = ? AND round IN ({','.join('?' * len(chunk))})",
            (thread_id, *chunk),
        )
        out.extend(Round(r[0], r[1], r[2], json.loads(r[3]) if r[3] else {}, r[4]) for r in cur)
    out.sort(key=lambda r: r.round)
    return out


def of_role(conn: sqlite3.Connection, thread_id: str, role: str) -> list[Round]:
    """Every round of ``role`` in the thread, in order (a thread's radar rounds are few)."""
    cur = conn.execute("SELECT round, ts, role, metadata, content FROM rounds WHERE thread_id = ? AND role = ? "
                       "ORDER BY round", (thread_id, role))
    return [Round(r[0], r[1], r[2], json.loads(r[3]) if r[3] else {}, r[4]) for r in cur]


def count(conn: sqlite3.Connection, thread_id: str) -> int:
    return last_round(conn, thread_id)


def threads(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM rounds ORDER BY thread_id")]


def last_exit(conn: sqlite3.Connection, thread_id: str) -> tuple[int | None, float | None]:
    """(exit code, time) of the thread's newest round recording one (`git worker run`'s); (None, None): none."""
    for meta, ts in conn.execute("SELECT metadata, ts FROM rounds WHERE thread_id = ? AND metadata LIKE '%\"exit_code\"%'"
                                 " ORDER BY round DESC LIMIT 1", (thread_id,)):
        try:
            code = json.loads(meta).get("exit_code")
        except (ValueError, AttributeError):
            return None, None
        return (code if isinstance(code, int) and not isinstance(code, bool) else None), ts
    return None, None
