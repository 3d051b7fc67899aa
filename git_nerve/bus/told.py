"""Notes told on another machine to a task held here (shared mode, issue 24): `git nerve tell --task T` on a
machine that does not hold T leaves a ``tell_note`` message in its log (:mod:`git_nerve.steer.remote`); the
holder's sync, inside its ingest's write transaction, queues each in its inbox exactly as a local tell would (a
note also becomes a ``human`` round of the thread; the notes-pending marker is set), once: ``shared_notes``
records it, and ``sync --rebuild`` keeps that record.

Nothing said is lost in a takeover (issue 36): whichever machine holds the task when a note arrives queues it,
the new holder of a task taken over picks up what was pending for it (its own notes too, told while another
machine held it), and every delivery leaves a receipt in the holder's log (:data:`~git_nerve.bus.shared.RECEIPT`):
no later holder delivers it again, and the teller's `git nerve outbox` says "delivered on <machine>" (:func:`sent`)
or why it was not.
"""

from __future__ import annotations

import json
import sqlite3
from collections import namedtuple
from pathlib import Path

from .. import clock
from ..fs import notes_marker, set_marker
from . import rounds, steer
from . import shared as cache

#: the role of the rounds a note becomes in a thread (`git nerve tell`'s)
ROLE = "human"
#: the kinds a task's inbox takes from `tell --task` (skip/add go to the merge queue and take no --task)
KINDS = ("note", "stop")


def pending(conn: sqlite3.Connection, machine: str) -> list[tuple[str, str, float, str, dict]]:
    """(event id, sender, ts, task, payload) of the ``tell_note`` events made to tasks ``machine`` (this one) holds
    (its row here, its claim ours) that no machine queued yet, oldest first: other machines', and this one's own
    told while another machine held the task (:func:`git_nerve.bus.shared.addressed`)."""
    rows = cache.addressed(conn, machine, cache.TELL_NOTE, "shared_notes")
    return [(*r[:4], _payload(r[4])) for r in rows]


def _payload(text: str) -> dict:
    try:
        p = json.loads(text)
    except ValueError:
        return {}
    return p if isinstance(p, dict) else {}


def _undeliverable(conn: sqlite3.Connection, task: str, kind, text, machine: str) -> str | None:
    """Why a note of :func:`pending` cannot be queued (its receipt says so to the teller); None: it can."""
    if kind not in KINDS or not isinstance(text, str) or not text.strip():
        return f"not a note or a stop with a text ({str(kind)[:20]!r})"
    row = conn.execute("SELECT state FROM workers WHERE task_id = ?", (task,)).fetchone()
    if row is not None and row[0] in ("COMPLETED", "FAILED"):
        return f"{task} was {row[0]} on {machine} when it arrived: no agent works on it any more"
    return None


def deliver(conn: sqlite3.Connection, nerve_dir: Path, machine: str) -> list[str]:
    """Queue every note of :func:`pending`, oldest first; a note's round gains ``from_machine``. The tasks whose
    notes-pending marker was set (before the commit: the caller sets them again after it, as `tell` does)."""
    woken: list[str] = []
    for event_id, sender, ts, task, p in pending(conn, machine):
        kind, text = p.get("kind"), p.get("text")
        why = _undeliverable(conn, task, kind, text, machine)
        if why is not None:
            conn.execute("INSERT INTO shared_notes VALUES (?, ?, NULL)", (event_id, task))  # nothing to queue
            cache.receipt(conn, task, event_id, sender, str(kind), clock.now(), refused=why)
            continue
        inbox_id = steer.enqueue(conn, scope="task", kind=kind, text=text, ts=float(ts), task_id=task)
        if kind == "note":
            rounds.append(conn, task, role=ROLE, content=text, metadata={"inbox_id": inbox_id, "from_machine": sender},
                          ts=float(ts))
        conn.execute("INSERT INTO shared_notes VALUES (?, ?, ?)", (event_id, task, inbox_id))
        cache.receipt(conn, task, event_id, sender, kind, clock.now(), inbox_id=inbox_id)
        woken.append(task)
    mark(nerve_dir, woken)
    return woken


