"""Every record from a peer is checked before it changes anything (issue 36).

A claim chain is read record by record; each must pass :func:`step` against the last record this machine
accepted of the same chain, else it is skipped (the claim stays what it was here: the next transition of this
machine goes on from the remote's tip, judged against the accepted record) and kept for inspection in the bus
(``shared_rejected``), reported once by `git nerve sync` and counted by `git worker status`:

* its form: a claim record, its task the ref's own name and a task id by the local rules
  (:func:`git_nerve.worker.ids.validate`), machine names fit for a ref, states of the state machine, a verb of
  words;
* its transition, judged as a local one: the same holder, a move the state machine allows (``states.py``),
  made by the holder (or a review or merge, which any machine may make: PostgreSQL, and the review from any
  machine); a new holder only by a ``takeover`` that makes its maker the holder, ASSIGNED, of a live task,
  and, of a task this machine holds, only once this machine's lease had run out on its own clock (it has not
  published its log for the lease). A move's freeze keeps state and holder; what follows a freeze came from
  another store and is taken as it is.

The first record of a chain this machine never saw before (no accepted record to judge it against) is judged
by its form alone. Events of other machines are checked for their form (:func:`event_fault`). Pure but for
:func:`accepted` (reads a chain) and the bus helpers at the end.
"""

from __future__ import annotations

import json
import re

from ..bus import shared as cache
from . import records
from .judge import ANY_MACHINE  # the verbs a machine not holding the task may make (a review, a merge)

_VERB = re.compile(r"^[a-z][a-z -]{0,39}$")
_TABLE = """CREATE TABLE IF NOT EXISTS shared_rejected (
    key      TEXT PRIMARY KEY,   -- the claim commit, or the event id
    task_id  TEXT,
    machine  TEXT,
    reason   TEXT NOT NULL,
    record   TEXT NOT NULL,      -- what it said (at most 2,000 characters)
    seen     REAL NOT NULL,
    reported INTEGER NOT NULL DEFAULT 0
)"""


def form_fault(rec: records.Record | None, task: str) -> str | None:
    """Why ``rec`` is no claim record of ``task`` (None: its form is sound)."""
    from ..errors import UsageError
    from ..worker import ids, states

    if rec is None:
        return "not a claim record"
    if not isinstance(rec.task, str) or rec.task != task:
        return f"its task {_shown(rec.task)} is not its ref's {_shown(task)}"
    try:
        ids.validate(task)
    except UsageError:
        return f"{_shown(task)} is not a task id"
    for what, name in (("machine", rec.machine), ("holder", rec.owner)):
        if not isinstance(name, str) or not records.valid_machine(name):
            return f"its {what} {_shown(name)} is not a machine name"
    if rec.state not in states.ALL_STATES or (rec.previous is not None and rec.previous not in states.ALL_STATES):
        return f"its state {_shown(rec.state)} is not a state"
    if not isinstance(rec.verb, str) or not _VERB.match(rec.verb):
        return f"its verb {_shown(rec.verb)} is not a verb"
    return None


def step(prev: records.Record | None, rec: records.Record | None, task: str, machine: str,
         silence=lambda: None, lease: float = 600.0) -> str | None:
    """Why ``rec`` may not follow ``prev`` (the last record accepted of the chain; None: never seen) on this
    machine, ``machine`` (None: it may). ``silence()``: seconds since this machine's log last reached the
    remote, on its own clock (None: never, or cannot tell)."""
    from ..worker.states import can_transition

    fault = form_fault(rec, task)
    if fault or prev is None or prev.verb == records.MOVE:
        return fault  # after a move's freeze: the record came from the other store as it was there
    if rec.verb == records.MOVE:
        return None if (rec.state, rec.owner) == (prev.state, prev.owner) else "a move's freeze changed the claim"
    if rec.owner != prev.owner:
        if rec.verb != "takeover" or rec.owner != rec.machine or rec.state != "ASSIGNED":
            return (f"machine {rec.machine} made {rec.owner} the holder of a task {prev.owner} holds by its "
                    f"{rec.verb!r}, not by a takeover")
        if prev.state in records.FINISHED_STATES:
            return f"machine {rec.machine} took over a task that is {prev.state}"
        quiet = silence() if prev.owner == machine else None
        if quiet is not None and quiet < lease:
            return (f"machine {rec.machine} took over a task of this machine before its lease ran out here (its "
                    f"log reached the remote {quiet:.0f} s ago; lease {lease:.0f} s)")
        return None
    if rec.state == prev.state or not can_transition(prev.state, rec.state):
        return f"{prev.state} -> {rec.state} ({rec.verb}) is not a transition of the state machine"
    if rec.machine != prev.owner and rec.verb not in ANY_MACHINE:
        return f"machine {rec.machine} moved a task machine {prev.owner} holds ({rec.verb}), not by a takeover"
    return None


def accepted(cwd, tip: str, task: str, machine: str, prev: records.Record | None = None, since: str | None = None,
             silence=lambda: None, lease: float = 600.0) -> tuple[records.Record | None, str | None, list[tuple]]:
    """(the last record of the chain at ``tip`` that this machine accepts, its commit, [(sha, record or its
    text, reason)] of those it refused), read after ``since`` (the commit of ``prev``, the last accepted; None:
    from the start)."""
    from ..git import remote_refs

    shas = remote_refs.chain(cwd, tip, since)
    datas = remote_refs.read_files(cwd, shas, records.CLAIM_FILE)
    refused, at = [], since
    for sha, data in zip(shas, datas):
        rec = records.decode(data)
        why = step(prev, rec, task, machine, silence, lease)
        if why:
            refused.append((sha, rec if rec is not None else (data or b"")[:2000].decode("utf-8", "replace"), why))
        else:
            prev, at = rec, sha
    return prev, at, refused


