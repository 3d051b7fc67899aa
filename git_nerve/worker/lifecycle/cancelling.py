"""`cancel` (any live state -> FAILED, ``--cleanup`` through :mod:`.cleanup`), `retry` (FAILED -> ASSIGNED,
its worktree back first). (`show`, a reader, is :mod:`.repo`'s.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ... import faults
from ...bus import workers
from ...errors import GitError
from ...fs import notes_marker, set_marker
from ...git import destroy, refs
from ...locks import hold
from ..locking import task_lock
from ..states import State
from ..transitions import Outcome, get, transition
from ...worktree_prep.prepare import prepare
from .cleanup import _cleanup
from .guards import _refuse_branch_gone, _refuse_merged_on_remote, _refuse_unsaved
from .repo import Repo, _archived_tip, door_scope, repair_leftovers
from .worktree import _ensure_worktree, follow_moved_worktree


@dataclass
class CancelResult:
    outcome: Outcome
    archive_ref: str | None = None
    removed_worktree: bool = False
    deleted_branch: bool = False
    warnings: list[str] = field(default_factory=list)
    submodule_archives: list[str] = field(default_factory=list)
    ignored_removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def cancel(repo: Repo, task_id: str, *, reason: str | None = None, cleanup: bool = False, force: bool = False) -> CancelResult:
    """Any live state -> FAILED. ``cleanup`` archives the tip, then removes the worktree and branch."""
    repair_leftovers(repo)
    follow_moved_worktree(repo, get(repo.bus, task_id))
    if cleanup and not force:
        # refuse before the state changes: a refused cleanup leaves the task as it was
        w = get(repo.bus, task_id)
        if w.state != State.COMPLETED.value:
            if Path(w.worktree).is_dir():
                _refuse_branch_gone(repo, w, "cancel --cleanup")
            _refuse_unsaved(Path(w.worktree), repo.paths.common_dir)
    if cleanup and Path(get(repo.bus, task_id).worktree).is_dir():
        from .. import archive

        archive.refuse_homeless_submodules(repo, get(repo.bus, task_id))  # before the state changes
    with hold(task_lock(repo, get(repo.bus, task_id)), what=f"the lock of {task_id} (a merge of it is publishing)"):
        _refuse_merged_on_remote(repo, task_id, "cancel")
        outcome = transition(
            repo.bus, task_id, State.FAILED,
            allowed_from=[State.ASSIGNED, State.WORKING, State.CONFLICTED, State.IN_REVIEW, State.APPROVED],
            already=[State.FAILED], verb="cancel",
            extra_messages=[("task_failed", {"reason": reason or "cancelled", "by": "cancel"})],
        )
    res = CancelResult(outcome)
    faults.point("cancel.after-transition")
    if cleanup:
        from ...locks import try_hold

        held = try_hold(repo.lock_path(f"cleanup-{workers.task_key(task_id)}"))
        if held is None:  # two cleanups of one task at once: the other one removes it
            raise GitError(f"another command is cleaning up {task_id} right now; this one removed nothing "
                           f"(run `git worker cancel {task_id} --cleanup` again once it is done)")
        try:  # (try_hold hands back the lock already held)
            _cancel_cleanup(repo, outcome, res, force=force)
        finally:
            held.__exit__(None, None, None)
    return res


def _cancel_cleanup(repo: Repo, outcome: Outcome, res: CancelResult, *, force: bool) -> None:
    w = outcome.worker
    wt = Path(w.worktree)
    if not force:
        if wt.is_dir():
            _refuse_branch_gone(repo, w, "cancel --cleanup")
        _refuse_unsaved(wt, repo.paths.common_dir)
    _cleanup(repo, w, res, delete_branch=True, force=force, always_archive=True)


def retry(repo: Repo, task_id: str) -> Outcome:
    """FAILED -> ASSIGNED, recreating the worktree (from the archive if the branch was removed)."""
    # The worktree comes back first, the bus row moves last: a retry refused half-way (a full disk, a
    # read-only .git) leaves the task FAILED with nothing of the attempt left (what it made is rolled
    # back); a retry killed half-way leaves a FAILED task whose worktree the rerun verifies and adopts.
    # Already ASSIGNED: an older retry that stopped before its worktree was back is finished by running it again.
    repair_leftovers(repo)
    w = get(repo.bus, task_id)
    had_dir = True
    if w.state == State.FAILED.value:
        path = Path(w.worktree)
        had_dir, had_branch = path.exists(), refs.exists(repo.cwd, f"refs/heads/{w.branch}")
        try:
            _ensure_worktree(repo, w._replace(state=State.ASSIGNED.value))
            outcome = transition(repo.bus, task_id, State.ASSIGNED, allowed_from=[State.FAILED], already=[State.ASSIGNED],
                                 verb="retry", extra_messages=[("task_retry", {})], columns={"last_heartbeat": None})
        except BaseException:
            _undo_retry(repo, w, made_dir=not had_dir, made_branch=not had_branch)
            raise
    else:
        outcome = transition(repo.bus, task_id, State.ASSIGNED, allowed_from=[State.FAILED], already=[State.ASSIGNED],
                             verb="retry", extra_messages=[("task_retry", {})], columns={"last_heartbeat": None})
    _ensure_worktree(repo, outcome.worker)
    set_marker(notes_marker(repo.paths.nerve_dir, task_id))  # the cleanup cleared it: a note told before is not missed
    # the ignored files (and a port block) again; the setup reruns only in a worktree made anew
    prepare(repo.paths, repo.bus, task_id, Path(outcome.worker.worktree), run_setup=not had_dir)
    return outcome


def _undo_retry(repo: Repo, w: workers.Worker, *, made_dir: bool, made_branch: bool) -> None:
    """Take back what a refused retry made (the task is still FAILED): its new worktree, and the branch it
    restored from the archive ref (which keeps the tip). Best effort: the error that stopped it is what counts."""
    current = workers.get(repo.bus.conn, w.task_id)
    if current is not None and current.state != State.FAILED.value:
        return  # the transition happened after all (or another command moved the task): keep everything
    try:
        if made_dir:
            destroy.discard(repo.cwd, Path(w.worktree), door_scope(repo), task=w.task_id)
        if made_branch:
            tip = refs.resolve(repo.cwd, f"refs/heads/{w.branch}")
            if tip is not None and tip == _archived_tip(repo, w.task_id):
                destroy.delete_branch(repo.cwd, repo.paths.common_dir, w.branch, owned_by_task=w.task_id, old=tip,
                                      made_now=True)
    except Exception:  # noqa: BLE001 - a rollback must not hide the cause
        pass
