"""THE cleanup of a task, used by `merge` and `cancel --cleanup`: archive what it holds, remove its worktree,
prune a worktree deleted by hand, delete its branch here and on the remote, each through the door.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from ... import faults
from ...fs import clear_marker, notes_marker
from ...bus import workers
from ...git import destroy, refs, worktrees
from ...git import remote as gitremote
from ...worktree_prep import setup
from .. import repair
from .repo import Repo, _publish, door_scope


class _Cleaned(Protocol):
    """What a cleanup reports into: a :class:`.merging.MergeResult` or a :class:`.cancelling.CancelResult`."""

    archive_ref: str | None
    removed_worktree: bool
    deleted_branch: bool
    warnings: list[str]
    submodule_archives: list[str]
    ignored_removed: list[str]
    kept: list[str]


def _archive(repo: Repo, w: workers.Worker, *, force: bool, kept: list[str] | None = None) -> str | None:
    """Keep everything the task holds under refs/nerve/archive/<task> (see :mod:`.archive`)."""
    from .. import archive

    wt = Path(w.worktree)
    if wt.is_dir() and repair.removal_interrupted(wt, repo.paths.common_dir) and refs.exists(repo.cwd, refs.archive_name(w.task_id)):
        return refs.archive_name(w.task_id)  # archived before the removal that was killed
    return archive.archive(repo, w, force=force, kept=kept)


def _cleanup(repo: Repo, w: workers.Worker, res: _Cleaned, *, delete_branch: bool,
             force: bool, always_archive: bool = False) -> None:
    """The one cleanup of a task (after merge, and `cancel --cleanup`): archive what it holds, remove its worktree
    and (``delete_branch``) its branch, each through the door; what the door cannot prove ours is kept and said."""
    wt = Path(w.worktree)
    if always_archive or wt.is_dir() or (delete_branch and refs.exists(repo.cwd, f"refs/heads/{w.branch}")):
        res.archive_ref = _archive(repo, w, force=force, kept=res.submodule_archives)
    faults.point("cleanup.after-archive")
    res.warnings += setup.stop(repo.paths.common_dir, w.task_id)  # its running setup, whole group, waited for
    if wt.is_dir():
        ignored = worktrees.ignored_files(wt)  # deleted with it, never archived (they may hold secrets)
        try:
            repair.remove_worktree(repo.cwd, wt, force=force, scope=door_scope(repo), task=w.task_id,
                                   common=repo.paths.common_dir)
            res.removed_worktree, res.ignored_removed = True, ignored
        except destroy.Refused as exc:  # e.g. moved (`git worktree move`) out of the worktree root: the person's now
            res.warnings.append(f"{exc.message}; its work is archived under {res.archive_ref}: remove it yourself "
                                f"with `git worktree remove {wt}` once you no longer need it")
    else:
        _prune_missing(repo, wt)
    if not wt.is_dir():  # no agent of the task is left: its notes-pending marker goes, through the door
        clear_marker(notes_marker(repo.paths.nerve_dir, w.task_id))
    if delete_branch:
        res.deleted_branch = _delete_branch(repo, w, res.warnings, res.kept)
    if always_archive or res.removed_worktree or res.deleted_branch:
        _publish(repo.bus, w.task_id, "cleanup", {"archive": res.archive_ref, "worktree_removed": res.removed_worktree,
                                                  "branch_deleted": res.deleted_branch})


def _prune_missing(repo: Repo, wt: Path) -> None:
    """A worktree deleted by hand leaves git's entry for it behind ("prunable"): drop it."""
    if any(info.path == wt or os.path.abspath(info.path) == os.path.abspath(wt) for info in worktrees.list_all(repo.cwd)):
        destroy.prune_entry(repo.cwd, wt, door_scope(repo))


def _delete_branch(repo: Repo, w: workers.Worker, warnings: list[str] | None = None, kept: list[str] | None = None) -> bool:
    """Delete the task's branch here, and on the remote, as far as :mod:`.owned` allows (``kept`` says why not)."""
    from .. import owned

    deleted = False
    why = owned.keep_branch(repo, w)
    if why:  # adopted: the person's, here and on every remote
        if kept is not None:
            kept.append(why)
        return deleted
    ref = f"refs/heads/{w.branch}"
    elsewhere = worktrees.find_for_branch(repo.cwd, ref)
    if elsewhere is not None:  # never delete a branch some worktree has checked out (the task's own is gone by now)
        if warnings is not None:
            warnings.append(f"{w.branch} was not deleted: it is checked out at {elsewhere.path}")
        return deleted
    sha = refs.resolve(repo.cwd, ref)
    # the door proves it again from the record: a branch owned.py keeps (adopted, or cannot tell) is never deleted
    owner = {"owned_by_task": w.task_id}
    if sha is not None:
        destroy.delete_branch(repo.cwd, repo.paths.common_dir, w.branch, old=sha, **owner)
        deleted = True
    remote = repo.settings.remote
    if remote and (owned.pushed(repo, w)[0] or refs.exists(repo.cwd, f"refs/remotes/{remote}/{w.branch}")):
        return _delete_on_remote(repo, remote, w, owner, warnings, kept) or deleted
    return deleted


