"""What needs the person, per task (issue 38): one function, used by `git worker status` (the table sorts and marks
by it, ``--json`` carries it as ``attention``), the console's board and the MCP tools.

A task's attention is one of (the order is the board's: what needs the person first):

* ``conflict``: CONFLICTED, or the conflict radar flags lines it changes against another task's (or the
  integration branch's) while it is still live;
* ``failed``: FAILED, or the last agent run of `git worker run` exited non-zero since the task entered its state;
* ``input``: its agent waits for a person: its last heartbeat status starts with ``input:`` (as an agent or its
  hook says it: ``git worker heartbeat --status "input: which database?"``);
* ``review``: IN_REVIEW;
* ``stuck``: WORKING with no heartbeat or commit for ``[notify] stuck_after`` seconds (default 600);

or None. Pure (no I/O): the facts are handed in (:func:`facts` reads them from the bus).
"""

from __future__ import annotations

TYPE_CHECKING = False  # status --json imports this: names for readers only (issue 27)
if TYPE_CHECKING:
    from ..bus.workers import Worker

KINDS = ("conflict", "failed", "input", "review", "stuck")
#: seconds without a heartbeat or a commit after which a WORKING task is stuck
STUCK_AFTER = 600.0
#: a heartbeat status with this prefix: the agent waits for a person
INPUT_PREFIX = "input:"
#: states where a radar conflict or a failed run needs the person (a finished task collides with nothing)
_LIVE = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")


def attention(w: Worker, *, now: float, radar_conflict: bool = False, run_exit: int | None = None,
              run_at: float | None = None, stuck_after: float = STUCK_AFTER) -> str | None:
    """``w``'s attention (see the module's docstring). ``radar_conflict``: the radar flags lines of ``w``;
    ``run_exit``/``run_at``: the exit code and end time of its last `git worker run` (None: no run)."""
    state = w.state
    if state == "CONFLICTED" or (radar_conflict and state in _LIVE):
        return "conflict"
    if state == "FAILED":
        return "failed"
    if state in ("ASSIGNED", "WORKING") and run_exit not in (None, 0) and (run_at or 0) >= w.state_changed_at:
        return "failed"
    if state in ("ASSIGNED", "WORKING") and (w.heartbeat_status or "").strip().lower().startswith(INPUT_PREFIX):
        return "input"
    if state == "IN_REVIEW":
        return "review"
    if state == "WORKING" and now - max(w.last_activity or 0, w.last_heartbeat or 0, w.state_changed_at) > stuck_after:
        return "stuck"
    return None


def of_state(state: str) -> str | None:
    """What a task's state alone says (another machine's task in shared mode: its runs and heartbeats are there)."""
    return {"CONFLICTED": "conflict", "FAILED": "failed", "IN_REVIEW": "review"}.get(state)


#: what `git worker status` says under a task that needs the person
SAY = {"conflict": "needs you: a conflict (git worker show; the radar marks below)",
       "failed": "needs you: it failed, or its last agent run exited non-zero (git worker show)",
       "input": "needs you: its agent waits for your answer",
       "review": "needs you: review (git worker approve / request-changes)",
       "stuck": "needs you: no heartbeat or commit for a while (stuck?)"}


def rank(value: str | None) -> int:
    """Sort key: what needs the person first, in :data:`KINDS` order, then the rest."""
    return KINDS.index(value) if value in KINDS else len(KINDS)


def stuck_after(toplevel) -> float:
    """``[notify] stuck_after`` of nerve.toml (seconds, positive); the default when absent or unreadable."""
    from .. import nerve_toml

    try:
        table = (nerve_toml.read(toplevel) or {}).get("notify") if toplevel is not None else None
    except Exception:  # noqa: BLE001 - status works with a bad nerve.toml (spawn says what is wrong)
        return STUCK_AFTER
    value = table.get("stuck_after") if isinstance(table, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else STUCK_AFTER


def of_all(conn, everyone: dict[str, Worker], conflicts: set[str], *, now: float, stuck: float = STUCK_AFTER,
           tasks=None) -> dict[str, str | None]:
    """Each task's attention (those of ``tasks``, default every one): ``conflicts``, the tasks the radar flags."""
    from ..bus import rounds

    out = {}
    for task_id in tasks if tasks is not None else everyone:
        w = everyone[task_id]
        code, at = rounds.last_exit(conn, task_id) if w.state in ("ASSIGNED", "WORKING") else (None, None)
        out[task_id] = attention(w, now=now, radar_conflict=task_id in conflicts, run_exit=code, run_at=at,
                                 stuck_after=stuck)
    return out


__all__ = ["INPUT_PREFIX", "KINDS", "STUCK_AFTER", "SAY", "attention", "of_all", "of_state", "rank", "stuck_after"]
