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
from ..git import history, ident, objectdb, refs, worktrees

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
    found = objectdb.existing_commits(cwd, shas)
    return [s for s in shas if s in found]


def _not_contained(cwd, tips: list[str], contained_in: list[str]) -> list[str]:
    """The tips no ref in ``contained_in`` reaches, reduced to the independent ones."""
    if not tips:
        return []
    reachable_only_here = set(history.rev_list(cwd, tips, excluding=contained_in))
    loose = [t for t in tips if t in reachable_only_here]
    if len(loose) > 1:
        loose_set = set(history.merge_base_independent(cwd, loose))
        loose = [t for t in loose if t in loose_set]
    return loose


#: how often an archive is rebuilt when another archiver moved the ref meanwhile
_CAS_ATTEMPTS = 8


def task_began(repo, w) -> float:
    """When the task began (its first message, or its row's assignment), in epoch seconds, a little early:
    git's reflog times are whole seconds."""
    first = messages.for_task(repo.bus.conn, w.task_id)
    times = [t for t in (first[0].ts if first else None, w.assigned_at) if t]
    return (min(times) - 2) if times else 0


def recorded_commits(repo, w) -> list[str]:
    """Every commit the task is known to have made or pointed at (that still exists), newest first: the
    worktree's HEAD, the branch and its remote copy, their reflogs since the task began, every commit the
    bus recorded (those a rewrite replaced too), the previous archive."""
    cwd = repo.cwd
    wt = Path(w.worktree)
    since = task_began(repo, w)
    remote = repo.settings.remote
    candidates: list[str | None] = [refs.resolve(wt, "HEAD") if wt.is_dir() else None,
                                    refs.resolve(cwd, f"refs/heads/{w.branch}")]
    if remote:
        candidates.append(refs.resolve(cwd, f"refs/remotes/{remote}/{w.branch}"))
    if wt.is_dir():
        try:
            candidates += refs.reflog_commits(worktrees.git_dir_of(wt), "HEAD", since=since)
        except GitError:
            pass
    common = repo.paths.common_dir
    candidates += refs.reflog_commits(common, f"refs/heads/{w.branch}", since=since)
    if remote:
        candidates += refs.reflog_commits(common, f"refs/remotes/{remote}/{w.branch}", since=since)
    bus_tips, rewritten = _bus_tips(repo, w)
    candidates += bus_tips + sorted(rewritten)
    candidates.append(refs.resolve(cwd, refs.archive_name(w.task_id)))
    seen = list(dict.fromkeys(c for c in candidates if c and c != refs.ZERO))
    return _existing_commits(cwd, seen)


