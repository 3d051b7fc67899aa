"""A read-only look at the bus for shell completion: no spool ingest, no migration, never creates it.

A TAB press must cost little and change nothing; anything unexpected (no bus yet, a newer or
foreign schema, a locked or unreadable file) gives an empty answer.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def tasks(db: Path) -> list[tuple[str, str, str]]:
    """(task_id, state, description) of every task on the bus at ``db``, by task id; [] when unreadable."""
    if not db.is_file():
        return []
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5)
    except (sqlite3.Error, ValueError, OSError):
        return []
    try:
        rows = conn.execute("SELECT task_id, state, description FROM workers ORDER BY task_id").fetchall()
        return [(str(t), str(s), str(d or "")) for t, s, d in rows]
    except sqlite3.Error:
        return []
    finally:
        conn.close()
