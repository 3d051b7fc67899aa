"""`merge` of a task another machine holds (shared mode, issue 29; the git remote: issue 36).

The task's branch is on the remote (its `done` pushed it); what it is called, the tip that was reviewed and its
description come from the holder's published events (the cache; a sync first when they have not arrived). The
claim row is held locked (:meth:`PostgresState.hold`: ``SELECT ... FOR UPDATE`` with a lock timeout) while this
machine fetches the branch, builds the ``--no-ff`` merge in memory as :mod:`.merging` does, checks it, pushes the
integration branch from a temporary checkout with a lease on the tip it merged onto, and reads the remote back
(git is the ground truth: the merge commit must be on the remote's integration branch); only then does the claim
move APPROVED -> COMPLETED, committed when the hold ends. A lost push changes no claim (merged again on the new
tip); an error before the move changes nothing. Of two machines merging the task at once the second waits on the
row, then finds it COMPLETED and says which machine merged it (exit 8).

On the git remote (:mod:`git_nerve.shared.gitremote_hold`) nothing is locked: the claim is read from the remote,
and its move to COMPLETED rides the merge's ``--atomic`` push, each ref leased on the value read; a racing
machine's push is refused whole, it reads the claim again and exits 8 naming the machine that merged it. A rerun
after this machine's merge landed with its answer lost finds the claim saying so and pushes nothing again.

A conflict moves the claim APPROVED -> WORKING (verb merge). The holder's row follows either move at its next sync
(:mod:`git_nerve.bus.followed`), with this machine's ``merged`` / ``merge_conflict`` message; its worktree goes at
its next `git nerve sync` (:func:`.cleanup.after_merge_elsewhere`: the usual cleanup, archive first).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...bus import messages
from ...bus import shared as cache
from ...errors import ConflictError, GitError, HeldElsewhere, InvalidTransition, UsageError
from ...git import refs, worktrees
from ...locks import hold
from ..locking import fetch_branches
from .advance import _sync_local_integration
from .check import _parse_check, _run_check
from .guards import _remote_refused
from .publish import MergeResult, _gate_refused, _push_from_checkout, after_lost_race, merge_attempts
from .repo import Repo, _require_tip


@dataclass(frozen=True)
class Published:
    """What the holder published of a task: its branch, the tip it asked review for, its description."""

    branch: str
    tip: str | None
    description: str


def merges_elsewhere(repo: Repo) -> bool:
    """Does this repository's shared store merge other machines' tasks here (shared mode)?"""
    from ... import shared

    return shared.for_bus(repo.bus).holds_claims


def merge_elsewhere(repo: Repo, task_id: str, *, check: str | None = None) -> MergeResult:
    """APPROVED -> COMPLETED of a task another machine holds; see the module docstring."""
    from ... import shared

    check_argv = _parse_check(check)
    state = shared.for_bus(repo.bus)
    remote, integration = repo.settings.remote, repo.settings.integration
    if not remote:
        raise UsageError(f"task {task_id} is held by another machine: merging it here needs the shared remote")
    info = _published(repo, state, task_id)
    res = MergeResult(None, into=integration)
    # the claim row first, then the merge lock: the order of every merge in shared mode (merge --all's too)
    with state.hold(repo.bus, task_id, "merge") as held, hold(repo.lock_path("merge"), what="the merge lock"):
        res.holder = held.record.owner if held.record is not None else None
        target_wt = worktrees.find_for_branch(repo.cwd, f"refs/heads/{integration}")
        if _judge(held.record, task_id, state.config.machine):  # this machine's merge, its answer lost: a rerun
            _made_here(repo, info, res)
        else:
            _attempts(repo, held, info, res, check_argv)
    if not res.already or not messages.for_task(repo.bus.conn, task_id, kinds=("merged",)):
        _published_here(repo, task_id, res, info)
    if res.conflicts:
        raise _conflict(task_id, integration, res)
    if res.commit:
        warning = _sync_local_integration(repo, integration, res.commit, target_wt)
        if warning:
            res.warnings.append(warning)
    return res


def _attempts(repo: Repo, held, info: Published, res: MergeResult, check_argv) -> None:
    """Merge attempts until one is published (or met a conflict), each on the integration branch's new tip."""
    attempts = merge_attempts(repo)
    for attempt in range(1, attempts + 1):
        res.attempts = attempt
        if _attempt(repo, held, info, res, check_argv):
            return
        after_lost_race(attempt, attempts)
    raise GitError(f"{res.into} kept moving; gave up after {attempts} attempts (run merge again)")


