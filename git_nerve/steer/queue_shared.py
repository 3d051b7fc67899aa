"""`git worker merge --all` across machines (shared mode on PostgreSQL, issue 29): the queue is every machine's
APPROVED tasks in approval order, and each run takes the next one no other run holds (the shared store's
``SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1``), holding its claim row through that task's merge. Several machines
running `merge --all` at once so merge each task exactly once, in order, and none waits behind another's task.
A task of this machine merges as `git worker merge` does; one of another machine as
:mod:`git_nerve.worker.lifecycle.merge_elsewhere` does (both move the claim inside the hold).

The order is the approval order alone: the radar's "conflicting tasks last" (:mod:`.queue`) knows this
machine's tasks only. ``--batch`` (one check for several tasks) keeps the queue of this machine's tasks.
"""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace
from collections.abc import Iterator

from ..bus import shared as cache
from ..bus import workers

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any


class SharedQueue:
    """The shared store's side of the queue: the APPROVED tasks as last synced, the next task to merge."""

    def __init__(self, repo: Any, state: Any):
        self.repo, self.state = repo, state

    def approved(self) -> list:
        """Every machine's APPROVED tasks (a sync first): this machine's rows, the others' claims as rows."""
        self.state.sync(self.repo.bus)
        conn = self.repo.bus.conn
        here = workers.all_workers(conn, states=("APPROVED",))
        known = {w.task_id for w in workers.all_workers(conn)}
        there = [_as_row(c) for c in cache.claims(conn) if c.state == "APPROVED" and c.task_id not in known]
        return here + there

    def lookup(self, conn, task_id: str):
        """A task's row, or another machine's claim as one (`add` of a task another machine holds)."""
        w = workers.get(conn, task_id)
        if w is not None:
            return w
        c = cache.claim(conn, task_id)
        return _as_row(c) if c is not None else None

    @contextmanager
    def next(self, skip: list[str]) -> Iterator[str | None]:
        """The next task to merge, its claim held until the ``with`` ends; None when no APPROVED task is left
        that another run does not hold."""
        with self.state.hold_next(self.repo.bus, skip) as held:
            yield held.task_id if held is not None else None


def _as_row(c: cache.Claim) -> SimpleNamespace:
    return SimpleNamespace(task_id=c.task_id, state=c.state, approved_at=c.ts, state_changed_at=c.ts)


def shared_queue(repo: Any) -> SharedQueue | None:
    """The queue across machines when the shared store hands out tasks (PostgreSQL); None otherwise."""
    from .. import shared

    state = shared.for_bus(repo.bus)
    return SharedQueue(repo, state) if state.queues_merges else None