def deliver_held(bus, machine: str) -> list[str]:
    """Everything said to the tasks ``machine`` (this one) holds that no machine delivered yet: posts into their
    threads, notes and stops into their inboxes, each once (what a takeover runs at once: the new holder picks up
    what was pending for the task). The tasks woken."""
    with bus.write() as conn:
        cache.ensure(conn)
        cache.deliver_posts(conn, machine)
        woken = deliver(conn, bus.path.parent, machine)
    mark(bus.path.parent, woken)
    return woken


class Sent(namedtuple("Sent", "id ts task_id what text status machine delivered")):
    """A note, stop or post this machine left for a task another machine held, and where it stands: ``status`` one
    line ("delivered on two (inbox #3)", "pending delivery on one", "not delivered: ..."); ``machine`` the machine
    that has it or is to have it; ``delivered`` True / False / None (pending)."""

    __slots__ = ()


def sent(conn: sqlite3.Connection, machine: str, task_id: str | None = None) -> list[Sent]:
    """What this machine (``machine``) told or posted to tasks other machines held, oldest first, each with its
    delivery as the receipts ingested say (:data:`~git_nerve.bus.shared.RECEIPT`), or the claim, while none came."""
    if not machine or conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'shared_notes'").fetchone() is None:
        return []
    sql = "SELECT id, ts, task_id, kind, payload FROM messages WHERE kind IN (?, ?)"
    args: tuple = (cache.TELL_NOTE, cache.THREAD_POST)
    if task_id is not None:
        sql, args = sql + " AND task_id = ?", (*args, task_id)
    rows = conn.execute(sql + " ORDER BY id", args).fetchall()
    if not rows:
        return []
    receipts = {}
    for holder, task, payload in conn.execute(
            "SELECT r.machine, r.task_id, r.payload FROM shared_events r WHERE r.kind = ? AND EXISTS (SELECT 1 FROM "
            "shared_holders h WHERE h.task_id = r.task_id AND h.machine = r.machine) ORDER BY r.ts", (cache.RECEIPT,)):
        p = _payload(payload)
        receipts.setdefault((task, str(p.get("event"))), (holder, p))  # only a holder's of that very task counts
    here = {r[0] for r in conn.execute("SELECT event_id FROM shared_notes UNION SELECT event_id FROM shared_posts")}
    out = []
    for mid, ts, task, kind, payload in rows:
        p, event = _payload(payload), f"{machine}:m{mid}"
        what = str(p.get("kind") or "note") if kind == cache.TELL_NOTE else "post"
        text = str(p.get("text") if kind == cache.TELL_NOTE else p.get("content") or "")
        out.append(Sent(mid, ts, task, what, text, *_standing(conn, machine, task, event, receipts, here)))
    return out


def _standing(conn, machine: str, task: str, event: str, receipts: dict, here: set) -> tuple:
    """(status line, the machine, delivered) of one record :func:`sent` lists."""
    if event in here:
        return f"delivered on {machine} (this machine, which took {task} over)", machine, True
    if (task, event) in receipts:
        holder, p = receipts[(task, event)]
        if p.get("refused"):
            return f"not delivered on {holder}: {p['refused']}", holder, False
        where = f"inbox #{p['inbox_id']}" if p.get("inbox_id") is not None else f"round {p.get('round')}"
        return f"delivered on {holder} ({where})", holder, True
    c = cache.claim(conn, task)
    if c is None:
        return "pending delivery (no machine holds the task as last seen)", None, None
    if c.state in ("COMPLETED", "FAILED"):
        return (f"not delivered: {task} became {c.state} on {c.owner} before {c.owner} had it (tell again elsewhere "
                "if it still matters)"), c.owner, False
    return f"pending delivery on {c.owner} (queued there at its next sync)", c.owner, None


def mark(nerve_dir: Path, task_ids: list[str]) -> None:
    for task_id in task_ids:
        set_marker(notes_marker(nerve_dir, task_id))


__all__ = ["KINDS", "ROLE", "Sent", "deliver", "deliver_held", "mark", "pending", "sent"]
