"""What the console's buttons do: the very functions `git nerve tell` and `git worker
approve / request-changes / merge` call, each on a bus connection of its own.

A merge runs in the console's process (in a worker thread), like `git worker
merge` runs in its own: it takes the same merge and task locks, so a merge
from the console and one from a terminal cannot interleave. Nothing here
shells out to git-nerve itself.
"""

from __future__ import annotations

from typing import Any

from ..bus.connection import Bus
from ..errors import UsageError
from ..paths import RepoPaths
from ..steer import tell as steer_tell
from ..worker import lifecycle
from ..worker.status import row


def _open(paths: RepoPaths) -> lifecycle.Repo:
    return lifecycle.Repo(paths, Bus(paths.bus_path, create=False))


def _text(body: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise UsageError(f"missing {key!r}")
        return None
    if not isinstance(value, str):
        raise UsageError(f"{key!r} must be a string")
    return value


def _task(body: dict[str, Any]) -> str:
    return _text(body, "task", required=True)  # type: ignore[return-value]


def _by(repo: lifecycle.Repo, body: dict[str, Any]) -> str | None:
    return _text(body, "by") or repo.config.get("user.name")


def _comment(body: dict[str, Any]) -> str | None:
    """The comment as given: the lifecycle function decides (an empty one is none, as `--comment ""` is)."""
    value = body.get("comment")
    if value is not None and not isinstance(value, str):
        raise UsageError("'comment' must be a string")
    return value


def tell(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    """`git nerve tell [--task T | --all] [--kind K] TEXT` (outside any worktree: a stop without a task goes to the merge queue)."""
    all_tasks = body.get("all", False)
    if not isinstance(all_tasks, bool):
        raise UsageError("'all' must be true or false")
    with _open(paths) as repo:
        told = steer_tell.tell(repo.bus, _text(body, "text") or "", task=_text(body, "task"), all_tasks=all_tasks,
                               kind=_text(body, "kind"), locks_dir=repo.lock_path("x").parent)
        return {"told": told.as_dict(), "describe": told.describe()}


def approve(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    task = _task(body)
    with _open(paths) as repo:
        outcome = lifecycle.approve(repo, task, by=_by(repo, body), comment=_comment(body))
        return {"changed": outcome.changed, "worker": row(outcome.worker, None)}


def request_changes(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    task = _task(body)
    comment = _comment(body)
    with _open(paths) as repo:
        outcome = lifecycle.request_changes(repo, task, comment=comment, by=_by(repo, body))
        return {"changed": outcome.changed, "worker": row(outcome.worker, None)}


def merge(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    task = _task(body)
    with _open(paths) as repo:
        res = lifecycle.merge(repo, task, delete_branch=bool(body.get("delete_branch", False)))
        from ..bus import workers

        return {"task_id": task, "already": res.already, "into": res.into, "merge_commit": res.commit,
                "pushed": res.pushed, "archive_ref": res.archive_ref, "worktree_removed": res.removed_worktree,
                "branch_deleted": res.deleted_branch, "warnings": res.warnings,
                "state": workers.get(repo.bus.conn, task).state}


ACTIONS = {"tell": tell, "approve": approve, "request-changes": request_changes, "merge": merge}

__all__ = ["ACTIONS", "approve", "merge", "request_changes", "tell"]
