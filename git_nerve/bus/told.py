"""Notes told on another machine to a task held here (shared mode, issue 24): `git nerve tell --task T` on a
machine that does not hold T leaves a ``tell_note`` message in its log (:mod:`git_nerve.steer.remote`); the
holder's sync, inside its ingest's write transaction, queues each in its inbox exactly as a local tell would (a
note also becomes a ``human`` round of the thread; the notes-pending marker is set), once: ``shared_notes``
records it, and ``sync --rebuild`` keeps that record.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..fs import notes_marker, set_marker
from . import rounds, steer
from . import shared as cache

#: the role of the rounds a note becomes in a thread (`git nerve tell`'s)
ROLE = "human"
#: the kinds a task's inbox takes from `tell --task` (skip/add go to the merge queue and take no --task)
KINDS = ("note", "stop")


def pending(conn: sqlite3.Connection, machine: str) -> list[tuple[str, str, float, str, dict]]:
    """(event id, sender, ts, task, payload) of the ``tell_note`` events other machines made to tasks ``machine``
    (this one) holds (its row here, its claim ours) not queued here yet, oldest first."""
    rows = conn.execute(
        "SELECT e.event_id, e.machine, e.ts, w.task_id, e.payload FROM shared_events e "
        "JOIN workers w ON w.task_id = e.task_id JOIN shared_claims c ON c.task_id = e.task_id AND c.owner = ? "
        "WHERE e.kind = ? AND e.machine != ? AND e.event_id NOT IN (SELECT event_id FROM shared_notes) "
        "ORDER BY e.ts, e.event_id", (machine, cache.TELL_NOTE, machine)).fetchall()
    return [(*r[:4], json.loads(r[4])) for r in rows]


def deliver(conn: sqlite3.Connection, nerve_dir: Path, machine: str) -> list[str]:
    """Queue every note of :func:`pending`, oldest first; a note's round gains ``from_machine``. The tasks whose
    notes-pending marker was set (before the commit: the caller sets them again after it, as `tell` does)."""
    woken: list[str] = []
    for event_id, sender, ts, task, p in pending(conn, machine):
        kind, text = p.get("kind"), p.get("text")
        if kind not in KINDS or not isinstance(text, str) or not text.strip():
            conn.execute("INSERT INTO shared_notes VALUES (?, ?, NULL)", (event_id, task))  # nothing to queue
            continue
        inbox_id = steer.enqueue(conn, scope="task", kind=kind, text=text, ts=float(ts), task_id=task)
        if kind == "note":
            rounds.append(conn, task, role=ROLE, content=text, metadata={"inbox_id": inbox_id, "from_machine": sender},
                          ts=float(ts))
        conn.execute("INSERT INTO shared_notes VALUES (?, ?, ?)", (event_id, task, inbox_id))
        woken.append(task)
    mark(nerve_dir, woken)
    return woken


def mark(nerve_dir: Path, task_ids: list[str]) -> None:
    for task_id in task_ids:
        set_marker(notes_marker(nerve_dir, task_id))


__all__ = ["KINDS", "ROLE", "deliver", "mark", "pending"]
