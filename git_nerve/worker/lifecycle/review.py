"""Review: `approve` and `request-changes` (the CLI and the console call these: the same rules), with the
comment as a `reviewer` round of the task's thread. A task another machine holds (shared mode):
:mod:`.review_elsewhere`.
"""

from __future__ import annotations

from ... import clock
from ...bus import messages, workers
from ...locks import hold
from ..locking import task_lock
from ..states import State
from ..transitions import Outcome, get, transition
from .guards import _refuse_merged_on_remote
from .repo import Repo
from .review_elsewhere import review_elsewhere, reviews_elsewhere


def approve(repo: Repo, task_id: str, *, by: str | None = None, comment: str | None = None) -> Outcome:
    """IN_REVIEW -> APPROVED. A comment also becomes a `reviewer` round in the task's thread."""
    comment = _blank_to_none(comment)
    if reviews_elsewhere(repo, task_id):  # shared mode: another machine's task
        return review_elsewhere(repo, task_id, "approve", by=by, comment=comment)
    payload = {"by": by, "comment": comment}
    return transition(
        repo.bus, task_id, State.APPROVED, allowed_from=[State.IN_REVIEW], already=[State.APPROVED], verb="approve",
        extra_messages=[("review_approved", payload)], columns={"approved_at": clock.now()},
        round_=_review_round("approved", by, comment),
        also_when_already=_new_comment(repo, task_id, State.APPROVED, "review_approved", comment),
    )


def request_changes(repo: Repo, task_id: str, *, comment: str | None = None, by: str | None = None,
                    line_comments: list[dict] | None = None) -> Outcome:
    """IN_REVIEW (or APPROVED) -> WORKING. The comment reaches the agent through its thread; on a task already
    WORKING a new comment is added to the thread all the same (never dropped), the same comment again is an
    idempotent rerun. `git worker request-changes` and the console both call this: the same rules.
    ``line_comments`` (the console's ``[{path, line, side, at, text}]``, already part of ``comment`` as
    ``path:line: text`` lines) are recorded with the tip reviewed, so the console shows them on their lines
    after the agent's next round (issue 38)."""
    comment = _blank_to_none(comment)
    if reviews_elsewhere(repo, task_id):  # shared mode: another machine's task
        return review_elsewhere(repo, task_id, "request changes for", by=by, comment=comment)
    w = get(repo.bus, task_id, "request changes for")
    with hold(task_lock(repo, w), what=f"the lock of {task_id} (a merge of it is publishing)"):
        _refuse_merged_on_remote(repo, task_id, "request changes for")
        from ...git import refs

        tip = refs.resolve(repo.cwd, f"refs/heads/{w.branch}") if w.branch else None  # what was reviewed (issue 38)
        payload = {"by": by, "comment": comment, "tip": tip, **({"comments": line_comments} if line_comments else {})}
        return transition(
            repo.bus, task_id, State.WORKING, allowed_from=[State.IN_REVIEW, State.APPROVED], already=[State.WORKING],
            verb="request changes for", extra_messages=[("changes_requested", payload)],
            columns={"approved_at": None}, round_=_review_round("changes_requested", by, comment),
            also_when_already=_new_comment(repo, task_id, State.WORKING, "changes_requested", comment),
        )


def _blank_to_none(comment: str | None) -> str | None:
    """An empty or blank comment is no comment (the console's empty field, `--comment ""`), everywhere alike."""
    return comment if comment is not None and comment.strip() else None


def _new_comment(repo: Repo, task_id: str, state: State, kind: str, comment: str | None) -> bool:
    """A review command rerun on a task already in ``state``: does it bring a comment not yet recorded?"""
    w = workers.get(repo.bus.conn, task_id)
    if not comment or w is None or w.state != state.value:
        return False
    last = messages.for_task(repo.bus.conn, task_id, kinds=(kind,))
    return not last or last[-1].payload.get("comment") != comment


def _review_round(verdict: str, by: str | None, comment: str | None) -> dict | None:
    if not comment:
        return None
    meta = {"verdict": verdict}
    if by:
        meta["by"] = by
    return {"role": "reviewer", "content": comment, "metadata": meta}
