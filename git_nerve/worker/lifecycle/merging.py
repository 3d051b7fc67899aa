"""`merge`: APPROVED -> COMPLETED, a ``--no-ff`` merge built in memory, pushed from a temporary checkout
(every pre-push gate runs, :mod:`.publish`) or moved locally by compare-and-set, retried when the remote moved,
recorded under the task's lock, then cleaned up (:mod:`.cleanup`). A task another machine holds (shared mode) is
merged by :mod:`.merge_elsewhere`; on PostgreSQL the claim row is held across the push. Also
``unfinished_cleanups`` and how a tip the integration branch already holds is recorded (``_merged_as``,
``_record_merge``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

from ... import faults
from ...bus import messages, workers
from ...errors import ConflictError, GitError, InvalidTransition
from ...git import refs, worktrees
from ...locks import hold
from .. import claims, repair
from ..locking import task_lock
from ..states import State
from ..transitions import get, transition
from .advance import _advance_local, _sync_local_integration, _undo_killed_fast_forward
from .check import _parse_check, _run_check
from .cleanup import _cleanup
from .guards import (_refuse_branch_gone, _refuse_copied_secrets, _refuse_dropped, _refuse_submodule_work,
                     _remote_refused)
from .publish import (MERGE_ATTEMPTS, MergeResult, _gate_refused, _push_from_checkout,  # noqa: F401  (re-exported)
                      after_lost_race, claim_held, merge_attempts)
from .repo import Repo, _require_tip, integration_ref, repair_leftovers
from .worktree import follow_moved_worktree


def merge(
    repo: Repo,
    task_id: str,
    *,
    delete_branch: bool = False,
    check: str | None = None,
    force: bool = False,
) -> MergeResult:
    """APPROVED -> COMPLETED: a ``--no-ff`` merge built in memory, published by compare-and-set.

    With a remote: fetch, merge, push (a lease on the tip that was merged),
    retrying up to three times when the push loses a race. A conflict sends
    the task back to WORKING (exit 6). ``check`` runs on the merge result in a
    temporary worktree before anything moves; if it fails nothing moves
    (exit 7). Afterwards the worker's worktree is removed (its tip archived).
    """
    check_argv = _parse_check(check)
    repair_leftovers(repo)
    if (elsewhere := _merge_elsewhere(repo, task_id, check)) is not None:
        return elsewhere
    w = follow_moved_worktree(repo, get(repo.bus, task_id, "merge"))
    if w.state == State.COMPLETED.value:
        res = MergeResult(None, already=True, into=w.integration)
        _cleanup(repo, w, res, delete_branch=delete_branch, force=force)
        return res
    if w.state != State.APPROVED.value:
        raise InvalidTransition(f"cannot merge {task_id}: it is {w.state} (merge needs APPROVED)")
    cwd = repo.cwd
    integration = w.integration
    _refuse_unmergeable(repo, w, force=force)
    branch_ref = f"refs/heads/{w.branch}"
    tip = refs.resolve(cwd, branch_ref) or refs.resolve(cwd, refs.archive_name(task_id))
    if tip is None:
        raise GitError(f"branch {w.branch} of {task_id} does not exist")

    from ...git import objects

    res = MergeResult(None, into=integration)
    committer = objects.identity(cwd)
    author = objects.identity(cwd, "GIT_AUTHOR_IDENT")
    message = f"Merge {w.branch} ({task_id})\n" + (f"\n{w.description}\n" if w.description else "")
    with claim_held(repo, task_id), hold(repo.lock_path("merge"), what="the merge lock"):
        # looked at under the lock: a merge fast-forwarding this checkout makes it look dirty meanwhile
        target_wt = worktrees.find_for_branch(cwd, f"refs/heads/{integration}")
        _undo_killed_fast_forward(target_wt)
        if target_wt is not None and worktrees.dirty_files(target_wt.path, untracked=False):
            raise GitError(
                f"{integration} is checked out at {target_wt.path} with uncommitted changes; commit or stash them, then merge again"
            )
        attempts = merge_attempts(repo)
        for attempt in range(1, attempts + 1):
            res.attempts = attempt
            if _merge_once(repo, w, res, tip, (message, author, committer), check_argv, target_wt):
                break
            after_lost_race(attempt, attempts)
        else:
            raise GitError(f"{integration} kept moving; gave up after {attempts} attempts (run merge again)")
    faults.point("merge.after-transition")  # recorded, not cleaned up
    _cleanup(repo, w, res, delete_branch=delete_branch, force=force)
    return res


def _merge_elsewhere(repo: Repo, task_id: str, check: str | None) -> MergeResult | None:
    """Shared mode: a task another machine holds is merged from here (:mod:`.merge_elsewhere`)."""
    if workers.get(repo.bus.conn, task_id) is not None:
        return None
    from .merge_elsewhere import merge_elsewhere, merges_elsewhere

    return merge_elsewhere(repo, task_id, check=check) if merges_elsewhere(repo) else None


def _refuse_unmergeable(repo: Repo, w: workers.Worker, *, force: bool) -> None:
    """Before anything moves: refuse what the cleanup after the merge could not keep (a branch deleted by
    hand, uncommitted changes without --force, submodule work)."""
    task_id = w.task_id
    wt = Path(w.worktree)
    if wt.is_dir():
        _refuse_branch_gone(repo, w, "merge")
    if wt.is_dir() and not force and not repair.removal_interrupted(wt, repo.paths.common_dir):
        dirty = worktrees.dirty_files(wt)
        if dirty:
            raise GitError(
                f"the worktree of {task_id} has uncommitted changes ({', '.join(dirty[:5])}); "
                "commit them (and have them reviewed) or pass --force to archive them"
            )
        _refuse_submodule_work(wt)  # before COMPLETED: its cleanup must not fail afterwards
    if wt.is_dir():
        from .. import archive

        archive.refuse_homeless_submodules(repo, w)  # the cleanup keeps submodule work: refuse now if it cannot


def _merge_once(repo: Repo, w: workers.Worker, res: MergeResult, tip: str, signed: tuple[str, str, str],
                check_argv: list[str] | None, target_wt: worktrees.WorktreeInfo | None) -> bool:
    """One attempt (under the merge lock): merge ``tip`` onto the integration branch's current tip, check it,
    publish and record it; False when the integration branch moved meanwhile (the caller merges again)."""
    from ...git import objects

    cwd = repo.cwd
    task_id, integration = w.task_id, w.integration
    message, author, committer = signed
    target_ref = integration_ref(repo, integration, fetch=True)
    ours = _require_tip(cwd, target_ref, "integration branch")
    if refs.is_ancestor(cwd, tip, ours):
        # already merged (a previous run was interrupted after publishing), or nothing to merge
        made = _merged_as(repo, w, tip, target_ref)
        res.pushed = made is not None and target_ref.startswith("refs/remotes/")
        with hold(task_lock(repo, w), what=f"the lock of {task_id}"):
            _record_merge(repo, w, res, made, tip, target_ref, target_wt)
        return True
    _refuse_dropped(repo, w, tip, ours, target_ref)
    _refuse_copied_secrets(repo, w, cwd, tip, ours)  # before the push (or the local move): nothing moves
    mr = objects.merge_commit(repo.paths.common_dir, ours, tip, message, author, committer)
    if mr.commit is None:
        _merge_conflict(repo, w, mr.conflicts, ours)
    faults.point("merge.after-commit")  # the merge commit exists, nothing moved
    if check_argv:
        _run_check(repo, mr.commit, check_argv)
    # publish and record under the task's lock: request-changes and cancel wait for it, so the
    # task cannot leave APPROVED between the integration branch moving and COMPLETED
    with hold(task_lock(repo, w), what=f"the lock of {task_id}"):
        now = get(repo.bus, task_id)
        if now.state != State.APPROVED.value:
            raise InvalidTransition(
                f"cannot merge {task_id}: it became {now.state} while the merge was prepared; nothing was merged"
            )
        if target_ref.startswith("refs/remotes/"):  # (not for an integration branch the remote lacks)
            if not _push_merge(repo, w, mr.commit, ours):
                return False  # the remote moved between fetch and push: merge again on the new tip
            res.pushed = True
        elif not _advance_local(repo, integration, ours, mr.commit, target_wt):
            return False
        _record_merge(repo, w, res, mr.commit, tip, target_ref, target_wt)
    return True


def _merge_conflict(repo: Repo, w: workers.Worker, conflicts: list[str], ours: str) -> NoReturn:
    """The merge conflicts: APPROVED -> WORKING, and :class:`ConflictError` saying how to resolve it."""
    task_id, integration = w.task_id, w.integration
    transition(
        repo.bus, task_id, State.WORKING, allowed_from=[State.APPROVED], verb="merge",
        extra_messages=[("merge_conflict", {"files": conflicts, "into": integration, "onto": ours})],
        columns={"approved_at": None},
    )
    raise ConflictError(
        f"merging {task_id} into {integration} conflicts; the task is back to WORKING",
        files=conflicts,
        details=[f"Conflicting files: {', '.join(conflicts)}", *merge_conflict_steps(task_id, w.worktree, integration)],
    )


def merge_conflict_steps(task_id: str, worktree: str | None, integration: str) -> list[str]:
    """How to resolve a merge that conflicted, as `git worker merge` prints it (the console's conflict banner too)."""
    return ["To resolve:", f"  1. in {Path(worktree or '.')}: git worker done   (rebases onto {integration})",
            "  2. get it approved again", f"  3. git worker merge {task_id}"]


def _push_merge(repo: Repo, w: workers.Worker, commit: str, ours: str) -> bool:
    """Push the merge commit to the remote's integration branch; False when the push lost a race (the remote
    moved), an error for any refusal (nothing was merged)."""
    settings = repo.settings
    integration = w.integration
    claim = claims.riding_push(repo.bus, w.task_id, State.APPROVED.value, State.COMPLETED, "merge", settings.remote)
    push = _push_from_checkout(repo, settings.remote, commit, integration, ours, also=claim.also)  # one atomic push
    if push.rejected:
        claim.failed(repo.bus)  # shared mode: HeldElsewhere when it was the task's claim that lost
        return False
    if push.hook_refused:
        raise _gate_refused(push, integration, settings.remote, w.task_id)
    if push.remote_refused:
        raise _remote_refused(push, integration, settings.remote,
                              f"nothing was merged ({w.task_id} is still APPROVED)")
    if not push.ok:
        raise GitError(f"could not push {integration} to {settings.remote}: {push.message}")
    claim.landed(repo.bus)
    faults.point("merge.after-push")  # the remote moved, the local branch not yet
    return True


def unfinished_cleanups(repo: Repo) -> list[str]:
    """COMPLETED tasks whose worktree is still there, or still registered with git (a removal killed after git
    deleted the files): a merge killed between COMPLETED and the end of its cleanup (not one another machine made)."""
    done = workers.all_workers(repo.bus.conn, states=(State.COMPLETED.value,))
    if not done:
        return []
    registered = {os.path.abspath(info.path) for info in worktrees.list_all(repo.cwd)}
    return [w.task_id for w in done if (Path(w.worktree).exists() or os.path.abspath(w.worktree) in registered)
            and not _merged_by_another_machine(repo, w.task_id)]


def _merged_by_another_machine(repo: Repo, task_id: str) -> bool:
    """Merged by another machine (PostgreSQL; the row followed at a sync): its worktree is kept for a person's
    `git worker merge T`, never cleaned up as a merge of this machine's that was killed."""
    found = messages.for_task(repo.bus.conn, task_id, kinds=("merged",))
    return bool(found and found[-1].payload.get("machine"))


def _merged_as(repo: Repo, w: workers.Worker, tip: str, target_ref: str) -> str | None:
    """For a tip the integration branch already contains: the merge commit that brought it in (a merge whose
    record was interrupted), else None, with ``nothing to merge`` said honestly by the caller. A task that went
    through `done` with nothing of its own is COMPLETED as "nothing to merge" only when that was allowed
    (--allow-empty); one whose commits reached the integration branch another way (a person's fast-forward)
    is COMPLETED as "already on <branch>"; never as a merge commit that is not its own."""
    from .. import merged

    made = merged.merge_commit_on(repo.cwd, tip, target_ref)
    if made is not None:
        return made
    if _empty_task(repo, w, tip) and not _last_review_request(repo, w).get("empty"):
        raise InvalidTransition(
            f"cannot merge {w.task_id}: it has no commits of its own (nothing to merge); send it back "
            f"(git worker request-changes {w.task_id} --comment ...) or cancel it"
        )
    return None


def _last_review_request(repo: Repo, w: workers.Worker) -> dict:
    found = messages.for_task(repo.bus.conn, w.task_id, kinds=("review_request",))
    return found[-1].payload if found else {}


def _empty_task(repo: Repo, w: workers.Worker, tip: str) -> bool:
    """The tip is on the integration branch as it was when the task asked for review: nothing of its own."""
    onto = _last_review_request(repo, w).get("onto")
    if not onto:
        assigned = messages.for_task(repo.bus.conn, w.task_id, kinds=("task_assign",))
        onto = assigned[0].payload.get("base_sha") if assigned else None
    return bool(onto) and refs.resolve(repo.cwd, onto) is not None and refs.is_ancestor(repo.cwd, tip, onto)


def _record_merge(repo: Repo, w: workers.Worker, res: MergeResult, merged: str | None, tip: str, target_ref: str,
                  target_wt: worktrees.WorktreeInfo | None) -> None:
    """A published merge: bring the local integration branch up to a pushed one, then APPROVED -> COMPLETED.
    ``merged`` None: no merge commit was made (nothing to merge, or the tip already on the branch)."""
    if merged is None:
        # "allowed": done --allow-empty; "upstream": done's rebase dropped every commit (already on the branch)
        res.nothing = "empty" if _last_review_request(repo, w).get("empty") == "allowed" else "on-integration"
        res.commit = None
        res.outcome = transition(
            repo.bus, w.task_id, State.COMPLETED, allowed_from=[State.APPROVED], already=[State.COMPLETED], verb="merge",
            extra_messages=[("merged", {"commit": None, "into": w.integration, "tip": tip, "pushed": False,
                                        "nothing": res.nothing})],
        )
        return
    if target_ref.startswith("refs/remotes/"):
        warning = _sync_local_integration(repo, w.integration, merged, target_wt)
        if warning:
            res.warnings.append(warning)
    faults.point("merge.before-transition")  # published, not recorded
    res.commit = merged
    res.outcome = transition(
        repo.bus, w.task_id, State.COMPLETED, allowed_from=[State.APPROVED], already=[State.COMPLETED], verb="merge",
        extra_messages=[("merged", {"commit": merged, "into": w.integration, "tip": tip, "pushed": res.pushed})],
    )
