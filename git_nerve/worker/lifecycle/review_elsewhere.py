"""`approve` and `request-changes` of a task another machine holds (shared mode, issue 29; the git remote: issue 36).

The claim moves in the shared store by compare-and-set, its row held locked for the move (a merge of the task
under way elsewhere is waited for), the holder unchanged: IN_REVIEW -> APPROVED (approve), IN_REVIEW or
APPROVED -> WORKING (request-changes). This machine then leaves in its log what the holder needs: the verb's
message (``review_approved`` / ``changes_requested``: who, the comment) and the comment as a ``thread_post``
(a ``reviewer`` round), which the holder's next sync appends to the agent's thread
(:func:`git_nerve.bus.shared.deliver_posts`) while its row follows the claim (:mod:`git_nerve.bus.followed`).
A rerun on a claim already moved by the same verb changes nothing; a new comment still goes to the thread.
"""

from __future__ import annotations

from ... import clock
from ...bus import messages
from ...bus import shared as cache
from ...errors import InvalidTransition, UsageError
from ..transitions import Outcome
from .repo import Repo

#: verb -> (the claim's new state, the states it may come from, its message kind, the round's verdict)
VERBS = {
    "approve": ("APPROVED", ("IN_REVIEW",), "review_approved", "approved"),
    "request changes for": ("WORKING", ("IN_REVIEW", "APPROVED"), "changes_requested", "changes_requested"),
}


def reviews_elsewhere(repo: Repo, task_id: str) -> bool:
    """A task with no row here, in a repository whose shared store reviews other machines' tasks (shared mode)."""
    from ... import shared
    from ...bus import workers

    return workers.get(repo.bus.conn, task_id) is None and shared.for_bus(repo.bus).holds_claims


def review_elsewhere(repo: Repo, task_id: str, verb: str, *, by: str | None, comment: str | None) -> Outcome:
    """Move another machine's task as ``verb`` does (see the module docstring); the outcome (``worker`` None,
    ``holder`` the machine holding it)."""
    from ... import shared

    new, allowed, kind, verdict = VERBS[verb]
    state = shared.for_bus(repo.bus)
    with state.hold(repo.bus, task_id, verb) as held:
        rec = held.record
        if rec is None:
            raise UsageError(f"unknown task {task_id!r} (see `git worker status`)")
        if rec.owner == state.config.machine:
            raise InvalidTransition(f"cannot {verb} {task_id}: the shared store says this machine holds it, but it "
                                    "has no row here (`git nerve sync`, then `git worker status`)")
        previous = rec.state
        changed = not (rec.state == new and rec.verb == verb)
        if changed and rec.state not in allowed:
            raise InvalidTransition(f"cannot {verb} {task_id}: it is {rec.state} on machine {rec.owner}")
        if changed:
            held.move(new, verb)
    if changed or _new_comment(repo, task_id, kind, comment):
        _leave_for_holder(repo, task_id, kind, verdict, rec.owner, by, comment)
    return Outcome(changed, previous, new, None, holder=rec.owner)


def _new_comment(repo: Repo, task_id: str, kind: str, comment: str | None) -> bool:
    last = messages.for_task(repo.bus.conn, task_id, kinds=(kind,))
    return bool(comment) and (not last or last[-1].payload.get("comment") != comment)


def _leave_for_holder(repo: Repo, task_id: str, kind: str, verdict: str, holder: str, by: str | None,
                      comment: str | None) -> None:
    """The verb's message and the comment's round, in this machine's log (the holder's sync takes them)."""
    ts = clock.now()
    with repo.bus.write() as conn:
        messages.publish(conn, task_id, kind, {"by": by, "comment": comment, "holder": holder}, ts)
        if comment:
            meta = {"verdict": verdict, **({"by": by} if by else {})}
            messages.publish(conn, task_id, cache.THREAD_POST, {"role": "reviewer", "content": comment,
                                                                "metadata": meta, "holder": holder}, ts)
    from ... import shared

    state = shared.for_bus(repo.bus)
    if state.config.background:  # carried to the database soon (the claim moved already)
        from ...shared.background import spawn

        spawn(state.config.common_dir, state.cwd)
