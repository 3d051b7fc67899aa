"""The bus as a cache of the shared state (shared mode, :mod:`git_nerve.shared`): every machine's claims and the
events other machines published, plus what a sync last saw. Tables of their own, created on first use (a
cache: dropped and rebuilt by ``git nerve sync --rebuild``), so a single-machine bus never has them.
"""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple

_TABLES = """
CREATE TABLE IF NOT EXISTS shared_claims (
    task_id TEXT PRIMARY KEY,
    owner   TEXT NOT NULL,      -- the machine holding the task
    machine TEXT NOT NULL,      -- the machine that made the last transition
    state   TEXT NOT NULL,
    verb    TEXT NOT NULL,
    seq     INTEGER NOT NULL,   -- transitions in the claim's chain
    tip     TEXT NOT NULL,      -- the claim ref's commit
    ts      REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS shared_events (
    event_id TEXT PRIMARY KEY,  -- <machine>:<its message id>: never ingested twice
    machine  TEXT NOT NULL,
    ts       REAL NOT NULL,
    task_id  TEXT,
    kind     TEXT NOT NULL,
    payload  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS shared_events_kind ON shared_events (kind, task_id);
CREATE TABLE IF NOT EXISTS shared_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS shared_posts (
    event_id TEXT PRIMARY KEY,  -- another machine's post to a task held here, appended to its thread once
    task_id  TEXT NOT NULL,
    round    INTEGER NOT NULL   -- the round it became
);
CREATE TABLE IF NOT EXISTS shared_notes (
    event_id TEXT PRIMARY KEY,  -- another machine's `tell` to a task held here, queued in its inbox once
    task_id  TEXT NOT NULL,
    inbox_id INTEGER            -- the inbox message it became (NULL: not deliverable)
);
CREATE TABLE IF NOT EXISTS shared_holders (
    task_id  TEXT NOT NULL,     -- a task, and a machine a claim accepted here named its holder: only such a
    machine  TEXT NOT NULL,     -- machine's receipt of a note or post to that task counts (issue 36)
    PRIMARY KEY (task_id, machine)
);
"""

#: the kind of the message a post to a task held by another machine leaves in this machine's log (its holder
#: appends it to the task's thread when it ingests it: :func:`deliver_posts`)
THREAD_POST = "thread_post"
#: the kind of the message a `git nerve tell --task T` for a task another machine holds leaves in this machine's
#: log (its holder queues it in its inbox when it ingests it: :func:`git_nerve.bus.told.deliver`)
TELL_NOTE = "tell_note"


#: the kind of the message a holder leaves in its log when it queued another machine's note or stop, or appended its
#: post (``{"event", "teller", "what", "inbox_id" | "round"}``; ``"refused"``: why it could not): the teller's
#: `git nerve outbox` says "delivered on <machine>" from it, and a later holder never delivers that event again
RECEIPT = "told_delivered"


#: the receipts that count (:data:`RECEIPT`, alias ``r``): of a machine that held their task, as the claims accepted
#: here said (a receipt of another machine, forged or garbled, suppresses no delivery and tells the teller nothing)
HELD_RECEIPT = ("SELECT 1 FROM shared_events r JOIN shared_holders h ON h.task_id = r.task_id AND h.machine = r.machine "
                "WHERE r.kind = ?")


