"""What a merge publishes, shared by :mod:`.merging` (a task of this machine) and :mod:`.merge_elsewhere` (one
another machine holds): the result, the push of the integration branch from a temporary checkout (every pre-push
gate runs), what a gate's refusal says, and the claim held across it (PostgreSQL)."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field

from ...errors import CheckFailed
from ... import faults
from ...git import remote as gitremote
from ...git import worktrees
from ..transitions import Outcome
from .repo import Repo


MERGE_ATTEMPTS = 3
#: attempts when several machines merge into one integration branch at once (shared mode: every machine merges,
#: on PostgreSQL every machine's `merge --all` too), each lost race followed by a short random pause so they do not lose together again
SHARED_ATTEMPTS = 12


@dataclass
class MergeResult:
    outcome: Outcome | None
    commit: str | None = None
    into: str = ""
    pushed: bool = False
    attempts: int = 0
    archive_ref: str | None = None
    removed_worktree: bool = False
    deleted_branch: bool = False
    already: bool = False
    #: no merge commit was made: "empty" (an --allow-empty task) or "on-integration" (its commits got there another way)
    nothing: str | None = None
    warnings: list[str] = field(default_factory=list)
    submodule_archives: list[str] = field(default_factory=list)  # "<path>: <ref>" in each submodule's repository
    ignored_removed: list[str] = field(default_factory=list)  # ignored paths the removal deleted (never archived)
    #: why the branch was kept, here or on the remote (:mod:`.owned`): one line each
    kept: list[str] = field(default_factory=list)
    #: a task another machine holds, merged here (:mod:`.merge_elsewhere`): that machine; the tip merged; a
    #: conflict's files and the integration tip it was met on
    holder: str | None = None
    tip: str | None = None
    conflicts: list[str] = field(default_factory=list)
    onto: str | None = None


def _push_from_checkout(repo: Repo, remote: str, commit: str, integration: str, expect: str,
                        also: tuple = ()) -> gitremote.PushResult:
    """Push the merge from a real checkout of it (a temporary detached worktree, removed afterwards), so that
    every pre-push gate (pre-commit, lefthook, husky, the user's own) runs as for a person's push."""
    config = gitremote.from_checkout_config(repo.paths.main_checkout or repo.paths.common_dir, remote)
    with worktrees.checkout_at(repo.cwd, repo.paths.common_dir, commit, what="push") as path:
        faults.point("merge.in-checkout")  # the temporary checkout exists, nothing pushed
        return gitremote.push(path, remote, commit, integration, expect=expect, config=config,
                              env_extra={"NERVE_INTERNAL_PUSH": "merge"}, also=also)


def _gate_refused(push: gitremote.PushResult, integration: str, remote: str, task_id: str) -> CheckFailed:
    """A pre-push hook refused the merge's push: its own output, and the promise that nothing moved."""
    output = [ln for ln in push.output.splitlines() if ln.strip() and not ln.startswith("error: failed to push some refs")]
    return CheckFailed(
        f"a pre-push hook refused the push of {integration} to {remote}; nothing was merged "
        f"({task_id} is still APPROVED: fix what it says, then run the merge again)",
        details=output[-40:],
    )


def merge_attempts(repo: Repo) -> int:
    """How many lost races a merge takes before it gives up (more when other machines merge too)."""
    from ... import shared

    return SHARED_ATTEMPTS if shared.for_bus(repo.bus).holds_claims else MERGE_ATTEMPTS


def after_lost_race(attempt: int, attempts: int) -> None:
    """Between attempts of a merge whose push lost a race to another machine's: a short random pause."""
    if attempts > MERGE_ATTEMPTS:
        import random
        import time

        time.sleep(random.uniform(0, 0.1 * min(attempt, 5)))


def claim_held(repo: Repo, task_id: str):
    """Shared mode on PostgreSQL: the task's claim row held locked across the merge's push (committed at the end:
    the integration branch and the claim cannot disagree, and another machine's merge of it waits); elsewhere
    nothing to hold."""
    from ... import shared

    state = shared.for_bus(repo.bus)
    if not state.locks_claims:  # the git remote: the claim rides the merge's own push instead
        return nullcontext()
    return state.hold(repo.bus, task_id, "merge")