def _made_here(repo: Repo, info: Published, res: MergeResult) -> None:
    """A rerun after this machine's merge landed with its answer lost: what the remote has, nothing moved."""
    from .. import merged

    remote = repo.settings.remote
    fetch_branches(repo, remote, [res.into, info.branch])
    res.tip = refs.resolve(repo.cwd, f"refs/remotes/{remote}/{info.branch}")
    res.commit = merged.merge_commit_on(repo.cwd, res.tip, f"refs/remotes/{remote}/{res.into}") if res.tip else None
    res.already, res.pushed = True, res.commit is not None


def _judge(rec, task_id: str, machine: str) -> bool:
    """The claim as read allows this machine's merge of another machine's task (else one line, nothing moved);
    True when this machine merged it already (a rerun: the claim says so)."""
    if rec is None:
        raise UsageError(f"unknown task {task_id!r} (see `git worker status`)")
    if rec.state == "COMPLETED" and rec.verb == "merge" and rec.machine == machine and rec.owner != machine:
        return True
    if rec.state == "COMPLETED":
        by = rec.machine if rec.verb == "merge" else rec.owner
        raise HeldElsewhere(f"task {task_id} was merged by machine {by} (held by machine {rec.owner}); "
                            "nothing changed here")
    if rec.owner == machine:
        raise InvalidTransition(f"cannot merge {task_id}: the shared store says this machine holds it, but it has "
                                "no row here (`git nerve sync`, then `git worker status`)")
    if rec.state != "APPROVED":
        raise InvalidTransition(f"cannot merge {task_id}: it is {rec.state} on machine {rec.owner} (merge needs APPROVED)")
    return False


def _published(repo: Repo, state, task_id: str) -> Published:
    """The holder's word on the task from the cache, synced once when it has not arrived yet."""
    found = from_cache(repo, task_id)
    if found is None:
        state.sync(repo.bus)
        found = from_cache(repo, task_id)
    if found is None:
        c = cache.claim(repo.bus.conn, task_id)
        if c is None:
            raise UsageError(f"unknown task {task_id!r} (see `git worker status`)")
        raise HeldElsewhere(f"task {task_id} is held by machine {c.owner}, which has not published its branch yet "
                            "(at its next `git nerve sync`); nothing changed here")
    return found


def from_cache(repo: Repo, task_id: str) -> Published | None:
    """What the holder published of the task, from the cache of the last sync (no sync: the console's diff reads
    it too); None before its ``task_assign`` arrived."""
    branch, tip, description = None, None, ""
    for _id, _machine, _ts, _task, kind, payload in cache.events(repo.bus.conn, task_id):
        if kind == "task_assign" and payload.get("branch"):
            branch, description, tip = str(payload["branch"]), str(payload.get("description") or ""), None
        elif kind == "review_request" and payload.get("sha"):
            tip = str(payload["sha"])
    return Published(branch, tip, description) if branch else None


