"""PostgreSQL's side of a move (:mod:`.move`): its mark, reading everything a schema holds, writing everything
into one. The statements run on connections :class:`.postgres.PostgresState` opens (the driver is imported
there and in :mod:`.postgres_schema` only).

* The mark: the one row of ``<schema>.moved`` (schema version 2), naming where the repository's shared state is
  now. Every transition's and every export's transaction first takes the move's advisory lock shared, then
  reads the mark (:func:`refuse_moved`); the move takes that lock exclusively to write it. So a transition
  either committed before the mark (and the move's read sees it) or sees the mark and changes nothing (exit 2).
* The load is one transaction: every claim upserted (its ``version`` kept), its last transition recorded,
  each machine's events its rows lack appended after its last ``mseq`` (keyed by event id: never twice), its
  cursor and count set, its ``seen_at`` now (leases start afresh on the new store); a mark naming another
  store becomes ``postgres`` again.
"""

from __future__ import annotations

import json

from . import judge, records
from . import postgres_sql as pgsql

_LOCK = "SELECT pg_advisory_xact_lock{}(hashtext('git-nerve-move:' || current_schema()))"


def refuse_moved(conn) -> None:
    """Inside a transition's or an export's transaction: StoreMoved when this schema's mark names another store."""
    conn.execute(_LOCK.format("_shared"))
    row = conn.execute("SELECT target, machine FROM moved WHERE backend <> 'postgres'").fetchone()
    if row is not None:
        raise judge.moved_off({**row[0], "machine": row[1]})


def read_mark(conn) -> dict | None:
    row = conn.execute("SELECT target FROM moved").fetchone()
    return row[0] if row else None


def set_mark(conn, target: dict, machine: str) -> None:
    """Mark this schema moved to ``target``, once every transition under way committed (the exclusive lock)."""
    with conn.transaction():
        conn.execute(_LOCK.format(""))
        conn.execute("INSERT INTO moved (backend, target, machine) VALUES (%s, %s::jsonb, %s) ON CONFLICT (one) "
                     "DO UPDATE SET backend = EXCLUDED.backend, target = EXCLUDED.target, machine = EXCLUDED.machine, "
                     "at = now()", (target["backend"], json.dumps(target, sort_keys=True), machine))


def dump(conn) -> records.Snapshot:
    claims = {}
    for task, state, previous, verb, machine, owner, version, at in conn.execute(
            "SELECT task_id, state, previous, verb, machine, owner, version, extract(epoch FROM at)::float8 "
            "FROM claims ORDER BY task_id"):
        claims[task] = records.Record(task, state, previous, verb, machine, owner, int(version), float(at))
    events: dict[str, list[dict]] = {}
    for event_id, machine, ts, task, kind, payload in conn.execute(
            "SELECT event_id, machine, ts, task_id, kind, payload FROM events ORDER BY machine, mseq"):
        events.setdefault(machine, []).append({"id": event_id, "machine": machine, "ts": ts, "task": task,
                                               "kind": kind, "payload": payload})
    cursors = {m: {k: int(v) for k, v in (c or {}).items()}
               for m, c in conn.execute("SELECT machine, cursor FROM machines")}
    return records.Snapshot(claims, events, cursors)


def load(conn, snap: records.Snapshot) -> dict:
    """Write ``snap`` into this schema in one transaction (see the module); what was written."""
    with conn.transaction():
        conn.execute(_LOCK.format(""))
        for rec in snap.claims.values():
            conn.execute(
                "INSERT INTO claims (task_id, owner, machine, state, previous, verb, version, at) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, to_timestamp(%s)) ON CONFLICT (task_id) DO UPDATE SET owner = "
                "EXCLUDED.owner, machine = EXCLUDED.machine, state = EXCLUDED.state, previous = EXCLUDED.previous, "
                "verb = EXCLUDED.verb, version = EXCLUDED.version, at = EXCLUDED.at",
                (rec.task, rec.owner, rec.machine, rec.state, rec.previous, rec.verb, rec.seq, rec.ts))
            conn.execute("INSERT INTO transitions (task_id, version, previous, state, verb, machine, owner) VALUES "
                         "(%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                         (rec.task, rec.seq, rec.previous, rec.state, rec.verb, rec.machine, rec.owner))
        added = sum(_load_machine(conn, m, snap) for m in sorted(set(snap.events) | set(snap.cursors)))
        conn.execute("UPDATE moved SET backend = 'postgres', target = '{\"backend\": \"postgres\"}'::jsonb, "
                     "at = now() WHERE backend <> 'postgres'")
    return {"claims_written": len(snap.claims), "events_written": added}


def _load_machine(conn, machine: str, snap: records.Snapshot) -> int:
    published = conn.execute(
        "INSERT INTO machines (machine) VALUES (%s) ON CONFLICT (machine) DO UPDATE SET seen_at = now() "
        "RETURNING published", (machine,)).fetchone()[0]
    have = {r[0] for r in conn.execute("SELECT event_id FROM events WHERE machine = %s", (machine,))}
    new = [e for e in snap.events.get(machine, []) if e["id"] not in have]
    pgsql.insert_events(conn, machine, published, new)
    conn.execute("UPDATE machines SET cursor = %s::jsonb, published = %s WHERE machine = %s",
                 (json.dumps(snap.cursors.get(machine, {}), sort_keys=True), published + len(new), machine))
    return len(new)
