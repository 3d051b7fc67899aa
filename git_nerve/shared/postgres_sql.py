"""The PostgreSQL backend's statements on a claim (:mod:`.postgres`, :mod:`.postgres_push`): this machine seen,
a claim read, the compare-and-set of a transition with its history row and its doorbell, a claim as the cache
holds it. Each runs inside the caller's transaction, on a connection :mod:`.postgres` opened."""

from __future__ import annotations

import json

from ..bus import shared as cache
from . import records

CLAIM_COLUMNS = "task_id, state, previous, verb, machine, owner, version, extract(epoch FROM at)::float8"


def seen(conn, machine: str) -> None:
    """This machine is there (its leases hold), by the database's clock."""
    conn.execute("INSERT INTO machines (machine) VALUES (%s) ON CONFLICT (machine) DO UPDATE SET seen_at = now()",
                 (machine,))


def claim_name(conn, machine: str, instance: str) -> str:
    """Claim ``machine`` for ``instance`` unless another instance has it (inside the caller's transaction): the
    instance that holds the name now (this one, or the other)."""
    conn.execute("INSERT INTO machine_names (machine, instance) VALUES (%s, %s) ON CONFLICT (machine) DO NOTHING",
                 (machine, instance))
    return conn.execute("SELECT instance FROM machine_names WHERE machine = %s", (machine,)).fetchone()[0]


def current(conn, task_id: str) -> records.Record | None:
    row = conn.execute(f"SELECT {CLAIM_COLUMNS} FROM claims WHERE task_id = %s", (task_id,)).fetchone()
    return record(row) if row else None


def record(row) -> records.Record:
    task_id, state, previous, verb, machine, owner, version, at = row
    return records.Record(task=task_id, state=state, previous=previous, verb=verb, machine=machine, owner=owner,
                          seq=int(version), ts=float(at))


def move(conn, task_id: str, current: records.Record | None, expected: str | None, new: str, verb: str,
          machine: str, take: bool) -> records.Record | None:
    """The compare-and-set (inside the caller's transaction): the new record, or None when the row moved
    since ``current`` was read (read it again)."""
    previous = current.state if current else expected
    owner = machine if take or current is None else current.owner
    if current is None:
        row = conn.execute(
            f"INSERT INTO claims (task_id, owner, machine, state, previous, verb, version) VALUES (%s, %s, %s, %s, %s, "
            f"%s, 1) ON CONFLICT (task_id) DO NOTHING RETURNING {CLAIM_COLUMNS}",
            (task_id, owner, machine, new, previous, verb)).fetchone()
    else:
        row = conn.execute(
            f"UPDATE claims SET owner = %s, machine = %s, state = %s, previous = %s, verb = %s, version = version + 1, "
            f"at = now() WHERE task_id = %s AND version = %s RETURNING {CLAIM_COLUMNS}",
            (owner, machine, new, previous, verb, task_id, current.seq)).fetchone()
    if row is None:
        return None
    rec = record(row)
    conn.execute("INSERT INTO transitions (task_id, version, previous, state, verb, machine, owner) "
                 "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                 (rec.task, rec.seq, rec.previous, rec.state, rec.verb, rec.machine, rec.owner))
    notify(conn, {"machine": machine, "task": task_id, "state": new})
    return rec


def notify(conn, payload: dict) -> None:
    """The doorbell of :meth:`.postgres.PostgresState.watch` (inside the caller's transaction: rung at its commit; the
    tables stay the log, the payload only says who rang)."""
    conn.execute("SELECT pg_notify(current_schema(), %s)", (json.dumps(payload, sort_keys=True),))


def tip(version: int) -> str:
    """What stands for the claim ref's commit in the cache: the row's version."""
    return f"pg:{version}"


def cached(rec: records.Record) -> cache.Claim:
    return cache.Claim(rec.task, rec.owner, rec.machine, rec.state, rec.verb, rec.seq, tip(rec.seq), rec.ts)


def insert_events(conn, machine: str, published: int, events: list[dict]) -> None:
    """``events`` of ``machine`` into the events table, numbered on from ``published`` (inside the caller's
    transaction; an event already there, by its id, is kept as it is)."""
    if not events:
        return
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO events (event_id, machine, mseq, ts, task_id, kind, payload) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb) ON CONFLICT DO NOTHING",
            [(e["id"], machine, published + i, e["ts"], e.get("task"), e["kind"],
              json.dumps(e.get("payload") or {}, sort_keys=True)) for i, e in enumerate(events, 1)])