def addressed(conn: sqlite3.Connection, machine: str, kind: str, done: str) -> list[tuple]:
    """(event id, sender, ts, task, payload text) of the ``kind`` records (:data:`TELL_NOTE`, :data:`THREAD_POST`)
    to the tasks ``machine`` (this one) holds (its row here, its claim ours) that no machine delivered yet (not in
    the ``done`` table here, no :data:`RECEIPT` of it ingested), oldest first: other machines' (ingested) and this
    machine's own, told while another machine held the task (it took the task over since, issue 36)."""
    return conn.execute(
        "SELECT x.event_id, x.machine, x.ts, x.task_id, x.payload FROM ("
        " SELECT event_id, machine, ts, task_id, payload FROM shared_events WHERE kind = ? AND machine != ?"
        " UNION ALL SELECT ? || ':m' || m.id, ?, m.ts, m.task_id, m.payload FROM messages m"
        " JOIN shared_claims o ON o.task_id = m.task_id AND o.owner = ? WHERE m.kind = ?) x "
        "JOIN workers w ON w.task_id = x.task_id JOIN shared_claims c ON c.task_id = x.task_id AND c.owner = ? "
        f"WHERE x.event_id NOT IN (SELECT event_id FROM {done}) AND NOT EXISTS ({HELD_RECEIPT} "
        "AND r.task_id = x.task_id AND json_extract(r.payload, '$.event') = x.event_id) ORDER BY x.ts, x.event_id",
        (kind, machine, machine, machine, machine, kind, machine, RECEIPT)).fetchall()


def receipt(conn: sqlite3.Connection, task_id: str, event_id: str, sender: str, what: str, ts: float,
            **fields) -> None:
    """This machine's :data:`RECEIPT` of ``event_id`` (inside the delivery's write transaction): its log carries it."""
    conn.execute("INSERT INTO messages(ts, task_id, kind, payload) VALUES (?, ?, ?, ?)",
                 (ts, task_id, RECEIPT, json.dumps({"event": event_id, "teller": sender, "what": what, **fields},
                                                   ensure_ascii=False, sort_keys=True)))


class Claim(namedtuple("Claim", "task_id owner machine state verb seq tip ts")):
    """One task's claim as last seen (a named tuple: the pre-push hook reads the cache and avoids dataclasses)."""

    __slots__ = ()


def ensure(conn: sqlite3.Connection) -> None:
    """The tables, inside the caller's transaction (executescript would commit it)."""
    holders = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'shared_holders'").fetchone() is not None
    for statement in _TABLES.split(";"):
        if statement.strip():
            conn.execute(statement)
    if not holders:  # a cache of an older version: the holders it knows, and the receipts it counted, stay so
        conn.execute("INSERT OR IGNORE INTO shared_holders SELECT task_id, owner FROM shared_claims")
        conn.execute("INSERT OR IGNORE INTO shared_holders SELECT task_id, machine FROM shared_events "
                     "WHERE kind = ? AND task_id IS NOT NULL", (RECEIPT,))


def clear(conn: sqlite3.Connection) -> None:
    """Forget the whole cache (inside a write transaction): ``sync --rebuild``. The record of the posts appended
    here (``shared_posts``), and of the notes queued here (``shared_notes``), is no cache: it stays, so a rebuild
    never delivers a post or a note twice."""
    for table in ("shared_claims", "shared_events", "shared_meta"):
        conn.execute(f"DELETE FROM {table}")


