"""`git worker start`: ASSIGNED (or CONFLICTED, the rebase aborted) -> WORKING. A module of its own: the agent
runs it once a task and it needs none of what `done` imports (issue 27).
"""

from __future__ import annotations

from pathlib import Path

from ... import clock
from ...errors import ConflictError
from ...git import worktrees
from ..states import State
from ..transitions import Outcome, get, transition
from .repo import Repo, repair_leftovers


def start(repo: Repo, task_id: str) -> Outcome:
    """ASSIGNED -> WORKING, with a first heartbeat. Idempotent when already WORKING.

    Also CONFLICTED -> WORKING once the agent has aborted the stopped rebase
    (``git rebase --abort``) to go on working before trying ``done`` again.
    """
    repair_leftovers(repo)
    w = get(repo.bus, task_id)
    if w.state == State.CONFLICTED.value:
        wt = Path(w.worktree)
        if wt.is_dir() and worktrees.operation_in_progress(worktrees.git_dir_of(wt)) == "rebase":
            raise ConflictError(
                f"the rebase of {task_id} is still in progress in {wt}",
                files=worktrees.conflicted_files(wt),
                details=[*_rebase_steps(), "or, to go back to work first: git rebase --abort, then git worker start"],
            )
    ts = clock.now()
    return transition(
        repo.bus, task_id, State.WORKING, allowed_from=[State.ASSIGNED, State.CONFLICTED], already=[State.WORKING], verb="start",
        extra_messages=[("heartbeat", {"source": "start"})], columns={"last_heartbeat": ts},
    )


def _rebase_steps() -> list[str]:
    from .work import REBASE_STEPS

    return REBASE_STEPS
