"""What a killed command (or a killed git child of one) leaves behind, found and repaired by the next command.

A git process killed half-way leaves its own leftovers, which git never cleans up by itself:

* a worktree whose ``git worktree add`` died: its admin dir is still ``locked`` with the reason
  "initializing" (git removes that lock only once HEAD is written and the checkout is done), its
  HEAD may be 0000… (then every ``git fetch`` in the repository fails: "did not send all
  necessary objects"), its checkout half done (an index that stages the deletion of every file);
* ``*.lock`` files (``index.lock``, ``refs/heads/x.lock``, ``git-rebase-todo.lock``, ...) whose
  owner is dead, which make every later git command in that place fail.

:func:`clean_git_leftovers` removes those, each with one line on stderr saying what was repaired, but only
when git-nerve can *prove* that a git of its own made them and is gone: each git-nerve command holds a
liveness token that its git children inherit (:mod:`git_nerve.liveness`, no ``/proc``: the same on macOS and
in another PID namespace). A lock file is removed when a dead token had a git child running in the worktree the
lock belongs to (any of its git children, for the repository's shared locks: refs, packed-refs, config), the
lock is not older than that child (same filesystem clock) and no live token has a git child there. An unfinished
`git worktree add` and a temporary checkout are removed when a dead token recorded making them. Everything else
(a person's ``git commit`` waiting in its editor, another tool's git, a leftover from before tokens) is kept
with one ``kept:`` line naming it and what to do; a command that then needs it fails with git's message and
that hint (exit 4). A repaired token is consumed (removed), so nothing is acted on twice.

Residual window, honestly: between the kill of our command and the next repair, a person's git may take a
lock in the very worktree our killed git child was in (or a shared ref lock of the repository), and keep it
(an editor): that lock is newer than our child and is removed as ours. The repair runs at the start of the
next git-nerve command, so the window is "a git of yours started in that worktree after git-nerve was killed
there and before you ran git-nerve again". The last check (the lock is still the one judged: same inode and
times) and its removal are not atomic either: a lock replaced in those microseconds may be removed.
In-process pygit2 writes take no git lock (objects only), so only git children need covering.

Our own multi-step git operations leave a marker first (``<worktree git dir>/nerve/<name>``), so a
rerun knows an interrupted one was ours and how to finish or undo it:

* ``removing``: a worktree removal (``cancel --cleanup``, merge's cleanup) whose archive is made:
  what is missing from the worktree was deleted by the removal itself, which the rerun resumes;
* ``done-reset``: ``done``'s ``git reset --keep`` from the old tip to the rebased one: a rerun
  puts the files the killed reset already wrote back as they were at the old tip;
* ``done-rebase``: ``done``'s own ``git rebase`` (started on a conflict libgit2 found): killed
  before it stopped on a conflict, it is aborted and ``done`` starts again.

Git's own leftovers are found and removed in :mod:`.leftovers`; this module keeps the markers.
Standard library only (and the git binary through the standard-library modules of :mod:`..git`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ..fs import locked_tmp_name, make_dirs, replace_file
from ..git import checkout, destroy, objectdb, refs, worktrees
from .leftovers import _kept_line, clean_git_leftovers, kept_lock_line, say, stale_git_locks


# -- markers of our own multi-step operations ----------------------------------------------------------------


def marker(git_dir: Path, name: str) -> Path:
    return git_dir / "nerve" / name


def set_marker(git_dir: Path, name: str, data: dict) -> None:
    path = marker(git_dir, name)
    make_dirs(path.parent)
    # a full disk: no half-written marker left behind; a kill between the write and the rename leaves a locked
    # temporary of ours, which the next command's leftover check removes once its writer is gone
    # (leftovers._marker_temporaries, destroy.remove_dead_temporaries)
    replace_file(path, json.dumps(data), tmp_name=locked_tmp_name(path), lock=True)


def get_marker(git_dir: Path, name: str) -> dict | None:
    try:
        data = json.loads(marker(git_dir, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def clear_marker(git_dir: Path, name: str) -> None:
    """The work is over: its marker goes, through the door (a regular file of a marker's name in the nerve dir)."""
    destroy.remove_own_file(marker(git_dir, name), within=git_dir / "nerve", kind="repair-marker")


def removal_interrupted(wt: Path, common: Path | None = None) -> bool:
    """True when ``wt`` is what a killed removal of ours left (its archive was made first)."""
    admin = _admin_dir_of(wt, common)
    return admin is not None and marker(admin, "removing").exists()


def _admin_dir_of(wt: Path, common: Path | None = None) -> Path | None:
    """The admin dir of worktree ``wt``: the one its ``.git`` file points at, readable even when the worktree is
    half deleted; when a killed ``git worktree remove`` already deleted that file, the one under ``common``'s
    ``worktrees/`` whose ``gitdir`` names ``wt``."""
    dotgit = wt / ".git"
    try:
        text = dotgit.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return _admin_dir_naming(wt, common) if common is not None and not dotgit.exists() else None
    if not text.startswith("gitdir:"):
        return None
    path = Path(text[len("gitdir:"):].strip())
    if not path.is_absolute():
        path = (wt / path).resolve()
    return path if path.is_dir() else None


def _admin_dir_naming(wt: Path, common: Path) -> Path | None:
    want = os.path.realpath(wt)
    try:
        admins = list((common / "worktrees").iterdir())
    except OSError:
        return None
    for admin in admins:
        try:
            named = destroy.worktree_of_gitdir(admin)  # verified; a relative one against the admin dir
        except destroy.Refused:
            continue
        if os.path.realpath(named) == want:
            return admin
    return None


def remove_worktree(cwd: Path, wt: Path, *, force: bool, scope, task: str, common: Path | None = None) -> None:
    """``git worktree remove`` through the door, marked first so that a rerun after a kill resumes it (a
    removal killed after git deleted the worktree's ``.git`` file is finished by git itself, the file
    written back from the admin dir that names it)."""
    admin = _admin_dir_of(wt, common)
    resume = admin is not None and marker(admin, "removing").exists()
    if admin is not None and not resume:
        set_marker(admin, "removing", {"pid": os.getpid(), "at": time.time()})
    from .. import faults

    faults.point("cleanup.before-remove")  # marked, git not started
    # git refuses a plain removal of a worktree with initialised submodules; the callers have checked
    # there is nothing unsaved in it (or its submodules) first, or were told --force
    submodules = admin is not None and (admin / "modules").is_dir()
    try:
        destroy.remove_worktree(cwd, wt, scope, task=task, force=force or resume or submodules,
                                admin=admin if resume else None)
    except Exception:
        if admin is not None and not resume:
            clear_marker(admin, "removing")
        raise
    if resume:
        say(f"finished removing the worktree {wt} (its removal was interrupted)")


def undo_partial_reset(wt: Path, git_dir: Path, name: str = "done-reset") -> str | None:
    """After a kill inside a checkout move OLD -> NEW (done's ``git reset --keep``, merge's ``git merge
    --ff-only`` of the integration checkout; ``name`` is the marker set before it): put back, as at OLD,
    the files it wrote. Only files whose content is exactly NEW's are touched, so nothing of a person's is lost.

    Returns a line saying what was repaired, or None when there was nothing to do.
    """
    m = get_marker(git_dir, name)
    if m is None:
        return None
    old, new = m.get("from"), m.get("to")
    head = refs.verify(wt, "HEAD")
    line = None
    if old and new and head == old:
        changed = objectdb.diff_name_only(wt, old, new)
        restored = []
        for rel in changed:
            path = wt / rel
            now = _blob_of_file(wt, path)
            at_new, at_old = _blob_at(wt, new, rel), _blob_at(wt, old, rel)
            if now is not None and now != at_old and now != at_new and _cut_off(wt, path, at_new):
                now = at_new  # git was stopped (killed, or the disk filled) while writing NEW's content
            if now is None or now == at_old or now != at_new:
                if now is None and at_old is not None and at_new is None:
                    restored.append(rel)  # the killed reset deleted it
                    checkout.checkout_paths(wt, old, [rel])
                continue
            if at_old is None:
                # our killed reset created it (absent at OLD, NEW's content): the marker is the record
                kept = destroy.keep_or_remove(path, within=wt, kind="reset-added",
                                              record={"file": os.fspath(path), "created_file": True})
                if kept:  # no longer a regular file of ours (replaced meanwhile): kept, and said
                    print(_kept_line(kept), file=sys.stderr, flush=True)
                    continue
                restored.append(rel)
            else:
                restored.append(rel)
                checkout.checkout_paths(wt, old, [rel])
        # the index was never written (its lock died with git), but make it HEAD's for the paths touched
        if restored:
            checkout.reset_paths(wt, old, restored)
            what = "reset" if name == "done-reset" else "fast-forward"
            line = f"undid the interrupted {what} of {wt} ({len(restored)} file(s) put back)"
    clear_marker(git_dir, name)
    return line


def _blob_at(wt: Path, rev: str, rel: str) -> str | None:
    return refs.verify(wt, f"{rev}:{rel}")


def _cut_off(wt: Path, path: Path, blob: str | None) -> bool:
    """True when ``path`` holds the start of ``blob``'s content (nothing else): what git leaves when it is
    stopped half-way through writing the file."""
    if blob is None:
        return False
    try:
        have = path.read_bytes()
    except OSError:
        return False
    full = objectdb.cat_blob(wt, blob)
    return len(have) < len(full) and full.startswith(have)


def _blob_of_file(wt: Path, path: Path) -> str | None:
    if not path.is_file() or path.is_symlink():
        return None
    return objectdb.hash_object_no_filters(wt, path)


def abort_killed_rebase(wt: Path, git_dir: Path, branch: str) -> str | None:
    """A ``git rebase`` that done started and that was killed before it stopped on a conflict: undo it.

    Only ours (the ``done-rebase`` marker) and only before its stop is complete (no conflicted file, or no
    ``rebase-merge/message`` yet): a rebase the agent started, or one stopped on a conflict, is the agent's to finish. Call after
    :func:`clean_git_leftovers` (which removes a dead ``git-rebase-todo.lock``).
    """
    m = get_marker(git_dir, "done-rebase")
    if m is None or worktrees.operation_in_progress(git_dir) != "rebase":
        if m is not None and worktrees.operation_in_progress(git_dir) is None:
            clear_marker(git_dir, "done-rebase")
        return None
    # stopped on a conflict: from now on the agent's rebase, once git wrote all of its stop (the commit message
    # `git rebase --continue` reads is its last file); killed between the conflict and that file, it is redone
    if worktrees.conflicted_files(wt) and (git_dir / "rebase-merge" / "message").is_file():
        clear_marker(git_dir, "done-rebase")
        return None
    if not checkout.rebase_abort(wt):
        # killed before git wrote its state: drop the state, go back to the branch as it was
        checkout.rebase_quit(wt)
        tip = m.get("tip")
        refs.set_symbolic(wt, "HEAD", f"refs/heads/{branch}")
        if tip:
            checkout.reset_hard(wt, f"refs/heads/{branch}")
    clear_marker(git_dir, "done-rebase")
    return f"undid the rebase in {wt} that an interrupted `git worker done` had started (killed before it had stopped on a conflict)"


__all__ = ["abort_killed_rebase", "clean_git_leftovers", "clear_marker", "get_marker", "kept_lock_line", "marker",
           "removal_interrupted", "remove_worktree", "say", "set_marker", "stale_git_locks", "undo_partial_reset"]