def _attempt(repo: Repo, held, info: Published, res: MergeResult, check_argv) -> bool:
    """One attempt under the held claim: fetch, merge in memory, check, push, read back, move the claim. False
    when the push lost a race (nothing moved: merge again on the new tip)."""
    from ...git import objects
    from .. import merged

    cwd, remote, integration, task_id = repo.cwd, repo.settings.remote, res.into, held.task_id
    fetch_branches(repo, remote, [integration, info.branch])
    target_ref = f"refs/remotes/{remote}/{integration}"
    ours = _require_tip(cwd, target_ref, "integration branch")
    tip = refs.resolve(cwd, f"refs/remotes/{remote}/{info.branch}")
    if tip is None:
        raise GitError(f"branch {info.branch} of {task_id} is not on {remote}; nothing was merged")
    if info.tip and tip != info.tip:
        raise InvalidTransition(f"cannot merge {task_id}: {remote}/{info.branch} is at {tip[:12]}, not at the "
                                f"{info.tip[:12]} asked to be reviewed; nothing was merged")
    res.tip = tip
    if refs.is_ancestor(cwd, tip, ours):  # a push of an earlier attempt landed: record it
        res.commit = merged.merge_commit_on(cwd, tip, target_ref)
        res.nothing, res.already = (None if res.commit else "on-integration"), True
        held.move("COMPLETED", "merge")
        return True
    message = f"Merge {info.branch} ({task_id})\n" + (f"\n{info.description}\n" if info.description else "")
    mr = objects.merge_commit(repo.paths.common_dir, ours, tip, message, objects.identity(cwd),
                              objects.identity(cwd, "GIT_AUTHOR_IDENT"))
    if mr.commit is None:
        res.conflicts, res.onto = list(mr.conflicts), ours
        held.move("WORKING", "merge")
        return True
    if check_argv:
        _run_check(repo, mr.commit, check_argv)
    if not _push(repo, held, mr.commit, ours, integration):
        return False
    fetch_branches(repo, remote, [integration])  # git is the ground truth: the remote has it, or nothing moves
    if not refs.is_ancestor(cwd, mr.commit, target_ref):
        raise GitError(f"{remote} accepted the push of {integration} but does not have {mr.commit[:12]}; "
                       f"nothing recorded ({task_id} is still APPROVED)")
    res.commit, res.pushed = mr.commit, True
    held.move("COMPLETED", "merge")
    return True


def _push(repo: Repo, held, commit: str, ours: str, integration: str) -> bool:
    """The merge's push (on the git remote the claim's move rides it: one atomic push, both leased on the values
    read); False when it lost a race to the integration branch (merge again), one line for anything else."""
    remote, task_id = repo.settings.remote, held.task_id
    also = held.ride("COMPLETED", "merge")  # the git remote's (PostgreSQL holds the row locked instead: ())
    push = _push_from_checkout(repo, remote, commit, integration, ours, also=also)
    if push.rejected:
        if also and held.lost():  # the claim moved meanwhile: merged or sent back by another machine
            _judge(held.record, task_id, held.machine)
        return False
    if push.hook_refused:
        raise _gate_refused(push, integration, remote, task_id)
    if push.remote_refused:
        raise _remote_refused(push, integration, remote, f"nothing was merged ({task_id} is still APPROVED)")
    if not push.ok:
        from ...git.remote_refs import may_have_landed

        unsure = (f": no answer came back, so it may have landed; run `git worker merge {task_id}` again (it reads "
                  f"{remote} first and finishes it)" if may_have_landed(push.output) else "")
        raise GitError(f"could not push {integration} to {remote}: {push.message}{unsure}")
    return True


def _published_here(repo: Repo, task_id: str, res: MergeResult, info: Published) -> None:
    """This machine's message of what it did to the task (its log carries it to the holder, whose row follows)."""
    from ... import clock

    if res.conflicts:
        kind, payload = "merge_conflict", {"files": res.conflicts, "into": res.into, "onto": res.onto}
    else:
        kind, payload = "merged", {"commit": res.commit, "into": res.into, "tip": res.tip, "pushed": res.pushed,
                                   **({"nothing": res.nothing} if res.nothing else {})}
    with repo.bus.write() as conn:
        messages.publish(conn, task_id, kind, {**payload, "holder": res.holder, "branch": info.branch}, clock.now())


def _conflict(task_id: str, integration: str, res: MergeResult) -> ConflictError:
    return ConflictError(
        f"merging {task_id} into {integration} conflicts; the task is back to WORKING (on machine {res.holder} "
        "at its next sync)",
        files=res.conflicts,
        details=[f"Conflicting files: {', '.join(res.conflicts)}", f"To resolve, on machine {res.holder}:",
                 f"  1. in the task's worktree: git worker done   (rebases onto {integration})",
                 "  2. get it approved again", f"  3. git worker merge {task_id}"],
    )
