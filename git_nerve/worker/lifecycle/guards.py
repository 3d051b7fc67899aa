"""The refusals several verbs share, each checked before anything changes: a branch deleted by hand,
unsaved work a removal would lose (a stopped operation, uncommitted changes, submodule work), commits the
integration branch dropped, a merge that already reached the remote, a commit carrying a copied secret; and the
remote's own refusal of a push.
"""

from __future__ import annotations

from pathlib import Path

from ...bus import workers
from ...errors import CheckFailed, GitError, InvalidTransition
from ...git import history, worktrees
from ...git import remote as gitremote
from .. import repair
from ..states import State
from ..transitions import get
from .repo import Repo


def _refuse_branch_gone(repo: Repo, w: workers.Worker, verb: str) -> None:
    """GitError naming a branch deleted by hand (rather than "uncommitted changes (every file)")."""
    from .. import archive

    if archive.branch_gone(repo, w):
        raise archive.branch_gone_error(repo, w, verb)


def _refuse_unsaved(wt: Path, common: Path | None = None) -> None:
    """GitError when removing ``wt`` would lose a stopped rebase/merge or uncommitted changes."""
    if not wt.is_dir() or repair.removal_interrupted(wt, common):
        return
    op = worktrees.operation_in_progress(worktrees.git_dir_of(wt))
    if op:
        raise GitError(f"a {op} is in progress in {wt}; finish or abort it, or pass --force")
    dirty = worktrees.dirty_files(wt)
    if dirty:
        raise GitError(
            f"the worktree {wt} has uncommitted changes ({', '.join(dirty[:5])}); "
            "commit them, or pass --force to archive them and remove the worktree"
        )
    _refuse_submodule_work(wt)


def _refuse_submodule_work(wt: Path) -> None:
    """GitError when a submodule of ``wt`` holds work its removal would lose (no archive can keep it)."""
    unsaved = worktrees.submodule_unsaved(wt)
    if unsaved:
        raise GitError(
            f"the worktree {wt} has submodules with unsaved work ({', '.join(unsaved[:5])}); "
            "commit and push it in the submodule, or pass --force to remove it anyway"
        )


def _refuse_dropped(repo: Repo, w: workers.Worker, tip: str, ours: str, target_ref: str, *, verb: str = "merge") -> None:
    """Refuse to publish again a commit the integration branch dropped (force-pushed backwards)."""
    from .. import merged

    merged.refuse_dropped(repo, w, tip, ours, target_ref, verb=verb)


def _refuse_merged_on_remote(repo: Repo, task_id: str, verb: str) -> None:
    """An APPROVED task whose merge reached the remote unrecorded (a merge killed after its push) is
    recorded COMPLETED, and the command refused: its work is published. Call holding the task's lock."""
    from .. import merged

    before = get(repo.bus, task_id).state
    w = merged.reconcile(repo, task_id, fetch=True, lock="held")
    if before == State.APPROVED.value and w.state == State.COMPLETED.value:
        raise InvalidTransition(
            f"cannot {verb} {task_id}: its merge already reached the remote{merged.merged_note(repo, task_id)}; "
            "recorded it as COMPLETED"
        )


def _remote_refused(push: gitremote.PushResult, branch: str, remote: str, then: str) -> GitError:
    """The remote's own hook (pre-receive, update) declined the push: the remote's words, as the remote's."""
    return GitError(f"{remote} refused the push of {branch}: its own hook (pre-receive or update) declined it; {then}",
                    details=list(push.remote_said[-40:]) or [push.message])


def _refuse_copied_secrets(repo: Repo, w: workers.Worker, cwd, tip: str, onto: str) -> None:
    """CheckFailed (exit 7) before anything is published when a commit ``tip`` brings that ``onto`` lacks adds a file
    or a value git-nerve copied into the task's worktree (`done` and `merge` call it before their push; the pre-push
    hook asks the same function): a `git commit --no-verify` publishes no secret."""
    from ...worktree_prep.secrets import published_refusal

    reason = published_refusal(repo.bus.conn, w.task_id,
                               lambda: history.rev_list(cwd, [tip], excluding=[onto], reverse=True), cwd=cwd)
    if reason:
        raise CheckFailed(f"refused: {reason}; nothing was published ({w.task_id} is still {w.state})")
