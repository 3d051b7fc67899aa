"""A task this machine holds that another machine reviewed or merged (shared mode on PostgreSQL, issue 29): the
claim moved there, holder unchanged; this machine's row follows at its next sync, inside the ingest's write
transaction, with the messages a local transition writes (``state_change`` naming the ``machine``, then the
verb's own: ``merged`` with the merge commit that machine published, ``review_approved``,
``changes_requested``, ``merge_conflict``). Nothing is removed here: a task merged elsewhere keeps its worktree
and branch until a person runs `git worker merge T` on this machine (the usual cleanup, archive first).
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


#: (this machine's row, the verb that moved the claim elsewhere) -> the step that must have come between, which
#: this machine missed when no sync ran between two other machines' moves (approved on one, merged on another)
MISSED = {("IN_REVIEW", "merge"): ("APPROVED", "approve")}


def follow(conn: sqlite3.Connection, machine: str, ts: float) -> list[tuple[str, str, str]]:
    """Move each row of a task ``machine`` (this one) holds whose claim another machine moved as :data:`FOLLOW`
    allows (through the step it missed, :data:`MISSED`); (task, new state, that machine) of each."""
    found = conn.execute(
        "SELECT w.task_id, w.state, c.state, c.verb, c.machine FROM workers w JOIN shared_claims c "
        "ON c.task_id = w.task_id WHERE c.owner = ? AND c.machine != ? AND c.state != w.state ORDER BY w.task_id",
        (machine, machine)).fetchall()
    moved = []
    for task, local, new, verb, by in found:
        steps = [(local, new, verb)]
        if steps[0] not in FOLLOW and (local, verb) in MISSED:
            mid, mid_verb = MISSED[(local, verb)]
            steps = [(local, mid, mid_verb), (mid, new, verb)]
        if any(step not in FOLLOW for step in steps):
            continue
        if all(_step(conn, task, *step, by if step[2] == verb else None, ts) for step in steps):
            moved.append((task, new, by))
    return moved


def _step(conn: sqlite3.Connection, task: str, local: str, new: str, verb: str, by: str | None, ts: float) -> bool:
    """This machine's row from ``local`` to ``new`` as machine ``by`` moved the claim (None: a step this machine
    missed, by whichever machine published it), with the messages a local transition writes."""
    kind = FOLLOW[(local, new, verb)]
    columns = {"approved_at": ts} if new == "APPROVED" else {"approved_at": None} if new == "WORKING" else {}
    if not workers.set_state(conn, task, local, new, ts, **columns):
        return False
    published, by = _published(conn, task, by, kind)
    messages.publish(conn, task, "state_change", {"from": local, "to": new, "by": verb, "machine": by}, ts)
    messages.publish(conn, task, kind, {**published, "machine": by}, ts)
    return True


def _published(conn: sqlite3.Connection, task_id: str, machine: str | None, kind: str) -> tuple[dict, str | None]:
    """What ``machine`` (None: any machine) published of the transition (its last ``kind`` event of the task), if
    it arrived, and that machine."""
    row = conn.execute("SELECT payload, machine FROM shared_events WHERE task_id = ? AND (? IS NULL OR machine = ?) "
                       "AND kind = ? ORDER BY ts DESC, event_id DESC LIMIT 1",
                       (task_id, machine, machine, kind)).fetchone()
    if row is None:
        return {}, machine
    try:
        payload = json.loads(row[0])
    except ValueError:
        return {}, row[1]
    return (payload if isinstance(payload, dict) else {}), row[1]


__all__ = ["FOLLOW", "follow"]
