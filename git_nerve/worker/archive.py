"""Archive everything a task holds before its worktree or branch is removed.

``refs/nerve/archive/<task-id>`` must reach every commit and every
uncommitted change of the task, whatever state it was left in:

* the branch's tip, and the worktree's HEAD when it is elsewhere (a stopped
  rebase, a detached HEAD);
* when the branch is gone (deleted by hand): the commits the worktree's HEAD
  pointed at (its reflog, ``<worktree-git-dir>/logs/HEAD``) and those the bus
  recorded (``commit``, ``review_request``, ``rewrite`` and ``merged``
  messages);
* the worktree's index and files (untracked ones too), as a snapshot commit;
* an earlier archive of the same task.

One commit ties them together (a "nerve snapshot" whose first parent is the
branch's tip, which ``retry`` restores); only commits the integration branch
does not already contain are added as parents. If the archive cannot be
made, :class:`GitError` is raised before anything is removed.
"""

from __future__ import annotations

from pathlib import Path

from ..bus import messages
from ..errors import GitError
from ..git import cli, refs, worktrees

#: bus messages whose payload names commits of the task's own work
_TIP_KINDS = ("commit", "review_request", "rewrite", "merged")


def branch_gone(repo, w) -> bool:
    """True when the task's branch no longer exists though the task still needs it."""
    return not refs.exists(repo.cwd, f"refs/heads/{w.branch}")


def last_known_tip(repo, w) -> str | None:
    """The newest commit of the task that still exists: its worktree's HEAD reflog, then the bus."""
    tips = known_tips(repo, w)
    return tips[0] if tips else None


def branch_gone_error(repo, w, verb: str) -> GitError:
    """The message for a task whose branch was deleted by hand (not "uncommitted changes (every file)")."""
    tip = last_known_tip(repo, w)
    restore = (f"restore it with `git branch {w.branch} {tip[:12]}` (its last known tip), then {verb} again"
               if tip else "no commit of it is known")
    return GitError(
        f"the branch {w.branch} of {w.task_id} is gone (deleted by hand?); {restore}"
        + ("; or `git worker cancel --cleanup --force` archives what its worktree holds under "
           f"{refs.archive_name(w.task_id)} before removing it" if verb != "cancel --cleanup" else
           f"; or pass --force to archive what its worktree holds under {refs.archive_name(w.task_id)} and remove it")
    )


def known_tips(repo, w) -> list[str]:
    """Commits of the task that exist, newest first, without repeats: the worktree's HEAD, the
    branch, the worktree's HEAD reflog, the bus's records, the previous archive."""
    cwd = repo.cwd
    wt = Path(w.worktree)
    candidates: list[str] = []
    if wt.is_dir():
        head = refs.resolve(wt, "HEAD")
        if head:
            candidates.append(head)
    branch = refs.resolve(cwd, f"refs/heads/{w.branch}")
    if branch:
        candidates.append(branch)
    candidates += _reflog_tips(wt)
    bus_tips, rewritten = _bus_tips(repo, w)
    candidates += bus_tips
    previous = refs.resolve(cwd, refs.archive_name(w.task_id))
    if previous:
        candidates.append(previous)
    seen: list[str] = []
    for sha in candidates:
        # a commit a rebase or an amend replaced is not work of its own: its copy is kept instead
        if sha and sha not in seen and sha != refs.ZERO and sha not in rewritten:
            seen.append(sha)
    return _existing_commits(cwd, seen)


def _reflog_tips(wt: Path) -> list[str]:
    """The commits a worktree's HEAD pointed at, newest first, read from its reflog file (git's own
    ``git reflog`` needs a HEAD that resolves, which a deleted branch no longer does)."""
    if not wt.is_dir():
        return []
    try:
        log = worktrees.git_dir_of(wt) / "logs" / "HEAD"
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, GitError):
        return []
    tips: list[str] = []
    for line in reversed(lines):
        parts = line.split(" ", 2)
        if len(parts) >= 2:
            tips.append(parts[1])
    return tips


