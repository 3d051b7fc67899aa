"""Moving the local integration branch after a merge: compare-and-set, or a marked ``git merge --ff-only``
in its checkout (undone by the next merge when killed half-way), and the sync up to a pushed merge.
"""

from __future__ import annotations

from ...errors import GitError
from ...git import checkout, cli, refs, worktrees
from .. import repair
from .repo import Repo


def _advance_local(repo: Repo, integration: str, old: str, new: str, target_wt: worktrees.WorktreeInfo | None) -> bool:
    """Move local ``integration`` from ``old`` to ``new``; False if it moved meanwhile."""
    if target_wt is None:
        return refs.update(repo.cwd, f"refs/heads/{integration}", new, old, f"nerve: merge into {integration}")
    if refs.resolve(target_wt.path, "HEAD") != old:
        return False
    # `git merge --ff-only` updates the checkout before the ref: a lock file left by a killed git
    # would make it fail half-way, so refuse before it starts
    wt_git_dir = worktrees.git_dir_of(target_wt.path)
    for lock in (repo.paths.common_dir / "refs" / "heads" / f"{integration}.lock", wt_git_dir / "index.lock",
                 wt_git_dir / "HEAD.lock"):
        if refs.stale_lock(lock):
            raise GitError(f"cannot move {integration}: {cli.stale_lock_message(str(lock))}")
    proc = _fast_forward(target_wt, old, new)
    if not proc.ok:
        if refs.resolve(target_wt.path, "HEAD") != old:
            return False
        said = cli.message(proc.stderr)
        raise GitError(f"could not fast-forward {integration} in {target_wt.path}: {said}"
                       f"{cli.disk_full_hint(said, target_wt.path)}")
    return True


#: the marker a fast-forward of the integration branch's checkout leaves while it runs
FF_MARKER = "integration-ff"


def _fast_forward(target_wt: worktrees.WorktreeInfo, old: str, new: str):
    """``git merge --ff-only NEW`` in the integration checkout, marked while it runs: a kill or a failure half-way
    (files written, HEAD not moved) is undone by the next merge (:func:`_undo_killed_fast_forward`)."""
    git_dir = worktrees.git_dir_of(target_wt.path)
    repair.set_marker(git_dir, FF_MARKER, {"from": old, "to": new})
    proc = checkout.merge_ff_only(target_wt.path, new)
    if proc.ok:
        repair.clear_marker(git_dir, FF_MARKER)
    # a failure keeps the marker: git may have written some files before it gave up (a full disk), and the
    # next merge puts back exactly those (only files holding NEW's content, or the start of it)
    return proc


def _undo_killed_fast_forward(target_wt: worktrees.WorktreeInfo | None) -> None:
    if target_wt is not None:
        line = repair.undo_partial_reset(target_wt.path, worktrees.git_dir_of(target_wt.path), FF_MARKER)
        if line:
            repair.say(line)


def _sync_local_integration(repo: Repo, integration: str, merged: str, target_wt: worktrees.WorktreeInfo | None) -> str | None:
    """After a push, bring the local integration branch (and its checkout) up to the remote."""
    local = refs.resolve(repo.cwd, f"refs/heads/{integration}")
    if local is None or local == merged:
        return None
    if not refs.is_ancestor(repo.cwd, local, merged):
        return f"local {integration} has commits that are not on the remote; it was left as it is"
    if target_wt is not None:
        proc = _fast_forward(target_wt, local, merged)
        if not proc.ok:
            said = cli.message(proc.stderr)
            return f"could not fast-forward {integration} in {target_wt.path}: {said}{cli.disk_full_hint(said, target_wt.path)}"
        return None
    refs.update(repo.cwd, f"refs/heads/{integration}", merged, local, f"nerve: sync {integration}")
    return None
