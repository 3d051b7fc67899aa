"""The workers table: one row per task, its state and liveness."""

from __future__ import annotations

import sqlite3
from collections import namedtuple

COLUMNS = (
    "task_id", "state", "branch", "worktree", "base", "integration", "description",
    "assigned_at", "state_changed_at", "last_heartbeat", "last_activity", "approved_at",
    "heartbeat_status", "progress", "adopted", "pushed", "pushed_sha",
)


class Worker(namedtuple("Worker", COLUMNS, defaults=(0, 0, None))):
    """One row of the workers table (a named tuple: the hooks avoid importing dataclasses).

    Times (assigned_at, state_changed_at, last_heartbeat, last_activity,
    approved_at) are epoch seconds; last_heartbeat, approved_at,
    heartbeat_status and progress may be None. ``adopted``: 1 when the branch
    existed before the task (``spawn --adopt``), None when the task predates that
    record; ``pushed``: 1 once git-nerve itself pushed the branch (``done``); ``pushed_sha``: the value it last
    pushed there, which every write of the branch on the remote leases (None: cannot tell).
    """

    __slots__ = ()

    def as_dict(self) -> dict[str, object]:
        return dict(self._asdict())


_SELECT = f"SELECT {', '.join(COLUMNS)} FROM workers"


def task_key(task_id: str) -> str:
    return task_id.casefold()


def insert(conn: sqlite3.Connection, w: Worker) -> None:
    """Insert a new worker. Raises sqlite3.IntegrityError if the id (or its casefold) exists."""
    values = list(w)
    conn.execute(
        f"INSERT INTO workers({', '.join(COLUMNS)}, task_key) VALUES ({', '.join('?' * (len(COLUMNS) + 1))})",
        (*values, task_key(w.task_id)),
    )


def get(conn: sqlite3.Connection, task_id: str) -> Worker | None:
    row = conn.execute(f"{_SELECT} WHERE task_id = ?", (task_id,)).fetchone()
    return Worker(*row) if row else None


def get_by_key(conn: sqlite3.Connection, task_id: str) -> Worker | None:
    row = conn.execute(f"{_SELECT} WHERE task_key = ?", (task_key(task_id),)).fetchone()
    return Worker(*row) if row else None


def all_workers(conn: sqlite3.Connection, *, states: tuple[str, ...] | None = None) -> list[Worker]:
    sql, params = _SELECT, ()
    if states:
        sql += f" WHERE state IN ({','.join('?' * len(states))})"
        params = states
    return [Worker(*r) for r in conn.execute(sql + " ORDER BY assigned_at, task_id", params)]


def set_state(conn: sqlite3.Connection, task_id: str, expected: str, new: str, ts: float, **extra: object) -> bool:
    """Compare-and-set the state; True when this call changed it."""
    sets = ["state = ?", "state_changed_at = ?", "last_activity = ?"]
    params: list[object] = [new, ts, ts]
    for col, val in extra.items():
        if col not in COLUMNS:
            raise ValueError(col)
        sets.append(f"{col} = ?")
        params.append(val)
    params += [task_id, expected]
    cur = conn.execute(f"UPDATE workers SET {', '.join(sets)} WHERE task_id = ? AND state = ?", params)
    return cur.rowcount == 1


def update(conn: sqlite3.Connection, task_id: str, **values: object) -> bool:
    for col in values:
        if col not in COLUMNS or col == "task_id":
            raise ValueError(col)
    cur = conn.execute(
        f"UPDATE workers SET {', '.join(f'{c} = ?' for c in values)} WHERE task_id = ?",
        (*values.values(), task_id),
    )
    return cur.rowcount == 1


def heartbeat(conn: sqlite3.Connection, task_id: str, ts: float, status: str | None, progress: float | None) -> bool:
    cur = conn.execute(
        "UPDATE workers SET last_heartbeat = ?, last_activity = ?, "
        "heartbeat_status = COALESCE(?, heartbeat_status), progress = COALESCE(?, progress) WHERE task_id = ?",
        (ts, ts, status, progress, task_id),
    )
    return cur.rowcount == 1


def is_legacy_owned(conn: sqlite3.Connection, task_id: str) -> bool:
    """The task was spawned before its branch's ownership record said everything (listed by migration 7): its
    first reader completes the record from the row (:func:`git_nerve.worker.owned.branch_record`)."""
    return conn.execute("SELECT 1 FROM owned_legacy WHERE task_id = ?", (task_id,)).fetchone() is not None


def drop_legacy_owned(conn: sqlite3.Connection, task_id: str) -> None:
    conn.execute("DELETE FROM owned_legacy WHERE task_id = ?", (task_id,))