def event_fault(event: dict, machine: str) -> str | None:
    """Why a line of ``machine``'s log is no event of it (None: its form is sound)."""
    from ..errors import UsageError
    from ..worker import ids

    if event.get("machine") != machine:
        return f"it says it is machine {_shown(event.get('machine'))}'s, in machine {machine}'s log"
    if not isinstance(event.get("id"), str) or not event["id"].startswith(machine + ":") or len(event["id"]) > 200:
        return "its id is not one of its machine's"
    if not isinstance(event.get("kind"), str) or len(event["kind"]) > 64:
        return "its kind is not a word"
    task = event.get("task")
    if task is not None:
        try:
            ids.validate(task if isinstance(task, str) else "")
        except UsageError:
            return f"its task {_shown(task)} is not a task id"
    if not isinstance(event.get("ts"), (int, float)) or isinstance(event.get("ts"), bool):
        return "its time is not a number"
    if event.get("payload") is not None and not isinstance(event["payload"], dict):
        return "its payload is not an object"
    if event["kind"] == "usage":
        return usage_fault(event.get("payload") or {})
    return None


def usage_fault(payload: dict) -> str | None:
    """Why a ``usage`` event (bus/usage.py: what a round's agent used) is none (None: sound): only its own
    fields, counts whole and not negative, a cost a number not negative or null, short words."""
    from ..bus import usage

    extra = sorted(set(payload) - usage.FIELDS)
    if extra:
        return f"its usage has fields no usage has: {_shown(', '.join(extra))}"
    for key in (*usage.COUNTS, "reasoning_tokens", "round"):
        value = payload.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 10**12):
            return f"its usage's {key} is not a count"
    cost = payload.get("cost_usd")
    if cost is not None and (not isinstance(cost, (int, float)) or isinstance(cost, bool) or not 0 <= cost < 10**7):
        return "its usage's cost_usd is not an amount"
    for key in ("role", "adapter", "run", "model", "cost_from"):
        value = payload.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > 200):
            return f"its usage's {key} is not a short text"
    if payload.get("reported") not in (None, False):
        return "its usage's reported is not false"
    return None


def sound(conn, machine: str, events: list[dict]) -> list[dict]:
    """The events of ``machine``'s log whose form is sound; the others kept for inspection (inside the caller's
    write transaction)."""
    out = []
    for e in events:
        why = event_fault(e, machine)
        if why is None:
            out.append(e)
        else:
            keep(conn, f"{machine}:{str(e.get('id'))[:120]}", e.get("task") if isinstance(e.get("task"), str) else None,
                 machine, why, json.dumps(e, sort_keys=True, default=str)[:2000])
    return out


def _shown(value) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    return repr(text.encode("unicode_escape").decode("ascii"))


# -- kept for inspection, reported once --------------------------------------------------------------------------
def keep(conn, key: str, task: str | None, machine: str | None, reason: str, record) -> None:
    """Keep a refused record (inside the caller's write transaction); a record kept before stays as it was."""
    from .. import clock

    conn.execute(_TABLE)
    text = record if isinstance(record, str) else json.dumps(getattr(record, "__dict__", None) or record,
                                                             sort_keys=True, default=str)
    conn.execute("INSERT OR IGNORE INTO shared_rejected (key, task_id, machine, reason, record, seen) "
                 "VALUES (?, ?, ?, ?, ?, ?)", (key, _text(task), _text(machine), reason, text[:2000], clock.now()))


def _text(value) -> str | None:
    return None if value is None else str(value)[:200]


def new_rejections(bus) -> list[dict]:
    """The refused records not reported yet, marked reported now (each is reported once)."""
    if not _has(bus.conn):
        return []
    with bus.write() as conn:
        rows = conn.execute("SELECT key, task_id, machine, reason FROM shared_rejected WHERE reported = 0 "
                            "ORDER BY seen, key").fetchall()
        conn.execute("UPDATE shared_rejected SET reported = 1 WHERE reported = 0")
    return [{"key": k, "task": t, "machine": m, "reason": r} for k, t, m, r in rows]


def rejections(conn) -> list[dict]:
    """Every refused record kept (`git worker status` warns of them; `git nerve sync --rebuild` judges anew)."""
    if not _has(conn):
        return []
    return [{"key": k, "task": t, "machine": m, "reason": r, "seen": s} for k, t, m, r, s in conn.execute(
        "SELECT key, task_id, machine, reason, seen FROM shared_rejected ORDER BY seen, key")]


def forget(conn) -> None:
    """A rebuild judges every record anew (inside its write transaction)."""
    if _has(conn):
        conn.execute("DELETE FROM shared_rejected")


def _has(conn) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'shared_rejected'").fetchone() is not None


def claim_record(c: cache.Claim) -> records.Record:
    """A cached claim as the record it was accepted from (its ``previous`` is not kept: no check reads it)."""
    return records.Record(c.task_id, c.state, None, c.verb, c.machine, c.owner, c.seq, c.ts)