def archive(repo, w, *, force: bool, kept: list[str] | None = None) -> str | None:
    """Make ``refs/nerve/archive/<task>`` reach everything the task holds; its name, or None when the
    task holds nothing at all. GitError (nothing removed by the caller) when that cannot be done.

    Commits of the worktree's submodules that no remote holds are kept first in each submodule's own
    repository (:func:`keep_submodule_work`); the refs written there are appended to ``kept``."""
    try:
        written = keep_submodule_work(repo, w)
        if kept is not None:
            kept += written
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
    ref = refs.archive_name(w.task_id)
    # the integration branch itself holds what was merged (the merge commit the bus records, too)
    integration = [r for r in (f"refs/heads/{w.integration}",
                               f"refs/remotes/{repo.settings.remote}/{w.integration}" if repo.settings.remote else None)
                   if r and refs.exists(cwd, r)]
    must: list[str] = []
    for _attempt in range(_CAS_ATTEMPTS):
        # compare-and-set: built on the archive read here, published only if nobody moved it meanwhile
        # (another archiver's snapshot then becomes a parent of ours on the next round)
        previous = refs.resolve(cwd, ref)
        recorded = recorded_commits(repo, w)
        if previous and previous not in recorded:
            recorded.append(previous)
        main = branch_tip or head or (known_tips(repo, w) or recorded or [None])[0]
        must = list(dict.fromkeys(p for p in [main, head, *recorded] if p))
        extras = _not_contained(cwd, [t for t in must if t != main], [*([main] if main else []), *integration])
        if main is None and not wt.is_dir():
            return None
        if wt.is_dir() and (dirty or head is None or head != main):
            parents = list(dict.fromkeys(p for p in [main, head, *extras] if p))
            why = ("branch gone" if branch_tip is None else "worktree off its branch" if head and head != main
                   else "uncommitted work")
            archived = _snapshot(wt, parents, f"nerve snapshot of {w.task_id}: {why} at removal")
        elif previous and _first_parent_if_snapshot(cwd, previous) == main and not _not_contained(
                cwd, must, [previous, *integration]):
            archived = previous  # it already keeps everything: nothing new to write
        elif extras:
            archived = ident.commit_tree([f"{main}^{{tree}}", *[a for p in [main, *extras] for a in ("-p", p)],
                                          "-m", f"nerve snapshot of {w.task_id}: earlier tips at removal"], cwd=cwd)
        else:
            archived = main
        if archived is None:
            return None
        if archived == previous or refs.update(cwd, ref, archived, previous, f"nerve: archive {w.task_id}"):
            break
    else:
        raise GitError(f"{ref} kept moving while it was written ({_CAS_ATTEMPTS} attempts)")
    # git is the ground truth: every commit of the task must now be reachable from the archive
    lost = _not_contained(cwd, must, [ref, *integration])
    if lost:
        raise GitError(f"{lost[0][:12]} is not reachable from {ref} after archiving")
    return ref


def keep_commits(repo, w, shas: list[str], why: str) -> str:
    """Make ``refs/nerve/archive/<task>`` reach ``shas`` too (commits someone pushed onto the task's branch on the
    remote, before git-nerve overwrites them or keeps that branch without deleting it), by compare-and-set: a
    "nerve snapshot" whose first parent is the branch tip the archive keeps (what ``retry`` restores), then the
    previous archive and ``shas``. Its name; GitError when it cannot be made."""
    cwd = repo.cwd
    ref = refs.archive_name(w.task_id)
    for _attempt in range(_CAS_ATTEMPTS):
        previous = refs.resolve(cwd, ref)
        if previous and not _not_contained(cwd, shas, [previous]):
            break  # already kept
        base = (_first_parent_if_snapshot(cwd, previous) if previous else None) or refs.resolve(
            cwd, f"refs/heads/{w.branch}") or shas[0]
        parents = list(dict.fromkeys(p for p in [base, previous, *shas] if p))
        sha = ident.commit_tree([f"{base}^{{tree}}", *[a for p in parents for a in ("-p", p)],
                                 "-m", f"nerve snapshot of {w.task_id}: {why}"], cwd=cwd)
        if refs.update(cwd, ref, sha, previous, f"nerve: archive {w.task_id} ({why})"):
            break
    else:
        raise GitError(f"{ref} kept moving while it was written ({_CAS_ATTEMPTS} attempts)")
    lost = _not_contained(cwd, shas, [ref])  # git is the ground truth
    if lost:
        raise GitError(f"{lost[0][:12]} is not reachable from {ref} after archiving")
    return ref


def _first_parent_if_snapshot(cwd, sha: str) -> str:
    """The branch tip an archive keeps: a nerve snapshot's first parent, or the commit itself."""
    parents, subject = history.parents_and_subject(cwd, sha)
    return parents[0] if subject.startswith("nerve snapshot") and parents else sha


# -- submodules ------------------------------------------------------------------------------------
#
# A linked worktree's submodules keep their git dirs in the worktree's admin dir
# (``<common>/worktrees/<id>/modules/<name>``), which the removal deletes. Their commits on no remote are
# kept in the same submodule's repository of the main checkout (``<common>/modules/<name>``), under
# ``refs/nerve/archive/<task>/<sha>``: a commit stays with its own project's objects, the gitlink in the
# task's archived tree resolves there (``git submodule update`` of the archive finds it), and the
# superproject's history is not mixed with another project's. When the main checkout has no such
# repository (the submodule was never initialised there) nothing is removed and the command says how
# to make one.