def _delete_on_remote(repo: Repo, remote: str, w: workers.Worker, owner: dict, warnings: list[str] | None,
                      kept: list[str] | None) -> bool:
    """Delete the task's branch on ``remote`` only while it holds the value git-nerve last pushed there (leased
    on it, as read from the remote now); a branch that moved since (someone pushed onto it) is kept, what they
    pushed archived, one line naming it. True when it is gone there."""
    from .. import owned

    why = owned.keep_on_remote(repo, w, remote)
    if why:  # found there, not pushed there by git-nerve
        if kept is not None:
            kept.append(why)
        return False
    now = owned.remote_value(repo, w, remote)
    if now is not None and now != owned.pushed(repo, w)[1]:
        if kept is not None:
            kept.append(_keep_moved(repo, remote, w, now))
        return False
    push = _delete_from_checkout(repo, remote, w, now) if now is not None else None
    if push is not None and not push.ok and _remote_has_branch(repo, remote, w.branch):
        # the task is already COMPLETED/FAILED: say so, do not fail the command for it
        said = "; ".join(ln.strip() for ln in push.output.splitlines()
                         if ln.strip() and not ln.startswith("error: failed to push some refs"))[-500:]
        if warnings is not None:
            warnings.append(f"{w.branch} was not deleted on {remote}: " + (
                "it moved while it was being deleted (someone pushed onto it); it is kept" if push.rejected
                else said or push.message))
        return False
    destroy.delete_tracking_ref(repo.cwd, repo.paths.common_dir, remote, w.branch, **owner)
    return True


def _keep_moved(repo: Repo, remote: str, w: workers.Worker, now: str) -> str:
    """The task's branch on ``remote`` is not at the value git-nerve pushed there: what it holds that git-nerve
    did not push (and the integration branch does not hold) is archived; the line saying why it is kept."""
    from .. import archive, owned

    integration = [r for r in (f"refs/remotes/{remote}/{w.integration}", f"refs/heads/{w.integration}")
                   if refs.exists(repo.cwd, r)]
    theirs = owned.not_pushed_by_us(repo, w, now, integration)
    ref = archive.keep_commits(repo, w, [now], f"{w.branch} on {remote} moved since git-nerve pushed it")
    sha = owned.pushed(repo, w)[1]
    why = (f"it moved since git-nerve pushed {sha[:12]}" if sha else
           "git-nerve did not record the value it pushed there, so cannot tell whether someone pushed onto it")
    return (f"kept branch {w.branch} on {remote}: {why} (now at {now[:12]}"
            + (f"; {len(theirs)} commit(s) git-nerve did not push, archived under {ref}: "
               f"{owned.name_commits(repo, theirs)})" if theirs else f", archived under {ref})"))


def _delete_from_checkout(repo: Repo, remote: str, w: workers.Worker, expected: str) -> gitremote.PushResult:
    """Delete the task's branch on the remote from a real checkout (as :func:`_push_from_checkout`), leased on
    ``expected`` (the value git-nerve pushed there, read from the remote now)."""
    from .. import owned

    config = gitremote.from_checkout_config(repo.paths.main_checkout or repo.paths.common_dir, remote)
    at = expected if refs.resolve(repo.cwd, f"{expected}^{{commit}}") else "HEAD"
    with worktrees.checkout_at(repo.cwd, repo.paths.common_dir, at, what="push") as path:
        return destroy.delete_remote_branch(path, repo.paths.common_dir, remote, w.branch, owned_by_task=w.task_id,
                                            expected=expected, config=config)


def _remote_has_branch(repo: Repo, remote: str, branch: str) -> bool:
    return gitremote.has_branch(repo.cwd, remote, branch)


def after_merge_elsewhere(repo: Repo) -> list[str]:
    """The holder's side of a merge another machine made of its task (shared mode: its row followed to COMPLETED
    at a sync, :mod:`git_nerve.bus.followed`), run by `git nerve sync`: the task's worktree cleaned up as its own
    merge's would be (archived first, removed through the door; the branch kept, as `git worker merge` keeps it
    without --delete-branch). A worktree with uncommitted changes is kept: `git worker merge T --force` archives
    and removes it. One line each."""
    from ...bus import messages
    from ...locks import hold
    from ..locking import task_lock
    from .publish import MergeResult

    lines = []
    for w in workers.all_workers(repo.bus.conn, states=("COMPLETED",)):
        if not Path(w.worktree).is_dir():
            continue
        found = messages.for_task(repo.bus.conn, w.task_id, kinds=("merged", "cleanup"))
        by = found[-1].payload.get("machine") if found and found[-1].kind == "merged" else None
        if not by:
            continue  # merged here, or cleaned up (or tried: a worktree the door kept) since the merge
        dirty = worktrees.dirty_files(Path(w.worktree))
        if dirty:
            lines.append(f"{w.task_id} was merged by machine {by}; its worktree {w.worktree} has uncommitted changes "
                         f"({', '.join(dirty[:3])}): kept (`git worker merge {w.task_id} --force` archives and "
                         "removes it)")
            continue
        res = MergeResult(None, already=True, into=w.integration)
        with hold(task_lock(repo, w), what=f"the lock of {w.task_id}"):
            _cleanup(repo, w, res, delete_branch=False, force=False, always_archive=True)
        kept = "; ".join(res.warnings + res.kept)
        lines.append(f"{w.task_id} was merged by machine {by}: " + (
            f"its worktree removed (archived under {res.archive_ref})" if res.removed_worktree else "its worktree kept")
            + (f"; {kept}" if kept else ""))
    return lines
