"""What each task's agents used (issue 39): ``usage`` messages, one per round and model, as the agent CLI reported.

A usage message is an ordinary message of the task's log, so it travels with the task's events in shared mode
(other machines' land in ``shared_events``, vetted on arrival: ``shared/vet.py``) and totals are the same on
every machine. Its payload: ``round``, ``role``, ``adapter``, ``run`` (the `git nerve run` it belongs to),
``model`` (as the CLI named it, None when it did not), ``input_tokens``, ``cached_input_tokens``,
``output_tokens``, ``reasoning_tokens`` (None: not reported), ``cost_usd`` (None: unknown) and ``cost_from``
(``agent``: the CLI's own figure, ``prices``: nerve.toml's price table, None). A round whose agent reported no
usage at all leaves one message with ``reported: false`` and no counts: its usage is unknown, and says so.
Sums are made here in Python (no JSON functions asked of SQLite).
"""

from __future__ import annotations

import json
import sqlite3

KIND = "usage"
COUNTS = ("input_tokens", "cached_input_tokens", "output_tokens")
#: what one message's payload may hold (shared/vet.py refuses anything else from another machine)
FIELDS = frozenset({"round", "role", "adapter", "run", "model", "reported", *COUNTS, "reasoning_tokens", "cost_usd",
                    "cost_from"})


def record(conn: sqlite3.Connection, task_id: str, ts: float, *, round: int, role: str, adapter: str, run: str,
           entries: list[dict]) -> None:
    """One round's usage (inside the caller's write transaction): a message per model, or one saying that
    nothing was reported."""
    from .messages import publish

    head = {"round": round, "role": role, "adapter": adapter, "run": run}
    if not entries:
        publish(conn, task_id, KIND, {**head, "reported": False}, ts)
    for entry in entries:
        publish(conn, task_id, KIND, {**head, **{k: v for k, v in entry.items() if k in FIELDS}}, ts)


def events(conn: sqlite3.Connection, *, task_ids: list[str] | None = None, since: float | None = None,
           machine: str | None = None) -> list[dict]:
    """Every usage record this clone knows (its own, and in shared mode other machines' from the cache), each
    a payload with ``task``, ``ts`` and ``machine`` (``machine``: this clone's name for its own, None alone)."""
    where, params = ["kind = ?"], [KIND]
    if task_ids is not None:
        if not task_ids:
            return []
        where.append(f"task_id IN ({','.join('?' * len(task_ids))})")
        params += task_ids
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    sql = " AND ".join(where)
    rows = [(ts, task, machine, payload) for ts, task, payload in
            conn.execute(f"SELECT ts, task_id, payload FROM messages WHERE {sql} ORDER BY id", params)]
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'shared_events'").fetchone():
        rows += conn.execute(f"SELECT ts, task_id, machine, payload FROM shared_events WHERE {sql} ORDER BY ts",
                             params).fetchall()
    out = []
    for ts, task, mach, payload in rows:
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        if isinstance(data, dict):
            out.append({**data, "task": task, "ts": ts, "machine": mach})
    return out


def empty() -> dict:
    """Totals before any round: nothing known yet."""
    return {"input_tokens": None, "cached_input_tokens": None, "output_tokens": None, "cost_usd": None,
            "rounds": 0, "unreported": 0, "known_cost_usd": 0.0}


def add(total: dict, record: dict) -> dict:
    """``total`` with one usage record added. Tokens stay None until a round reports some; ``cost_usd`` is
    None as soon as one record's cost is unknown (``known_cost_usd``: the part that is known)."""
    if record.get("reported") is False:
        total["unreported"] += 1
        total["cost_usd"] = None
        total["_unknown"] = True
        return total
    for key in COUNTS:
        value = record.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total[key] = (total[key] or 0) + value
    cost = record.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        total["known_cost_usd"] = round(total["known_cost_usd"] + float(cost), 6)
    else:
        total["_unknown"] = True
    total["cost_usd"] = None if total.get("_unknown") else total["known_cost_usd"]
    return total


def finish(total: dict) -> dict:
    """The totals as shown: rounds counted once each, the private marks dropped."""
    rounds = total.pop("_rounds", set())
    total.pop("_unknown", None)
    total["rounds"] = len(rounds)
    return total


def totals_by(records: list[dict], key) -> dict:
    """Totals of ``records`` grouped by ``key(record)``."""
    out: dict = {}
    for rec in records:
        k = key(rec)
        total = out.setdefault(k, {**empty(), "_rounds": set()})
        add(total, rec)
        total["_rounds"].add((rec.get("machine"), rec.get("task"), rec.get("round")))
    return {k: finish(v) for k, v in out.items()}


def per_task(conn: sqlite3.Connection, task_ids: list[str]) -> dict[str, dict]:
    """Each task's totals over all its rounds (a task with none: :func:`empty`)."""
    got = totals_by(events(conn, task_ids=task_ids), lambda r: r["task"])
    return {t: got.get(t) or empty() for t in task_ids}


def of_run(conn: sqlite3.Connection, task_id: str, run: str) -> dict:
    """The totals of one `git nerve run` of a task."""
    got = totals_by([r for r in events(conn, task_ids=[task_id]) if r.get("run") == run], lambda r: r["task"])
    return got.get(task_id) or empty()


def since(conn: sqlite3.Connection, ts: float) -> dict:
    """The totals of this clone's own agents over every task since ``ts`` (a day's budget is per clone)."""
    mine = [r for r in events(conn, since=ts) if r["machine"] is None]
    return totals_by(mine, lambda r: None).get(None) or empty()


__all__ = ["COUNTS", "FIELDS", "KIND", "add", "empty", "events", "finish", "of_run", "per_task", "record", "since",
           "totals_by"]
