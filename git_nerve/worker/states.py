"""The worker state machine (pure: no I/O)."""

from __future__ import annotations

import enum


class State(str, enum.Enum):
    ASSIGNED = "ASSIGNED"
    WORKING = "WORKING"
    CONFLICTED = "CONFLICTED"
    IN_REVIEW = "IN_REVIEW"
    APPROVED = "APPROVED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


S = State

#: Exactly the seed's ValidTransitions table.
VALID_TRANSITIONS: dict[State, frozenset[State]] = {
    S.ASSIGNED: frozenset({S.WORKING, S.FAILED}),
    S.WORKING: frozenset({S.IN_REVIEW, S.CONFLICTED, S.FAILED}),
    S.CONFLICTED: frozenset({S.IN_REVIEW, S.WORKING, S.FAILED}),
    S.IN_REVIEW: frozenset({S.APPROVED, S.WORKING, S.FAILED}),
    S.APPROVED: frozenset({S.COMPLETED, S.WORKING, S.FAILED}),
    S.COMPLETED: frozenset(),
    S.FAILED: frozenset({S.ASSIGNED}),
}

TERMINAL = frozenset({S.COMPLETED})
ACTIVE = frozenset({S.ASSIGNED, S.WORKING, S.CONFLICTED})
ALL_STATES = tuple(s.value for s in State)


def parse(value: str) -> State:
    try:
        return State(value.upper().replace("-", "_"))
    except ValueError:
        raise ValueError(f"unknown state {value!r}; expected one of {', '.join(ALL_STATES)}") from None


def can_transition(current: str | State, new: str | State) -> bool:
    return State(new) in VALID_TRANSITIONS[State(current)]


def replay(events: list[tuple[str, str | None, str]]) -> str | None:
    """Fold (kind, from, to) events into the final state; raise on an illegal step.

    Used to prove that the message log and the workers table agree.
    """
    state: str | None = None
    for kind, frm, to in events:
        if kind == "task_assign":
            if state is not None:
                raise ValueError(f"task assigned twice (was {state})")
            state = to
            continue
        if frm != state:
            raise ValueError(f"log says {frm} -> {to} but state was {state}")
        if not can_transition(frm, to):
            raise ValueError(f"illegal transition in log: {frm} -> {to}")
        state = to
    return state
