"""A task this machine holds that another machine reviewed or merged (shared mode, issue 29; the git remote too
since issue 36): the claim moved there, holder unchanged; this machine's row follows at its next sync, inside the ingest's write
transaction, with the messages a local transition writes (``state_change`` naming the ``machine``, then the
verb's own: ``merged`` with the merge commit that machine published, ``review_approved``,
``changes_requested``, ``merge_conflict``). A claim that moved twice before this machine synced (approved, then
merged or sent back by a conflict, while this machine was cut off) is followed step by step through APPROVED
(:data:`VIA`), each step with its messages. Nothing is removed here: a task merged elsewhere keeps its worktree
until `git nerve sync` (``worker/lifecycle/cleanup.after_merge_elsewhere``) or `git worker merge T` on this
machine cleans it up (the usual cleanup, archive first).
"""

from __future__ import annotations

import json
import sqlite3

from . import messages, workers

#: (this machine's row, the claim's state, the verb that moved it elsewhere) -> the message that verb writes
FOLLOW = {
    ("APPROVED", "COMPLETED", "merge"): "merged",
    ("APPROVED", "WORKING", "merge"): "merge_conflict",
    ("IN_REVIEW", "APPROVED", "approve"): "review_approved",
    ("IN_REVIEW", "WORKING", "request changes for"): "changes_requested",
    ("APPROVED", "WORKING", "request changes for"): "changes_requested",
}

#: a claim that moved twice elsewhere since this row last followed: (row, claim, verb) -> the step between
VIA = {
    ("IN_REVIEW", "COMPLETED", "merge"): ("APPROVED", "approve"),
    ("IN_REVIEW", "WORKING", "merge"): ("APPROVED", "approve"),
}


def follow(conn: sqlite3.Connection, machine: str, ts: float) -> list[tuple[str, str, str]]:
    """Move each row of a task ``machine`` (this one) holds whose claim another machine moved as :data:`FOLLOW`
    allows; (task, new state, that machine) of each."""
    found = conn.execute(
        "SELECT w.task_id, w.state, c.state, c.verb, c.machine FROM workers w JOIN shared_claims c "
        "ON c.task_id = w.task_id WHERE c.owner = ? AND c.machine != ? AND c.state != w.state ORDER BY w.task_id",
        (machine, machine)).fetchall()
    moved = []
    for task, local, new, verb, by in found:
        steps = [(local, new, verb, by)]
        if (local, new, verb) in VIA:
            mid, mid_verb = VIA[(local, new, verb)]
            steps = [(local, mid, mid_verb, _by(conn, task, FOLLOW[(local, mid, mid_verb)], by)), (mid, new, verb, by)]
        if all(_step(conn, task, *step, ts) for step in steps):
            moved.append((task, new, by))
    return moved


def _step(conn: sqlite3.Connection, task: str, local: str, new: str, verb: str, by: str, ts: float) -> bool:
    """Move the row one step as :data:`FOLLOW` allows, with its messages; False when it did not move."""
    kind = FOLLOW.get((local, new, verb))
    if kind is None:
        return False
    columns = {"approved_at": ts} if new == "APPROVED" else {"approved_at": None} if new == "WORKING" else {}
    if not workers.set_state(conn, task, local, new, ts, **columns):
        return False
    messages.publish(conn, task, "state_change", {"from": local, "to": new, "by": verb, "machine": by}, ts)
    messages.publish(conn, task, kind, {**_published(conn, task, by, kind), "machine": by}, ts)
    return True


def _by(conn: sqlite3.Connection, task_id: str, kind: str, otherwise: str) -> str:
    """The machine that published the task's last ``kind`` event (the step between's own), else ``otherwise``."""
    row = conn.execute("SELECT machine FROM shared_events WHERE task_id = ? AND kind = ? "
                       "ORDER BY ts DESC, event_id DESC LIMIT 1", (task_id, kind)).fetchone()
    return row[0] if row else otherwise


def _published(conn: sqlite3.Connection, task_id: str, machine: str, kind: str) -> dict:
    """What ``machine`` published of the transition (its last ``kind`` event of the task), if it arrived."""
    row = conn.execute("SELECT payload FROM shared_events WHERE task_id = ? AND machine = ? AND kind = ? "
                       "ORDER BY ts DESC, event_id DESC LIMIT 1", (task_id, machine, kind)).fetchone()
    try:
        payload = json.loads(row[0]) if row else {}
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


__all__ = ["FOLLOW", "VIA", "follow"]