def _submodule_plan(repo, w) -> list[tuple[str, Path, Path | None, list[str]]]:
    """(path, its checkout, the repository to keep its work in or None, the commits to keep) for each
    submodule of the task's worktree whose removal would lose commits or uncommitted changes."""
    wt = Path(w.worktree)
    if not wt.is_dir():
        return []
    subs = worktrees.submodule_git_dirs(wt)
    if not subs:
        return []
    admin = worktrees.git_dir_of(wt).resolve()
    common = Path(repo.paths.common_dir).resolve()
    since = task_began(repo, w)
    plan = []
    for rel, git_dir in subs:
        git_dir = git_dir.resolve()
        checkout = wt / rel
        if git_dir.is_relative_to(admin):
            home: Path | None = common / git_dir.relative_to(admin)
        elif git_dir.is_relative_to(wt.resolve()):
            home = None  # a .git directory inside the checkout: deleted with it, no repository to keep it in
        else:
            continue  # its git dir lives elsewhere and survives the removal
        head = refs.resolve(checkout, "HEAD")
        tips = [head, *worktrees.local_branch_tips(checkout), *refs.reflog_commits(git_dir, "HEAD", since=since)]
        if worktrees.dirty_files(checkout):
            tips.insert(0, worktrees.snapshot(checkout, head, f"nerve snapshot of {w.task_id}: uncommitted work "
                                              f"in submodule {rel} at removal") if head else None)
        keep = worktrees.unpushed_commits(checkout, [t for t in tips if t])
        if keep:
            plan.append((rel, checkout, home if home is not None and (home / "HEAD").is_file() else None, keep))
    return plan


def refuse_homeless_submodules(repo, w) -> None:
    """GitError when a submodule of the task's worktree holds work no remote has and nowhere to keep it."""
    _refuse_homeless(_submodule_plan(repo, w))


def _refuse_homeless(plan) -> None:
    homeless = [rel for rel, _, home, _ in plan if home is None]
    if homeless:
        raise GitError(
            f"submodule {homeless[0]} holds work no remote has and the main checkout has no repository for it; "
            f"push it, or run `git submodule update --init {homeless[0]}` in the main checkout so it can be kept there"
        )


def keep_submodule_work(repo, w) -> list[str]:
    """Keep what the worktree's submodules hold that no remote has (see above): the refs written, each as
    ``<submodule path>: <ref>``. GitError, before anything is written, when a submodule has nowhere to keep it."""
    plan = _submodule_plan(repo, w)
    _refuse_homeless(plan)
    written = []
    for rel, checkout, home, keep in plan:
        for ref in worktrees.keep_in_repository(checkout, home, keep, refs.archive_name(w.task_id)):
            written.append(f"{rel}: {ref}")
    return written


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
    for _attempt in range(_CAS_ATTEMPTS):
        previous = refs.resolve(cwd, ref)
        parents = list(dict.fromkeys(p for p in (head, previous) if p))
        sha = _snapshot(wt, parents, f"nerve snapshot of {task_id}: {why}")
        # compare-and-set: a snapshot another archiver wrote meanwhile becomes our parent on the next round
        if refs.update(cwd, ref, sha, previous, f"nerve: archive {task_id} ({why})"):
            break
    else:
        raise GitError(f"{ref} kept moving while it was written ({_CAS_ATTEMPTS} attempts)")
    if refs.resolve(cwd, ref) != sha and not refs.is_ancestor(cwd, sha, ref):  # git is the ground truth
        raise GitError(f"{ref} does not reach the snapshot {sha[:12]} after archiving")
    return ref, sha, dirty


def _snapshot(wt: Path, parents: list[str], message: str) -> str:
    """The worktree's files (index and untracked) as a commit on ``parents`` (none: a root commit)."""
    return worktrees.snapshot(wt, parents[0] if parents else None, message, parents=parents)


__all__ = ["archive", "branch_gone", "branch_gone_error", "keep_commits", "keep_submodule_work", "refuse_homeless_submodules", "keep_uncommitted", "known_tips",
           "last_known_tip", "recorded_commits"]