def put_claim(conn: sqlite3.Connection, c: Claim) -> None:
    """The claim as last seen; its holder is remembered as one of the task's (``shared_holders``: a rebuild keeps
    them, as it keeps the record of what was delivered here)."""
    conn.execute("INSERT OR REPLACE INTO shared_claims VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (c.task_id, c.owner, c.machine, c.state, c.verb, c.seq, c.tip, c.ts))
    conn.execute("INSERT OR IGNORE INTO shared_holders VALUES (?, ?)", (c.task_id, c.owner))


def claims(conn: sqlite3.Connection) -> list[Claim]:
    if not _has_tables(conn):
        return []
    return [Claim(*r) for r in conn.execute("SELECT * FROM shared_claims ORDER BY task_id")]


def claims_of(conn: sqlite3.Connection, task_ids) -> dict[str, Claim]:
    """{task: its cached claim} of the tasks named that the cache has (a sync's few live claims: not all 5,000)."""
    wanted = list(dict.fromkeys(task_ids))
    if not wanted or not _has_tables(conn):
        return {}
    out = {}
    for i in range(0, len(wanted), 500):
        part = wanted[i:i + 500]
        rows = conn.execute(f"SELECT * FROM shared_claims WHERE task_id IN ({', '.join('?' * len(part))})", part)
        out.update((r[0], Claim(*r)) for r in rows)
    return out


def claim(conn: sqlite3.Connection, task_id: str) -> Claim | None:
    if not _has_tables(conn):
        return None
    r = conn.execute("SELECT * FROM shared_claims WHERE task_id = ?", (task_id,)).fetchone()
    return Claim(*r) if r else None


#: the meta key naming this machine (written by every sync and claim): what :func:`held_elsewhere` compares with
MACHINE = "machine"


def held_elsewhere(conn: sqlite3.Connection, machine: str | None = None, *,
                   task_id: str | None = None) -> list[tuple[str, str, str, str]]:
    """(task, its local state, the machine holding it, the claim's state) of every task this machine has a row of
    while its claim, as last seen, is held by another machine (``machine``: this one, else the name the last
    sync or claim wrote): the tasks to fence off (:mod:`git_nerve.worker.fencing`). ``task_id``: that task only
    (any spelling of its id; the heartbeat's one lookup)."""
    if not _has_tables(conn):
        return []
    machine = machine if machine is not None else get_meta(conn, MACHINE)
    if not machine:
        return []
    sql = ("SELECT w.task_id, w.state, c.owner, c.state FROM workers w JOIN shared_claims c ON c.task_id = w.task_id "
           "WHERE c.owner != ?")
    if task_id is not None:
        return [tuple(r) for r in conn.execute(sql + " AND w.task_key = ?", (machine, task_id.casefold()))]
    return [tuple(r) for r in conn.execute(sql + " ORDER BY w.task_id", (machine,))]


def add_events(conn: sqlite3.Connection, events: list[dict]) -> int:
    """Insert events not seen before (keyed by event id); how many were new."""
    before = conn.total_changes
    conn.executemany(
        "INSERT OR IGNORE INTO shared_events VALUES (?, ?, ?, ?, ?, ?)",
        [(e["id"], e["machine"], e["ts"], e.get("task"), e["kind"], json.dumps(e.get("payload") or {}, sort_keys=True))
         for e in events])
    return conn.total_changes - before


def event_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """{machine: events of it ingested}."""
    if not _has_tables(conn):
        return {}
    return dict(conn.execute("SELECT machine, COUNT(*) FROM shared_events GROUP BY machine"))


def events(conn: sqlite3.Connection, task_id: str | None = None) -> list[tuple[str, str, float, str | None, str, dict]]:
    if not _has_tables(conn):
        return []
    sql, args = "SELECT event_id, machine, ts, task_id, kind, payload FROM shared_events", ()
    if task_id is not None:
        sql, args = sql + " WHERE task_id = ?", (task_id,)
    return [(*r[:5], json.loads(r[5])) for r in conn.execute(sql + " ORDER BY ts, event_id", args)]


#: the local tables a machine publishes (stream letter: table, the query of one event's fields)
_STREAMS = {
    "m": "SELECT id, ts, task_id, kind, payload FROM messages WHERE id > ? ORDER BY id",
    "r": "SELECT id, ts, thread_id, 'thread_round', json_object('round', round, 'role', role, 'metadata', "
         "json(COALESCE(metadata, 'null')), 'content', content) FROM rounds WHERE id > ? ORDER BY id",
    "i": "SELECT id, ts, task_id, 'note', json_object('scope', scope, 'kind', kind, 'target', target, 'text', text) "
         "FROM inbox WHERE id > ? ORDER BY id",
    "o": "SELECT id, ts, NULL, 'ack', json_object('consumer', consumer, 'inbox_id', inbox_id, 'kind', kind, "
         "'text', text) FROM outbox WHERE id > ? ORDER BY id",
}


def foreign_rounds(conn: sqlite3.Connection, task_id: str, machine: str) -> dict[int, tuple]:
    """{round: (ts, role, metadata, content)} of ``task_id``'s thread as ``machine`` (its holder) published it."""
    if not _has_tables(conn):
        return {}
    out: dict[int, tuple] = {}
    for ts, payload in conn.execute("SELECT ts, payload FROM shared_events WHERE task_id = ? AND machine = ? AND "
                                    "kind = 'thread_round' ORDER BY ts, event_id", (task_id, machine)):
        p = json.loads(payload)
        number = p.get("round")
        if isinstance(number, int) and not isinstance(number, bool) and number >= 1:
            meta = p.get("metadata")
            out[number] = (ts, p.get("role"), meta if isinstance(meta, dict) else {}, str(p.get("content") or ""))
    return out


def remote_sides(conn: sqlite3.Connection, machine: str, kind: str,
                 states: tuple[str, ...]) -> dict[str, tuple[str, str, dict]]:
    """{task: (its holder, event id, payload)}: the last ``kind`` event (the radar's published footprint) of each
    task another machine holds in one of ``states``, published by that holder."""
    if not _has_tables(conn):
        return {}
    out: dict[str, tuple[str, str, dict]] = {}
    for event_id, owner, task, payload in conn.execute(
            "SELECT e.event_id, c.owner, e.task_id, e.payload FROM shared_events e JOIN shared_claims c "
            f"ON c.task_id = e.task_id AND c.owner = e.machine WHERE e.kind = ? AND c.owner != ? AND c.state IN "
            f"({','.join('?' * len(states))}) ORDER BY e.ts, e.event_id", (kind, machine, *states)):
        out[task] = (owner, event_id, json.loads(payload))
    return out


def holders_words(conn: sqlite3.Connection, machine: str, now: float) -> dict[str, dict]:
    """{task: what its holder published of it} for every task another machine holds (`git worker status`'s rows
    of them): ``last_heartbeat`` (its last heartbeat's time, never after ``now``: a peer's clock or word cannot
    make it younger than this moment; no time at all when it is not one), ``description`` and ``branch`` (its last ``task_assign``; text only, at
    most 2,000 characters: printed through ``text.clean`` like every peer's word)."""
    if not _has_tables(conn):
        return {}
    join = ("FROM shared_events e JOIN shared_claims c ON c.task_id = e.task_id AND c.owner = e.machine "
            "WHERE e.kind = ? AND c.owner != ?")
    out: dict[str, dict] = {}
    for task, ts in conn.execute(f"SELECT e.task_id, MAX(e.ts) {join} GROUP BY e.task_id", ("heartbeat", machine)):
        if isinstance(ts, (int, float)) and 0 <= ts < float("inf"):  # (NaN, a negative or infinite time: none)
            out.setdefault(task, {})["last_heartbeat"] = min(float(ts), now)
    for task, payload in conn.execute(f"SELECT e.task_id, e.payload {join} ORDER BY e.ts, e.event_id",
                                      ("task_assign", machine)):
        p = json.loads(payload)
        words = out.setdefault(task, {})
        for key in ("description", "branch"):
            value = p.get(key) if isinstance(p, dict) else None
            words[key] = value[:2000] if isinstance(value, str) else None
    return out


def radar_stamp(conn: sqlite3.Connection, kind: str) -> str | None:
    """A value that changes when an event of ``kind`` or a claim arrives (None without the cache)."""
    if not _has_tables(conn):
        return None
    events = conn.execute("SELECT COUNT(*), MAX(ts) FROM shared_events WHERE kind = ?", (kind,)).fetchone()
    claims = conn.execute("SELECT COUNT(*), MAX(ts), SUM(seq) FROM shared_claims").fetchone()
    return json.dumps([*events, *claims])


def deliver_posts(conn: sqlite3.Connection, machine: str) -> int:
    """Append to the thread of each task this machine holds (its row here, its claim ours) the posts other
    machines made to it that were ingested and not appended yet (and this machine's own, made while another
    machine held it: :func:`addressed`), each with its :data:`RECEIPT`, oldest first (inside the ingest's write
    transaction): the holder writes every round of its tasks, so a thread has one order. Each post once
    (``shared_posts``); its metadata gains ``from_machine``. How many were appended."""
    from .. import clock
    from . import rounds

    rows = addressed(conn, machine, THREAD_POST, "shared_posts")
    for event_id, sender, ts, task, payload in rows:
        p = json.loads(payload)
        meta = p.get("metadata") if isinstance(p.get("metadata"), dict) else {}
        meta = {**meta, "from_machine": meta.get("from_machine", sender)}
        number = rounds.append(conn, task, role=str(p.get("role") or "unknown"), content=str(p.get("content") or ""),
                               metadata=meta, ts=float(ts))
        conn.execute("INSERT INTO shared_posts VALUES (?, ?, ?)", (event_id, task, number))
        receipt(conn, task, event_id, sender, "post", clock.now(), round=number)
    return len(rows)


def local_events(conn: sqlite3.Connection, machine: str, cursor: dict[str, int]) -> tuple[list[dict], dict[str, int]]:
    """This machine's records written after ``cursor`` ({stream: last id published}) as events (messages,
    thread rounds, notes, acknowledgements; ids ``<machine>:<stream><id>``, never reused), and the new cursor."""
    events, new = [], dict(cursor)
    for stream, sql in _STREAMS.items():
        for rid, ts, task, kind, payload in conn.execute(sql, (int(cursor.get(stream, 0)),)):
            events.append({"id": f"{machine}:{stream}{rid}", "machine": machine, "ts": ts, "task": task, "kind": kind,
                           "payload": json.loads(payload or "{}")})
            new[stream] = rid
    return events, new


def produced(conn: sqlite3.Connection) -> dict[str, int]:
    """{stream: the highest id this machine's bus has produced}: no log this machine wrote can have published
    past it (a cursor beyond it is a log another clone wrote)."""
    tables = {"m": "messages", "r": "rounds", "i": "inbox", "o": "outbox"}
    return {s: conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t}").fetchone()[0] for s, t in tables.items()}


def local_count(conn: sqlite3.Connection) -> int:
    """How many events this machine has produced (every record :func:`local_events` publishes)."""
    return sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("messages", "rounds", "inbox", "outbox"))