def _bus_tips(repo, w) -> tuple[list[str], set[str]]:
    """The commits the bus recorded for the task (newest first), and those a rewrite replaced."""
    tips: list[str] = []
    rewritten: set[str] = set()
    for m in reversed(messages.for_task(repo.bus.conn, w.task_id, kinds=_TIP_KINDS)):
        p = m.payload
        if m.kind == "rewrite":
            pairs = [pair for pair in p.get("pairs") or [] if isinstance(pair, (list, tuple)) and len(pair) == 2]
            tips += [str(new) for _, new in reversed(pairs)]
            rewritten |= {str(old) for old, _ in pairs}
        else:
            for key in ("sha", "tip"):
                if isinstance(p.get(key), str):
                    tips.append(p[key])
    return tips, rewritten


def _existing_commits(cwd, shas: list[str]) -> list[str]:
    if not shas:
        return []
    proc = cli.run(["cat-file", "--batch-check=%(objectname) %(objecttype)"], cwd=cwd,
                   input="".join(f"{s}\n" for s in shas), check=False)
    found = {ln.split()[0] for ln in proc.stdout.splitlines() if ln.endswith(" commit")}
    return [s for s in shas if s in found]


def _not_contained(cwd, tips: list[str], contained_in: list[str]) -> list[str]:
    """The tips no ref in ``contained_in`` reaches, reduced to the independent ones."""
    if not tips:
        return []
    out = cli.out(["rev-list", *tips, "--not", *contained_in, "--"], cwd=cwd) if contained_in else cli.out(
        ["rev-list", *tips, "--"], cwd=cwd)
    reachable_only_here = set(out.split())
    loose = [t for t in tips if t in reachable_only_here]
    if len(loose) > 1:
        loose_set = set(cli.out(["merge-base", "--independent", *loose], cwd=cwd).split())
        loose = [t for t in loose if t in loose_set]
    return loose


def archive(repo, w, *, force: bool) -> str | None:
    """Make ``refs/nerve/archive/<task>`` reach everything the task holds; its name, or None when the
    task holds nothing at all. GitError (nothing removed by the caller) when that cannot be done."""
    try:
        return _archive(repo, w, force=force)
    except GitError as exc:
        raise GitError(f"could not archive {w.task_id} ({exc.message}); nothing was removed") from exc


