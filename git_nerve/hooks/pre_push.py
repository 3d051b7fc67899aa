"""pre-push: in a worker's worktree, a heartbeat, and a refusal of pushes that would carry broken work or a copied
secret."""

from __future__ import annotations

import os
import sys

from ..bus import shared as shared_cache
from ..bus import workers
from ..errors import ExitCode
from ..text import clean
from ..worker import heartbeat
from ..worker.states import State
from .common import NEXT_AFTER_REBASE, Where, guarded, open_bus, operation_in_progress, worker_context
from .push_checks import (RefUpdate, copied_secret, integration_tip, is_nerve_remote, marked_files, parse_updates,
                          warn_if_conflicting)

#: pre-push's exit status when it refuses (the shim lets any other failure of ours through).
REFUSED = int(ExitCode.CHECK_FAILED)

__all__ = ["REFUSED", "RefUpdate", "conflict_block_reason", "parse_updates", "pre_push", "refuse"]


def refuse(reason: str) -> None:
    sys.stderr.write(clean(f"git-nerve: push refused: {reason}") + "\n")


def pre_push(where: Where, remote: str, stdin: str, url: str = "") -> int:
    """Refuse (exit :data:`REFUSED`, one line per reason) a push that would carry broken work."""
    hook = "pre-push"
    ctx = worker_context(where, hook)
    if ctx is None:
        return 0
    updates = parse_updates(stdin)
    worker = guarded(hook, "push not checked against the bus", _push_heartbeat, where, ctx.task_id)
    reasons: list[str] = []

    taken = guarded(hook, "push not checked against the shared claims", _taken_over, where, ctx.task_id)
    if taken is not None:  # shared mode: this machine was fenced off the task (worker/fencing.py)
        reasons.append(f"task {ctx.task_id} was taken over by machine {taken}: this machine is fenced off (its work "
                       f"here is under refs/nerve/archive/{ctx.task_id}); push it under a name of your own if it should "
                       "reach the new holder")
    op = operation_in_progress(where.git_dir)
    if op in ("rebase", "merge"):
        reasons.append(f"a {op} is in progress in this worktree; finish it (git {op} --continue) or abort it (git {op} --abort)")
    if worker is not None:
        if worker.state == State.CONFLICTED.value and os.environ.get("NERVE_INTERNAL_PUSH") != "done":
            reasons.append(f"task {worker.task_id} is CONFLICTED; resolve the rebase, then run `{NEXT_AFTER_REBASE}` (it pushes)")
        target = f"refs/heads/{worker.integration}"
        if any(u.remote_ref == target for u in updates) and is_nerve_remote(remote, url):
            reasons.append(
                f"this push updates {worker.integration}, the integration branch; only `git worker merge` does that "
                f"(push {ctx.branch} instead)"
            )
    secret = guarded(hook, "copied files not checked", copied_secret, where, ctx.task_id, worker, updates)
    if secret:
        reasons.append(secret)
    marked = guarded(hook, "conflict-marker check skipped", marked_files, worker, updates)
    tips = {u.local_sha for u in updates}
    base = None
    if worker is not None and any(m.commit not in tips for m in marked or []):
        found = guarded(hook, "integration branch not read", integration_tip, remote, worker.integration)
        base = found[0].split("/", 2)[-1] if found else worker.integration  # origin/main, or main
    for m in marked or []:
        reasons.append(conflict_block_reason(m.path, m.commit, at_tip=m.commit in tips, integration=base))
    if reasons:
        for reason in reasons:
            refuse(reason)
        return REFUSED
    if worker is not None:
        guarded(hook, "merge check against the integration branch skipped", warn_if_conflicting, where, remote, worker, updates)
    return 0


def conflict_block_reason(path: str, commit: str, *, at_tip: bool, integration: str | None = None) -> str:
    """Why a push carrying a conflict block is refused, and what fixes it.

    Every pushed commit is checked, not only the tip: `git worker merge` keeps the task's commits as they
    are (--no-ff), so a commit holding a block would land in the integration branch's history (a bisect
    or a build of it stops there). A fixing commit on top therefore does not help; rewriting that commit
    does, or squashing the task's commits into one (the tip's tree, once it is fixed).
    """
    c = commit[:12]
    if at_tip:
        return f"{path} still holds a conflict block (commit {c}, the tip); remove it, then `git commit --amend`"
    return (f"{path} holds a conflict block in commit {c}, before the tip: every pushed commit is checked (merge keeps "
            f"them all), so a fixing commit on top does not help; rewrite {c} (`git rebase -i {c}~1`, edit or squash "
            f"it), or make the task one commit: `git reset --soft $(git merge-base HEAD {integration or 'main'})`, "
            "fix the file if it still holds the block, `git commit`")


def _taken_over(where: Where, task_id: str) -> str | None:
    """The machine holding ``task_id`` when the shared cache says another machine took it over from this one."""
    with open_bus(where.common_dir, ingest=False) as bus:
        return next((holder for _task, _state, holder, _claimed in shared_cache.held_elsewhere(bus.conn, task_id=task_id)),
                    None)


def _push_heartbeat(where: Where, task_id: str) -> workers.Worker | None:
    with open_bus(where.common_dir) as bus:
        heartbeat.record(bus, task_id, source="pre-push")
        return workers.get(bus.conn, task_id)
