"""The agent's commands: `fail`, `heartbeat`, and `done` (rebase onto the integration branch in
memory or, on a conflict, with git's own rebase; push; ask for review).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ... import faults
from ...bus import workers
from ...errors import ConflictError, GitError, InvalidTransition, UsageError
from ...git import checkout, cli, history, refs, worktrees
from ...git import remote as gitremote
from .. import claims, repair
from ..states import State
from ..transitions import Outcome, get, transition
from .guards import _refuse_branch_gone, _refuse_copied_secrets, _refuse_dropped, _remote_refused
from .repo import Repo, _publish, _require_tip, integration_ref, repair_leftovers
from .worktree import follow_moved_worktree


def fail(repo: Repo, task_id: str, reason: str) -> Outcome:
    """The agent gives up: ASSIGNED/WORKING/CONFLICTED -> FAILED."""
    if not reason.strip():
        raise UsageError("give a reason: git worker fail <reason>")
    return transition(
        repo.bus, task_id, State.FAILED,
        allowed_from=[State.ASSIGNED, State.WORKING, State.CONFLICTED], already=[State.FAILED], verb="fail",
        extra_messages=[("task_failed", {"reason": reason, "by": "agent"})],
    )


@dataclass
class DoneResult:
    outcome: Outcome | None
    rebased: bool = False
    rewritten: list[tuple[str, str]] = field(default_factory=list)
    pushed: bool = False
    tip: str | None = None
    already: bool = False
    #: one line when done archived and replaced what the fenced holder pushed after this machine's takeover
    kept: list[str] = field(default_factory=list)


REBASE_STEPS = [
    "To resolve:",
    "  1. fix the conflicts in the worktree",
    "  2. git add <files>",
    "  3. git rebase --continue",
    "  4. git worker done --skip-rebase",
]


def done(repo: Repo, task_id: str, *, skip_rebase: bool = False, allow_empty: bool = False,
         replace_remote: bool = False) -> DoneResult:
    """WORKING/CONFLICTED -> IN_REVIEW: rebase onto the integration branch, push, ask for review.

    The rebase runs in memory first (pygit2); a clean result moves the branch
    (only if it did not move meanwhile) and the worktree with it. On a
    conflict, git's own ``git rebase`` is started in the worktree so that the
    agent sees git's usual state and ``git rebase --continue`` works; the task
    becomes CONFLICTED and :class:`ConflictError` (exit 6) is raised.

    The push replaces exactly the value the remote has now (read first): when someone pushed commits onto the
    task's branch there that the branch here does not hold, nothing moves and GitError (exit 4) names them,
    unless ``replace_remote``: then they are archived first (``refs/nerve/archive/<task>``) and overwritten.
    """
    w = get(repo.bus, task_id)
    if w.state in (State.IN_REVIEW.value, State.APPROVED.value, State.COMPLETED.value):
        return DoneResult(None, already=True)
    if w.state not in (State.WORKING.value, State.CONFLICTED.value):
        raise InvalidTransition(
            f"cannot finish {task_id}: it is {w.state}" + (" (run `git worker start` first)" if w.state == "ASSIGNED" else "")
        )
    w, wt = _ready_to_finish(repo, w)
    tip = _require_tip(wt, "HEAD", "branch")
    onto_ref = integration_ref(repo, w.integration, fetch=True)
    onto = _require_tip(repo.cwd, onto_ref, "integration branch")
    result = DoneResult(None, tip=tip)
    empty = refs.is_ancestor(wt, tip, onto)
    if empty and not allow_empty:
        raise InvalidTransition(
            f"nothing to review: {task_id} has no commits that are not on {w.integration}; commit the work first "
            "(or pass --allow-empty to finish it with nothing to merge)"
        )
    _refuse_copied_secrets(repo, w, wt, tip, onto)  # before the rebase and the push: nothing moves

    lease, theirs, kept = _remote_lease(repo, w, tip, onto, replace_remote)  # before the rebase: a refusal changes nothing
    result.kept += kept
    if not refs.is_ancestor(wt, onto, tip):
        _refuse_dropped(repo, w, tip, onto, onto_ref, verb="done")
        if skip_rebase:
            raise ConflictError(
                f"{w.branch} does not contain the latest {w.integration}; run `git worker done` (without --skip-rebase) to rebase",
            )
        new_tip, rewritten = _rebase(repo, w, wt, tip, onto, onto_ref)
        result.rebased, result.rewritten, result.tip = True, rewritten, new_tip
        tip = new_tip

    result.pushed = _push_branch(repo, w, wt, tip, lease, theirs)
    result.outcome = transition(
        repo.bus, task_id, State.IN_REVIEW, allowed_from=[State.WORKING, State.CONFLICTED],
        already=[State.IN_REVIEW, State.APPROVED, State.COMPLETED], verb="done",
        extra_messages=[("review_request", {"sha": tip, "onto": onto, "pushed": result.pushed,
                                            **({"empty": "allowed"} if empty else
                                               {"empty": "upstream"} if result.rebased and refs.is_ancestor(wt, tip, onto)
                                               else {})})],
    )
    return result


def _ready_to_finish(repo: Repo, w: workers.Worker) -> tuple[workers.Worker, Path]:
    """(the row, its worktree) once the worktree can be finished: there, what a killed command left repaired,
    no operation in progress (a rebase stopped on a conflict is recorded), on its branch, nothing uncommitted."""
    w = follow_moved_worktree(repo, w)
    wt = Path(w.worktree)
    if not wt.is_dir():
        raise GitError(f"the worktree of {w.task_id} is missing ({wt}); run `git worker spawn {w.task_id}` to recreate it")
    repair_leftovers(repo)
    git_dir = worktrees.git_dir_of(wt)
    for line in (repair.undo_partial_reset(wt, git_dir), repair.abort_killed_rebase(wt, git_dir, w.branch)):
        if line:
            repair.say(line)
    op = worktrees.operation_in_progress(git_dir)
    if op:
        files = worktrees.conflicted_files(wt)
        if op == "rebase" and files and w.state == State.WORKING.value:
            # a `done` killed after git's rebase stopped on a conflict: record what it found
            _record_rebase_conflict(repo, w, files, (git_dir / "rebase-merge" / "onto"),
                                    integration_ref(repo, w.integration, fetch=False))
        raise ConflictError(
            f"a {op} is in progress in {wt}" + (f"; conflicting files: {', '.join(files)}" if files else ""),
            files=files, details=REBASE_STEPS if op == "rebase" else [f"finish or abort the {op} first"],
        )
    _refuse_branch_gone(repo, w, "done")
    if refs.symbolic(wt, "HEAD") != f"refs/heads/{w.branch}":
        raise GitError(f"the worktree {wt} is not on branch {w.branch}; check it out again first")
    dirty = worktrees.dirty_files(wt, untracked=False)
    if dirty:
        raise GitError(f"the worktree has uncommitted changes ({', '.join(dirty[:5])}{', ...' if len(dirty) > 5 else ''}); commit or stash them first")
    return w, wt


def _remote_lease(repo: Repo, w: workers.Worker, tip: str, onto: str,
                  replace: bool) -> tuple[str | None, list[str], list[str]]:
    """(the value done's push replaces on the remote, read from it now (None: no remote; "": no such branch
    there); the commits someone else pushed there that it overwrites; the ``kept:`` line saying so). It may
    replace what git-nerve itself pushed there last, and whatever the branch here holds (the agent rebased onto
    what someone pushed); anything else someone pushed onto it refuses the push (exit 4), unless ``replace``, or
    this machine took the task over and every such commit came after the takeover (the fenced holder's push,
    :func:`_fenced_push`): then it is archived first."""
    from .. import archive, owned

    remote = repo.settings.remote
    if not remote:
        return None, [], []
    now = owned.remote_value(repo, w, remote)
    if now is None or now == owned.pushed(repo, w)[1]:
        return now or "", [], []
    theirs = owned.others_on_remote(repo, w, now, tip, [onto])
    if not theirs:
        return now, [], []
    named = owned.name_commits(repo, theirs)
    archived = refs.archive_name(w.task_id)
    fenced = None if replace else _fenced_push(repo, w, theirs)
    if fenced is not None:
        ref = archive.keep_commits(repo, w, [now], f"pushed by the fenced holder {fenced} after the takeover")
        return now, theirs, [f"kept: {len(theirs)} commit(s) pushed onto {w.branch} on {remote} after this machine "
                             f"took {w.task_id} over from {fenced} (its fenced holder's push): {named}; archived under "
                             f"{ref}, then replaced by this push"]
    if not replace:
        raise GitError(
            f"{w.branch} on {remote} has {len(theirs)} commit(s) that {w.branch} here does not hold: {named}; nothing "
            f"was pushed ({w.task_id} is still {w.state}): rebase onto them (`git rebase {remote}/{w.branch}` in the "
            f"worktree), then run `git worker done` again, or run `git worker done --replace-remote` to overwrite "
            f"them (archived under {archived} first)")
    archive.keep_commits(repo, w, [now], f"replaced on {remote} by done --replace-remote")
    return now, theirs, []


def _fenced_push(repo: Repo, w: workers.Worker, theirs: list[str]) -> str | None:
    """The machine this one took ``w``'s task over from, when every commit of ``theirs`` (on the remote, not held
    here) came after the takeover (none of them on the branch as the remote had it then): what the fenced holder
    pushed before it learned (a plain `git push`, or `--no-verify`). None: not taken over here, or not that."""
    from .. import owned

    taken = owned.taken_from(repo, w.task_id)
    if taken is None:
        return None
    holder, then = taken
    if then is not None and any(refs.is_ancestor_quiet(repo.cwd, sha, then) for sha in theirs):
        return None  # on the branch before the takeover: someone's, as for any task
    return holder or "another machine"


def _push_branch(repo: Repo, w: workers.Worker, wt: Path, tip: str, lease: str | None, theirs: list[str]) -> bool:
    """Push the task's branch to the remote, leased on ``lease`` (what :func:`_remote_lease` read), and record
    the value pushed (:func:`..owned.record_pushed`; ``theirs``: the archived commits it overwrote); False
    without a remote."""
    from .. import owned

    remote = repo.settings.remote
    if not remote or lease is None:
        return False
    claim = claims.riding_push(repo.bus, w.task_id, w.state, State.IN_REVIEW, "done", remote)  # shared mode: one atomic push
    push = gitremote.push(wt, remote, f"refs/heads/{w.branch}", w.branch, expect=lease,
                          env_extra={"NERVE_INTERNAL_PUSH": "done"}, also=claim.also)
    if not push.ok:
        claim.failed(repo.bus, push)  # HeldElsewhere when the claim lost the race (a task taken over: fenced off)
        raise _push_failed(push, w, remote)
    claim.landed(repo.bus)
    faults.point("done.after-push")
    # every push of the branch is recorded: only a branch git-nerve pushed itself is ever deleted on the remote,
    # and only at the value it pushed (owned.keep_on_remote, cleanup)
    owned.record_pushed(repo, w, remote, tip, theirs)
    return True


def _rebase(repo: Repo, w: workers.Worker, wt: Path, tip: str, onto: str, onto_ref: str) -> tuple[str, list[tuple[str, str]]]:
    from ...git import objects  # pygit2 loads only when a rebase is needed

    base = history.merge_base(wt, tip, onto)
    committer = objects.identity(wt)
    rb = objects.rebase_in_memory(repo.paths.common_dir, tip, base, onto, committer)
    if rb.clean:
        faults.point("done.after-rebase")  # rebased in memory, nothing moved yet
        if refs.resolve(wt, "HEAD") != tip:
            raise ConflictError(f"{w.branch} moved while it was being rebased; run `git worker done` again")
        git_dir = worktrees.git_dir_of(wt)
        repair.set_marker(git_dir, "done-reset", {"from": tip, "to": rb.tip})
        checkout.reset_keep(wt, rb.tip)
        repair.clear_marker(git_dir, "done-reset")
        faults.point("done.after-reset")
        if refs.resolve(wt, "ORIG_HEAD") != tip:  # a commit slipped in between: put it back
            checkout.reset_keep(wt, "ORIG_HEAD", check=False)
            raise ConflictError(f"{w.branch} moved while it was being rebased; run `git worker done` again")
        # libgit2 runs no hooks: record what post-rewrite would have
        _publish(repo.bus, w.task_id, "rewrite", {"source": "rebase", "pairs": [list(p) for p in rb.rewritten], "by": "done"})
        return rb.tip, rb.rewritten
    # A conflict: hand over to git's own rebase so the agent gets git's normal state.
    git_dir = worktrees.git_dir_of(wt)
    repair.set_marker(git_dir, "done-rebase", {"tip": tip, "onto": onto})
    proc = checkout.rebase(wt, onto)
    if not proc.ok and worktrees.operation_in_progress(git_dir) is None:
        repair.clear_marker(git_dir, "done-rebase")
        raise GitError(f"git rebase onto {w.integration} failed: {cli.last_line(proc.stderr)}")
    if proc.ok or worktrees.conflicted_files(wt):
        repair.clear_marker(git_dir, "done-rebase")  # finished, or stopped on a conflict: the agent's now
    if proc.ok:  # git resolved what libgit2 could not (e.g. renames): carry on
        new_tip = _require_tip(wt, "HEAD", "branch")
        return new_tip, []
    files = worktrees.conflicted_files(wt) or rb.conflicts
    faults.point("done.after-git-rebase")  # git's rebase stopped, the task not CONFLICTED yet
    if w.state != State.CONFLICTED.value:
        _record_rebase_conflict(repo, w, files, onto, onto_ref)
    raise ConflictError(
        f"rebase conflict with {w.integration}; {w.task_id} is CONFLICTED",
        files=files,
        details=[f"Conflicting files: {', '.join(files)}", f"Worktree: {wt}", *REBASE_STEPS],
    )


def _record_rebase_conflict(repo: Repo, w: workers.Worker, files: list[str], onto: str | Path, onto_ref: str) -> None:
    """WORKING -> CONFLICTED. ``onto`` is the sha, or git's ``rebase-merge/onto`` file that holds it."""
    if isinstance(onto, Path):
        try:
            onto = onto.read_text(encoding="utf-8").strip()
        except OSError:
            onto = ""
    transition(
        repo.bus, w.task_id, State.CONFLICTED, allowed_from=[State.WORKING], already=[State.CONFLICTED],
        verb="done", extra_messages=[("rebase_conflict", {"files": files, "onto": onto, "onto_ref": onto_ref})],
    )


def _push_failed(push: gitremote.PushResult, w: workers.Worker, remote: str) -> GitError:
    """done's push failed: the pre-push gate's own reasons (git-nerve's guard names the commit and what to do)
    or the remote's, never only git's "failed to push some refs"."""
    then = f"nothing was pushed ({w.task_id} is still {w.state}; run `git worker done` again once it is fixed)"
    if push.hook_refused:
        said = [ln for ln in push.output.splitlines() if ln.strip() and not ln.startswith("error: failed to push some refs")]
        return GitError(f"the pre-push hook refused the push of {w.branch} to {remote}; {then}", details=said[-40:])
    if push.remote_refused:
        return _remote_refused(push, w.branch, remote, then)
    if push.rejected:
        return GitError(f"{w.branch} on {remote} moved while done pushed it; {then}")
    return GitError(f"could not push {w.branch} to {remote}: {push.message}")


def heartbeat(repo: Repo, task_id: str, *, status: str | None = None, progress: float | None = None) -> float:
    from ..heartbeat import record

    return record(repo.bus, task_id, status=status, progress=progress)
