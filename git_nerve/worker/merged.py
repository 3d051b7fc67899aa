"""What happened on the remote: a merge whose push landed but was never recorded.

``merge`` pushes first and records COMPLETED last; killed in between, the
task stays APPROVED although its work is on the remote's integration branch.
Every later command that could act on it (cancel, request-changes, merge,
status) first asks :func:`reconcile`: when the remote's integration branch
holds a merge commit whose parents include the task's tip, the merge is
recorded (APPROVED -> COMPLETED, a ``merged`` message marked ``recovered``)
and the command then sees a COMPLETED task.

"Merged" needs a merge commit with the tip as a parent, not merely the tip
being reachable: an approved task with no commits of its own has its tip on
the integration branch from the start.
"""

from __future__ import annotations

from ..bus import messages, workers
from ..git import history, refs
from ..locks import LockTimeout, hold
from .locking import fetch_branches, task_lock
from .states import State
from .transitions import get, transition


def merge_commit_on(cwd, tip: str, integration_ref: str) -> str | None:
    """The merge commit on ``integration_ref``'s first-parent line that has ``tip`` as a (non-first) parent."""
    if not refs.is_ancestor(cwd, tip, integration_ref):
        return None
    for parts in history.first_parent_merges(cwd, tip, integration_ref):
        if tip in parts[2:]:
            return parts[0]
    return None


def published_merge(repo, w, *, fetch: bool) -> tuple[str, str, str] | None:
    """(merge commit, ref, task tip) when the task's tip was merged into its integration branch on the remote."""
    remote = repo.settings.remote
    if not remote:
        return None  # without a remote, merge moves the local branch and records in one go
    cwd = repo.cwd
    tip = refs.resolve(cwd, f"refs/heads/{w.branch}") or refs.resolve(cwd, refs.archive_name(w.task_id))
    if tip is None:
        return None
    if fetch:
        try:
            fetch_branches(repo, remote, [w.integration])
        except Exception:  # an unreachable remote: decide from what was last fetched
            pass
    ref = f"refs/remotes/{remote}/{w.integration}"
    if not refs.exists(cwd, ref):
        return None
    commit = merge_commit_on(cwd, tip, ref)
    return (commit, ref, tip) if commit else None


def reconcile(repo, task_id: str, *, fetch: bool = True, lock: str = "wait") -> workers.Worker:
    """The task's row, after recording a merge that reached the remote unrecorded (APPROVED -> COMPLETED).

    The record is made under the task's lock, which a merge holds while it
    publishes: ``lock="wait"`` waits for it, ``"nowait"`` skips the record
    when it is taken, ``"held"`` means the caller holds it already.
    """
    w = get(repo.bus, task_id)
    if w.state != State.APPROVED.value:
        return w
    found = published_merge(repo, w, fetch=fetch)
    if found is None:
        return w
    commit, ref, tip = found

    def record() -> workers.Worker:
        return transition(
            repo.bus, task_id, State.COMPLETED, allowed_from=[State.APPROVED], already=[State.COMPLETED],
            verb="record the merge of",
            extra_messages=[("merged", {"commit": commit, "into": w.integration, "tip": tip, "pushed": True,
                                        "recovered": f"found on {ref}"})],
        ).worker

    if lock == "held":
        return record()
    try:
        with hold(task_lock(repo, w), timeout=None if lock == "wait" else 0, what=f"the lock of {task_id}"):
            return record()
    except LockTimeout:
        return w


def reconcile_all(repo) -> list[str]:
    """Record every APPROVED task already merged on the remote (no fetch, no waiting: for `status`)."""
    if not repo.settings.remote:
        return []
    approved = workers.all_workers(repo.bus.conn, states=(State.APPROVED.value,))
    if not approved:
        return []
    from . import reconciled

    seen = reconciled.Seen(repo)  # what an earlier look found not merged, with the tips it looked at
    done = []
    for w in approved:
        if seen.unchanged(w):
            continue  # neither its tip nor the remote's integration branch moved since: still not merged
        if reconcile(repo, w.task_id, fetch=False, lock="nowait").state == State.COMPLETED.value:
            done.append(w.task_id)
        else:
            seen.not_merged(w)
    seen.save()
    return done


def merged_note(repo, task_id: str) -> str:
    """ "(its merge is on origin/main as <sha>)" for a task recorded COMPLETED by :func:`reconcile`."""
    for m in reversed(messages.for_task(repo.bus.conn, task_id, kinds=("merged",))):
        return f" (merged into {m.payload.get('into')} as {str(m.payload.get('commit'))[:12]})"
    return ""


__all__ = ["merge_commit_on", "published_merge", "reconcile", "reconcile_all", "merged_note"]


# -- a commit the integration branch dropped ----------------------------------------------------------------


def _old_integration_tips(repo, w, ref: str) -> list[str]:
    """Where the integration branch has been: its reflog here, and the bases the bus recorded for the task."""
    cwd = repo.cwd
    tips = refs.reflog_shas(cwd, ref)
    for m in messages.for_task(repo.bus.conn, w.task_id, kinds=("task_assign", "review_request", "rebase_conflict")):
        if m.kind == "task_assign" and m.payload.get("base") != ref:
            continue  # spawned --from another branch: that base was never the integration branch
        for key in ("base_sha", "onto"):
            value = m.payload.get(key)
            if isinstance(value, str) and len(value) == 40:
                tips.append(value)
    known = [t for t in dict.fromkeys(tips) if refs.resolve(cwd, t)]
    return known


def dropped_commits(repo, w, tip: str, ours: str, ref: str) -> list[str]:
    """Commits a merge of ``tip`` into ``ours`` would publish that ``ref`` once held and no longer does
    (the integration branch was force-pushed backwards, e.g. to remove a leaked secret): oldest first.
    The task's own commits were never on the integration branch, so they are never among them."""
    cwd = repo.cwd
    olds = _old_integration_tips(repo, w, ref)
    if not olds:
        return []
    gone = set(history.rev_list(cwd, olds, excluding=[ours]))
    if not gone:
        return []
    brought = history.rev_list(cwd, [tip], excluding=[ours], reverse=True)
    return [c for c in brought if c in gone]


def refuse_dropped(repo, w, tip: str, ours: str, ref: str, *, verb: str = "merge") -> None:
    """GitError naming the commits the integration branch dropped that merging ``tip`` would bring back."""
    from ..errors import GitError

    dropped = dropped_commits(repo, w, tip, ours, ref)
    if not dropped:
        return
    shown = [f"{c[:12]} {refs.commit_subject(repo.cwd, c)}" for c in dropped[:5]]
    more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    last = dropped[-1]
    short = ref.removeprefix("refs/remotes/").removeprefix("refs/heads/")
    raise GitError(
        f"{'merging' if verb == 'merge' else 'rebasing'} {w.task_id} would publish again {len(dropped)} commit(s) "
        f"that {short} no longer contains (it was rewound): {'; '.join(shown)}{more}; nothing was "
        f"{'merged' if verb == 'merge' else 'moved'}",
        details=["To drop them from the task, keeping only its own commits:",
                 *([f"  1. git worker request-changes {w.task_id}"] if verb == "merge" else []),
                 f"  {2 if verb == 'merge' else 1}. in {w.worktree}: git rebase --onto {short} {last[:12]}",
                 f"  {3 if verb == 'merge' else 2}. git worker done" + (", then approve and merge again" if verb == "merge" else "")],
    )