#: the meta key holding how many seconds of this machine's silence a sign of life (a commit, a heartbeat) lets pass
#: before it starts a background sync (:func:`renewal_due`; written by each sync, unset: never)
RENEW = "renew_every"


def published_mono(conn: sqlite3.Connection, machine: str) -> float | None:
    """When (``time.monotonic()`` here) this machine's records last reached the shared store (None: never seen)."""
    try:
        d = json.loads(get_meta(conn, f"published:{machine}") or "null")
    except ValueError:
        return None
    mono = d.get("mono") if isinstance(d, dict) else None
    return float(mono) if isinstance(mono, (int, float)) and not isinstance(mono, bool) else None


def renewal_due(conn: sqlite3.Connection) -> bool:
    """Shared mode: has this machine said nothing to the shared store for long enough (:data:`RENEW`) that a sign
    of life here should start a background sync (its leases are judged by its records moving)? One read of the
    cache; False on a single machine or with ``[shared] background = false``."""
    import time

    every, machine = get_meta(conn, RENEW), get_meta(conn, MACHINE)
    if every is None or not machine:
        return False
    last, now = published_mono(conn, machine), time.monotonic()
    try:
        return last is None or last > now or now - last >= float(every)
    except ValueError:
        return False


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    if not _has_tables(conn):
        return None
    r = conn.execute("SELECT value FROM shared_meta WHERE key = ?", (key,)).fetchone()
    return r[0] if r else None


def set_meta(conn: sqlite3.Connection, key: str, value: str | None) -> None:
    if value is None:
        conn.execute("DELETE FROM shared_meta WHERE key = ?", (key,))
    else:
        conn.execute("INSERT OR REPLACE INTO shared_meta VALUES (?, ?)", (key, value))


def _has_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'shared_meta'").fetchone() is not None
