"""A live task's worktree: follow a `git worktree move`, recreate a missing one, verify and adopt an
existing one, rewrite a missing or wrong context file (used by spawn, done, merge, cancel, retry).
"""

from __future__ import annotations

import os
from pathlib import Path

from ... import clock
from ...bus import messages, workers
from ...context import WorkerContext
from ...context import write as write_ctx
from ...errors import GitError, UsageError
from ...git import destroy, ownership, refs, worktrees
from ...locks import hold
from .. import repair
from ..locking import add_lock
from ..states import State
from ..transitions import get
from .repo import Repo, _archived_tip, door_scope


def _ensure_worktree(repo: Repo, w: workers.Worker) -> None:
    """Make a live task's worktree complete: recreate it when missing (after a crash or a manual removal),
    adopt an existing one only once verified (:func:`_verify_worktree`), and rewrite a missing or wrong
    context file."""
    if w.state in (State.COMPLETED.value, State.FAILED.value):
        return
    w = follow_moved_worktree(repo, w)
    path = Path(w.worktree)
    if not path.exists() or not _registered(repo, path):
        with hold(add_lock(repo, path), what="the worktree lock"):
            destroy.prune_entry(repo.cwd, path, door_scope(repo))
            if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                destroy.remove_empty_dirs([path])  # an empty directory git never filled
            if path.exists() and not _registered(repo, path):
                raise GitError(f"{path} exists but is not a git worktree; move it away, then run this command again")
            if not path.exists():
                if not refs.exists(repo.cwd, f"refs/heads/{w.branch}"):
                    archived = refs.resolve(repo.cwd, refs.archive_name(w.task_id))
                    if archived is None:
                        raise GitError(f"branch {w.branch} of task {w.task_id} is gone and no archive ref exists")
                    ownership.record(repo.paths.common_dir, "branch", w.branch, task=w.task_id,
                                     adopted=w.adopted != 0)  # NULL (an older bus): cannot tell, kept
                    refs.update(repo.cwd, f"refs/heads/{w.branch}", _archived_tip(repo, w.task_id), None, "nerve: restore from archive")
                path.parent.mkdir(parents=True, exist_ok=True)
                ownership.record(repo.paths.common_dir, "worktree", os.fspath(path), task=w.task_id)
                worktrees.add(repo.cwd, path, branch=w.branch, start=None)
    _verify_worktree(repo, w)


def follow_moved_worktree(repo: Repo, w: workers.Worker) -> workers.Worker:
    """A task's worktree moved with `git worktree move`: find it where git says it is now (the worktree that
    has the task's branch checked out), record that path on the bus and in its context file."""
    recorded = Path(w.worktree)
    if recorded.is_dir() and (recorded / ".git").exists():
        return w
    from ...context import read as read_ctx

    now = worktrees.find_for_branch(repo.cwd, f"refs/heads/{w.branch}")
    if now is None or os.path.realpath(now.path) == os.path.realpath(recorded) or not now.path.is_dir():
        return w
    git_dir = worktrees.git_dir_of(now.path)
    try:
        ctx = read_ctx(git_dir)
    except UsageError:
        ctx = None
    if ctx is None or ctx.task_id != w.task_id:
        return w  # the branch checked out by hand somewhere else (the main checkout): not the task's worktree
    write_ctx(git_dir, WorkerContext(task_id=w.task_id, branch=w.branch, worktree=str(now.path),
                                     created_at=clock.iso(w.assigned_at) or "", description=w.description))
    with repo.bus.write() as conn:
        workers.update(conn, w.task_id, worktree=str(now.path))
        messages.publish(conn, w.task_id, "worktree_moved", {"from": str(recorded), "to": str(now.path)}, clock.now())
    repair.say(f"the worktree of {w.task_id} was moved to {now.path} (git worktree move); recorded its new place")
    return get(repo.bus, w.task_id)


def _registered(repo: Repo, path: Path) -> bool:
    real = os.path.realpath(path)
    return any(os.path.realpath(wt.path) == real and not wt.prunable for wt in worktrees.list_all(repo.cwd))


def _verify_worktree(repo: Repo, w: workers.Worker) -> None:
    """A task's worktree is adopted only when it is on the task's branch (or mid-operation there) and its
    context file names the task; a missing or wrong context file is rewritten (one `repaired:` line)."""
    from ...context import repair as repair_context  # the one context-file repair (not .repair: git's leftovers)

    path = Path(w.worktree)
    git_dir = worktrees.git_dir_of(path)
    head = refs.symbolic(path, "HEAD")
    if head != f"refs/heads/{w.branch}" and worktrees.operation_in_progress(git_dir) is None:
        raise GitError(f"the worktree {path} of {w.task_id} is not on its branch {w.branch} (HEAD: {head or 'detached'}); "
                       f"check {w.branch} out there again")
    if repair_context(git_dir, WorkerContext(task_id=w.task_id, branch=w.branch, worktree=str(path),
                                             created_at=clock.iso(w.assigned_at) or "", description=w.description)):
        repair.say(f"wrote the missing context file of {w.task_id} in {path}")
