"""Shared mode's one call per verb: the shared store's compare-and-set of a transition (:mod:`git_nerve.shared`),
made before the local bus row moves, so that a machine losing a race changes nothing here. Without shared mode
(no ``[shared]`` in nerve.toml) these do nothing.
"""

from __future__ import annotations

import sys

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
        riding = self.pending is not None and self.state.rides_push  # PostgreSQL's holds a row locked instead
        return (self.pending.update,) if riding else ()

    def failed(self, bus: Bus | None = None, push=None) -> None:
        """The push failed: HeldElsewhere when it was the claim that lost (after fencing the task off here
        when another machine took it over; ``bus``: where to). When the remote has the claim after all (it took
        the push and the answer was lost), the mirror follows and a GitError says to run the command again (it
        finishes it); when the remote cannot be asked, the next run of the command asks it first (and a GitError
        says the push may have landed, when ``push``, the command's failed push, may have reached the remote)."""
        if self.pending is None:
            return
        rec = self.pending.record if self.state.rides_push else None  # (PostgreSQL's: rolled back, nothing to say)
        try:
            took = self.state.lost(self.pending)
        except HeldElsewhere:
            if bus is not None:
                _fence_after_refusal(bus, self.pending.record.task)
            raise
        if rec is None or bus is None or took is False:
            return
        from ..errors import GitError
        from ..git.remote_refs import may_have_landed

        _unsure(bus, rec.task, True)  # the next run reads the remote first
        remote = self.state.remote
        command = f"git worker done --task {rec.task}" if rec.verb == "done" else f"git worker {rec.verb} {rec.task}"
        again = f"run `{command}` again: it reads {remote} first and finishes it here"
        if took:
            raise GitError(f"the push of {rec.task}'s {rec.verb} reached {remote} (its claim is there: {rec.state}) "
                           f"but the answer was lost: {again}; nothing else changed here")
        if push is not None and may_have_landed(getattr(push, "output", "")):
            raise GitError(f"could not push {rec.task}'s {rec.verb} to {remote} ({getattr(push, 'message', '')}): no "
                           f"answer came back and {remote} could not be asked since, so it may have landed; {again}; "
                           "nothing else changed here")

    def landed(self, bus: Bus) -> None:
        if self.pending is not None:
            self.state.landed(bus, self.pending)


def riding_push(bus: Bus, task_id: str, expected: str, to: State, verb: str, remote: str) -> Riding:
    """Shared mode: the claim of ``task_id``'s move to ``to`` ready to ride the command's push to ``remote``."""
    from .. import shared

    state = shared.for_bus(bus)
    if not state.active:
        return Riding()
    unsure = _unsure(bus, task_id)
    try:
        pending = (state.prepare_with_push(task_id, expected, to.value, verb, remote, fresh=True) if unsure
                   else state.prepare_with_push(task_id, expected, to.value, verb, remote))
    except HeldElsewhere:
        _fence_after_refusal(bus, task_id)
        raise
    if unsure:
        _unsure(bus, task_id, False)  # the remote was read: what it has is the truth again
    return Riding(state, pending)


def _unsure(bus: Bus, task_id: str, value: bool | None = None) -> bool:
    """Did a push carrying ``task_id``'s claim fail with its outcome unknown (the next one reads the remote
    first)? ``value``: set it (True) or clear it (False)."""
    from ..bus import shared as cache

    key = f"unsure:{task_id}"
    if value is None:
        return cache.get_meta(bus.conn, key) is not None
    with bus.write() as conn:
        cache.ensure(conn)
        cache.set_meta(conn, key, "1" if value else None)
    return value


#: the verbs that, on a task another machine holds, are run on that machine (the command to name there)
RUN_THERE = {"approve": "approve", "request changes for": "request-changes", "merge": "merge"}


def refuse_elsewhere(bus: Bus, task_id: str, verb: str | None = None) -> None:
    """A task this machine does not have, but the last sync saw on another machine: HeldElsewhere naming it.
    For a review verb or a merge (``verb``) the line says to run it on that machine (a store without ``hold``;
    the git remote and PostgreSQL run them from any machine: :mod:`.lifecycle.review_elsewhere`,
    :mod:`.lifecycle.merge_elsewhere`, and never come here)."""
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
