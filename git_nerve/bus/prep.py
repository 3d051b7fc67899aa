"""The task_prep table: what a task's worktree was given (git_nerve/worktree_prep), one row per task."""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple

COLUMNS = ("task_id", "copied", "salt", "secret_hashes", "port", "setup_state", "setup_log", "setup_pid",
           "setup_exit", "setup_started", "setup_ended", "disk_bytes", "disk_at")

#: states of a task that holds its port block (COMPLETED and FAILED free it)
ENDED = ("COMPLETED", "FAILED")


class Prep(namedtuple("Prep", COLUMNS)):
    __slots__ = ()

    @property
    def copied_paths(self) -> list[str]:
        return json.loads(self.copied or "[]")

    @property
    def hashes(self) -> list[list]:
        return json.loads(self.secret_hashes or "[]")


def get(conn: sqlite3.Connection, task_id: str) -> Prep | None:
    row = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM task_prep WHERE task_id = ?", (task_id,)).fetchone()
    return Prep(*row) if row else None


def set_values(conn: sqlite3.Connection, task_id: str, **values: object) -> None:
    """Insert the task's row when missing, then set ``values`` (JSON for lists)."""
    for col in values:
        if col not in COLUMNS or col == "task_id":
            raise ValueError(col)
    conn.execute("INSERT OR IGNORE INTO task_prep(task_id) VALUES (?)", (task_id,))
    if values:
        vals = [json.dumps(v) if isinstance(v, list) else v for v in values.values()]
        conn.execute(f"UPDATE task_prep SET {', '.join(f'{c} = ?' for c in values)} WHERE task_id = ?",
                     (*vals, task_id))


def ports_in_use(conn: sqlite3.Connection, except_task: str) -> set[int]:
    """Port bases held by live tasks (any state but COMPLETED and FAILED) other than ``except_task``."""
    rows = conn.execute(
        "SELECT p.port FROM task_prep p JOIN workers w ON w.task_id = p.task_id "
        f"WHERE p.port IS NOT NULL AND p.task_id != ? AND w.state NOT IN ({','.join('?' * len(ENDED))})",
        (except_task, *ENDED))
    return {r[0] for r in rows}


def allocate_port(conn: sqlite3.Connection, task_id: str, first: int, end: int, block: int) -> int | None:
    """The task's port base: the one it holds when still free and in range, else the lowest free block of
    [first, end); None when every block is taken. Call inside one write transaction (BEGIN IMMEDIATE)."""
    used = ports_in_use(conn, task_id)
    row = get(conn, task_id)
    mine = row.port if row is not None else None
    if mine is not None and mine not in used and first <= mine and mine + block <= end and (mine - first) % block == 0:
        return mine
    for base in range(first, end - block + 1, block):
        if base not in used:
            set_values(conn, task_id, port=base)
            return base
    set_values(conn, task_id, port=None)
    return None


def live_port(conn: sqlite3.Connection, task_id: str) -> int | None:
    """The task's port base while it is live (None once it ended: its block is free again)."""
    row = conn.execute("SELECT p.port FROM task_prep p JOIN workers w ON w.task_id = p.task_id "
                       f"WHERE p.task_id = ? AND w.state NOT IN ({','.join('?' * len(ENDED))})",
                       (task_id, *ENDED)).fetchone()
    return row[0] if row else None


def set_setup_pid(conn: sqlite3.Connection, task_id: str, pid: int, started: float) -> None:
    """The supervisor's pid, unless that setup already ended (a fast one records its end first)."""
    conn.execute("UPDATE task_prep SET setup_pid = ? WHERE task_id = ? AND setup_state = 'running' "
                 "AND setup_started = ?", (pid, task_id, started))


def end_setup(conn: sqlite3.Connection, task_id: str, started: float | None, state: str, code: int,
              ended: float) -> bool:
    """Record the end of the setup of generation ``started`` (its ``setup_started``): a compare-and-set, so a
    stale supervisor (its worktree removed, a newer setup started by retry) never writes over a newer record.
    True when it was recorded."""
    cur = conn.execute("UPDATE task_prep SET setup_state = ?, setup_exit = ?, setup_ended = ? "
                       "WHERE task_id = ? AND setup_started = ?", (state, code, ended, task_id, started))
    return cur.rowcount > 0