def _archive(repo, w, *, force: bool) -> str | None:
    cwd = repo.cwd
    wt = Path(w.worktree)
    branch_tip = refs.resolve(cwd, f"refs/heads/{w.branch}")
    head = refs.resolve(wt, "HEAD") if wt.is_dir() else None
    dirty: list[str] = []
    if wt.is_dir():
        if branch_tip is None and not force:
            raise branch_gone_error(repo, w, "cancel --cleanup")
        dirty = worktrees.dirty_files(wt)
        if dirty and head is not None and not force:
            raise GitError(
                f"the worktree {wt} has uncommitted changes ({', '.join(dirty[:5])}); "
                "commit them, or pass --force to archive them and remove the worktree"
            )
    previous = refs.resolve(cwd, refs.archive_name(w.task_id))
    remote = repo.settings.remote
    pushed = refs.resolve(cwd, f"refs/remotes/{remote}/{w.branch}") if remote else None
    if branch_tip is not None:
        # the branch is there: its tip, the worktree's HEAD and files, its copy on the remote
        # (deleted too with --delete-branch), and an earlier archive
        tips = [t for t in (head, branch_tip, pushed, previous) if t]
    else:
        # the branch is gone: everything the worktree's reflog and the bus still know
        tips = known_tips(repo, w) + ([pushed] if pushed else [])
    main = branch_tip or head or (tips[0] if tips else None)
    # what must stay reachable besides `main`: other tips the integration branch does not contain
    # (a branch deleted by hand, a detached HEAD, a previous archive); the integration branch itself
    # holds what was merged
    integration = [r for r in (f"refs/heads/{w.integration}",
                               f"refs/remotes/{repo.settings.remote}/{w.integration}" if repo.settings.remote else None)
                   if r and refs.exists(cwd, r)]
    others = [t for t in tips if t != main]
    extras = _not_contained(cwd, others, [*( [main] if main else []), *integration])
    snapshot_needed = bool(wt.is_dir() and (dirty or (head is None and main is not None) or extras
                                            or (head and head != main)))
    if not snapshot_needed and main is None and not wt.is_dir():
        return None
    if snapshot_needed or (wt.is_dir() and main is None):
        parents = [p for p in [main, head, *extras] if p]
        parents = list(dict.fromkeys(parents))
        why = ("branch gone" if branch_tip is None else "worktree off its branch" if head and head != main
               else "uncommitted work")
        archived = _snapshot(wt, parents, f"nerve snapshot of {w.task_id}: {why} at removal")
    elif extras:
        archived = cli.out(["commit-tree", f"{main}^{{tree}}", *[a for p in [main, *extras] for a in ("-p", p)],
                            "-m", f"nerve snapshot of {w.task_id}: earlier tips at removal"], cwd=cwd)
    else:
        archived = main
    if archived is None:
        return None
    ref = refs.archive_name(w.task_id)
    cli.run(["update-ref", "-m", f"nerve: archive {w.task_id}", ref, archived], cwd=cwd)
    # git is the ground truth: every tip must now be reachable from the archive
    for must in [p for p in [main, head, *extras] if p]:
        if not refs.is_ancestor(cwd, must, ref):
            raise GitError(f"{must[:12]} is not reachable from {ref} after archiving")
    return ref


def keep_uncommitted(cwd, wt: Path, task_id: str, why: str) -> tuple[str, str, list[str]] | None:
    """Uncommitted work in ``wt`` (untracked files too) kept under ``refs/nerve/archive/<task>`` without
    touching the worktree: (ref, snapshot sha, files), or None when the worktree is clean.

    The snapshot's first parent is the worktree's HEAD and, when an archive existed, the previous
    archive is its second parent: nothing archived earlier becomes unreachable.
    """
    wt = Path(wt)
    if not wt.is_dir():
        return None
    dirty = worktrees.dirty_files(wt)
    if not dirty:
        return None
    head = refs.resolve(wt, "HEAD")
    ref = refs.archive_name(task_id)
    previous = refs.resolve(cwd, ref)
    parents = list(dict.fromkeys(p for p in (head, previous) if p))
    sha = _snapshot(wt, parents, f"nerve snapshot of {task_id}: {why}")
    cli.run(["update-ref", "-m", f"nerve: archive {task_id} ({why})", ref, sha], cwd=cwd)
    if refs.resolve(cwd, ref) != sha:  # git is the ground truth
        raise GitError(f"{ref} does not point at the snapshot {sha[:12]} after archiving")
    return ref, sha, dirty


def _snapshot(wt: Path, parents: list[str], message: str) -> str:
    """The worktree's files (index and untracked) as a commit on ``parents`` (none: a root commit)."""
    if parents:
        return worktrees.snapshot(wt, parents[0], message, parents=parents)
    import os

    tmp_index = worktrees.git_dir_of(wt) / "nerve" / f"snapshot-{os.getpid()}.index"
    tmp_index.parent.mkdir(parents=True, exist_ok=True)
    env = cli.clean_env({"GIT_INDEX_FILE": os.fspath(tmp_index)})
    try:
        cli.run(["add", "-A", "--", "."], cwd=wt, env=env)
        tree = cli.out(["write-tree"], cwd=wt, env=env)
        return cli.out(["commit-tree", tree, "-m", message], cwd=wt, env=env)
    finally:
        tmp_index.unlink(missing_ok=True)


__all__ = ["archive", "branch_gone", "branch_gone_error", "keep_uncommitted", "known_tips", "last_known_tip"]
