"""Compare-and-set state changes on the bus.

Each transition reads the current state, checks it against the caller's
expectation and the transition table, writes the new state with
``UPDATE ... WHERE state = <expected>``, and appends its messages, all in one
``BEGIN IMMEDIATE`` transaction: two racing agents can never both win, and
the message log always replays to the workers table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .. import clock
from ..bus import messages, rounds, workers
from ..bus.connection import Bus
from ..errors import InvalidTransition, UsageError
from .claims import before_transition, refuse_elsewhere
from .fencing import refuse_fenced
from .states import State, can_transition

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class Outcome:
    changed: bool
    previous: str
    current: str
    worker: workers.Worker | None  #: None: a task another machine holds (reviewed from here, PostgreSQL)
    holder: str | None = None  #: that machine


def unknown(task_id: str) -> UsageError:
    return UsageError(f"unknown task {task_id!r} (see `git worker status`)")


def get(bus: Bus, task_id: str, verb: str | None = None) -> workers.Worker:
    """The task's row; UsageError when there is none, HeldElsewhere (shared mode) when another machine holds it
    (``verb``: what the caller was about to do, for the line saying where to run it)."""
    w = workers.get(bus.conn, task_id)
    if w is None:
        refuse_elsewhere(bus, task_id, verb)  # shared mode: another machine's task is named as such
        raise unknown(task_id)
    refuse_fenced(bus, w.task_id)  # shared mode: taken over by another machine (fenced off here first)
    return w


def transition(
    bus: Bus,
    task_id: str,
    to: State,
    *,
    allowed_from: Iterable[State],
    verb: str,
    already: Iterable[State] = (),
    extra_messages: Iterable[tuple[str, dict[str, Any]]] = (),
    columns: dict[str, Any] | None = None,
    round_: dict[str, Any] | None = None,
    also_when_already: bool = False,
) -> Outcome:
    """Move ``task_id`` to ``to`` if its state is one of ``allowed_from``.

    A state in ``already`` means the work was done before (idempotent retry):
    nothing is written and ``changed`` is False (with ``also_when_already``: the extra messages and the round
    are, without a state change: new input a rerun brings is never dropped). Anything else raises
    :class:`InvalidTransition` (exit 3).
    """
    allowed = {State(s).value for s in allowed_from}
    done_before = {State(s).value for s in already}
    before_transition(bus, task_id, to, allowed=allowed, already=done_before, verb=verb)  # shared mode: the remote first
    ts = clock.now()
    if workers.get(bus.conn, task_id) is None:
        refuse_elsewhere(bus, task_id, verb)  # shared mode: another machine's task is named as such
    with bus.write() as conn:
        w = workers.get(conn, task_id)
        if w is None:
            raise unknown(task_id)
        if w.state in done_before:
            if also_when_already:
                for kind, payload in extra_messages:
                    messages.publish(conn, task_id, kind, payload, ts)
                if round_:
                    rounds.append(conn, task_id, ts=ts, **round_)
            return Outcome(False, w.state, w.state, w)
        if w.state not in allowed or not can_transition(w.state, to):
            raise InvalidTransition(f"cannot {verb} {task_id}: it is {w.state}" + _hint(w.state, verb))
        if not workers.set_state(conn, task_id, w.state, to.value, ts, **(columns or {})):
            raise InvalidTransition(f"cannot {verb} {task_id}: its state changed concurrently; check `git worker status`")
        messages.publish(conn, task_id, "state_change", {"from": w.state, "to": to.value, "by": verb}, ts)
        for kind, payload in extra_messages:
            messages.publish(conn, task_id, kind, payload, ts)
        if round_:
            rounds.append(conn, task_id, ts=ts, **round_)
        new = workers.get(conn, task_id)
    assert new is not None
    from .notify import poke

    if getattr(bus, "path", None) is not None:  # <common>/nerve/bus.db
        poke(bus.path.parent.parent)  # a notification when its attention becomes something (issue 38); never waits
    return Outcome(True, w.state, new.state, new)


def _hint(state: str, verb: str) -> str:
    hints = {
        "ASSIGNED": " (run `git worker start` first)",
        "COMPLETED": " (it is merged and finished)",
        "FAILED": " (use `git worker retry` to assign it again)",
        "CONFLICTED": " (resolve the rebase, then `git worker done --skip-rebase`)",
        "IN_REVIEW": " (waiting for `git worker approve` or `request-changes`)",
        "APPROVED": " (ready for `git worker merge`)",
    }
    return hints.get(state, "")
