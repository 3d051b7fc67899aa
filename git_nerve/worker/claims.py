"""Shared mode's one call per verb: the shared store's compare-and-set of a transition (:mod:`git_nerve.shared`),
made before the local bus row moves, so that a machine losing a race changes nothing here. Without shared mode
(no ``[shared]`` in nerve.toml) these do nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from ..bus import workers
from ..bus.connection import Bus
from ..errors import HeldElsewhere, NerveError
from .states import State, can_transition


def before_transition(bus: Bus, task_id: str, to: State, *, allowed: set[str], already: set[str], verb: str) -> None:
    """Claim ``task_id``'s move to ``to`` on the shared store when the local transition would make it (a move
    the local bus refuses or already made is left to :func:`..transitions.transition` to say so)."""
    from .. import shared
    from .fencing import refuse_fenced

    state = shared.for_bus(bus)
    if not state.active:
        return
    w = workers.get(bus.conn, task_id)
    if w is None:
        return
    refuse_fenced(bus, task_id)  # taken over by another machine, as last seen: exit 8 naming it
    if w.state in already or w.state not in allowed or not can_transition(w.state, to):
        return
    try:
        state.claim(bus, task_id, w.state, to.value, verb)
    except HeldElsewhere:
        _fence_after_refusal(bus, task_id)
        raise


def _fence_after_refusal(bus: Bus, task_id: str) -> None:
    """A refused claim may mean the task was taken over: fence it off here (never hiding the refusal itself)."""
    from .fencing import after_refusal

    try:
        after_refusal(bus, task_id)
    except NerveError as exc:
        print(f"git-nerve: could not fence off {task_id}: {exc.message}", file=sys.stderr)


def before_spawn(bus: Bus, task_id: str) -> None:
    """Claim a new task for this machine on the shared store (the loser of a race creates nothing)."""
    from .. import shared

    state = shared.for_bus(bus)
    if state.active:
        state.claim(bus, task_id, None, State.ASSIGNED.value, "spawn", take=True)


class Riding:
    """A claim carried by a command's own push (``also``), or nothing to carry."""

    def __init__(self, state=None, pending=None):
        self.state, self.pending = state, pending

    @property
    def also(self) -> tuple:
        update = getattr(self.pending, "update", None)  # PostgreSQL's holds a row locked, rides nothing
        return (update,) if update is not None else ()

    def failed(self, bus: Bus | None = None) -> None:
        """The push failed: HeldElsewhere when it was the claim that lost (after fencing the task off here
        when another machine took it over; ``bus``: where to)."""
        if self.pending is not None:
            try:
                self.state.lost(self.pending)
            except HeldElsewhere:
                if bus is not None:
                    _fence_after_refusal(bus, self.pending.record.task)
                raise

    def landed(self, bus: Bus) -> None:
        if self.pending is not None:
            self.state.landed(bus, self.pending)


def riding_push(bus: Bus, task_id: str, expected: str, to: State, verb: str, remote: str) -> Riding:
    """Shared mode: the claim of ``task_id``'s move to ``to`` ready to ride the command's push to ``remote``."""
    from .. import shared

    state = shared.for_bus(bus)
    if not state.active:
        return Riding()
    try:
        return Riding(state, state.prepare_with_push(task_id, expected, to.value, verb, remote))
    except HeldElsewhere:
        _fence_after_refusal(bus, task_id)
        raise


#: the verbs that, on a task another machine holds, are run on that machine (the command to name there)
RUN_THERE = {"approve": "approve", "request changes for": "request-changes", "merge": "merge"}


def refuse_elsewhere(bus: Bus, task_id: str, verb: str | None = None) -> None:
    """A task this machine does not have, but the last sync saw on another machine: HeldElsewhere naming it.
    For a review verb or a merge (``verb``) the line says to run it on that machine: on the git remote a review
    moves the holder's row and its agent's thread, a merge its worktree and branch, which only the holder has
    (on PostgreSQL they run from any machine: :mod:`.lifecycle.review_elsewhere`, :mod:`.lifecycle.merge_elsewhere`,
    and never come here)."""
    from .. import shared
    from ..bus import shared as cache

    c = cache.claim(bus.conn, task_id)
    if c is None:
        return
    state = shared.for_bus(bus)
    if state.active and c.owner != state.config.machine:
        there = (f": run `git worker {RUN_THERE[verb]} {task_id}` on machine {c.owner} (it holds the task's row, "
                 "worktree and thread)" if verb in RUN_THERE else "")
        raise HeldElsewhere(f"task {task_id} is held by machine {c.owner} ({c.state} when this machine last synced)"
                            f"{there}; nothing changed here")


def holders(bus: Bus, task_ids: Iterable[str]) -> dict[str, str]:
    """{task: machine holding it} from the shared cache (empty without shared mode)."""
    from ..bus import shared as cache

    wanted = set(task_ids)
    return {c.task_id: c.owner for c in cache.claims(bus.conn) if c.task_id in wanted}
