"""The transition table (pure): exactly the seed's ValidTransitions, and the replay check."""

from __future__ import annotations

import itertools

import pytest

from git_nerve.worker.states import ALL_STATES, VALID_TRANSITIONS, State, can_transition, parse, replay

SEED_TABLE = {
    "ASSIGNED": {"WORKING", "FAILED"},
    "WORKING": {"IN_REVIEW", "CONFLICTED", "FAILED"},
    "CONFLICTED": {"IN_REVIEW", "WORKING", "FAILED"},
    "IN_REVIEW": {"APPROVED", "WORKING", "FAILED"},
    "APPROVED": {"COMPLETED", "WORKING", "FAILED"},
    "COMPLETED": set(),
    "FAILED": {"ASSIGNED"},
}


def test_table_is_exactly_the_seeds():
    assert {s.value: {t.value for t in targets} for s, targets in VALID_TRANSITIONS.items()} == SEED_TABLE
    assert set(ALL_STATES) == set(SEED_TABLE)


@pytest.mark.parametrize("frm,to", list(itertools.product(SEED_TABLE, SEED_TABLE)))
def test_can_transition_matches_the_table_for_every_pair(frm, to):
    assert can_transition(frm, to) is (to in SEED_TABLE[frm])
    assert can_transition(State(frm), State(to)) is (to in SEED_TABLE[frm])


def test_completed_is_terminal_and_stale_is_not_a_state():
    assert not any(can_transition("COMPLETED", s) for s in ALL_STATES)
    with pytest.raises(ValueError):
        State("STALE")


@pytest.mark.parametrize("text,expected", [("working", "WORKING"), ("in-review", "IN_REVIEW"), ("In_Review", "IN_REVIEW")])
def test_parse_accepts_case_and_dashes(text, expected):
    assert parse(text).value == expected


def test_parse_rejects_unknown_names_listing_the_states():
    with pytest.raises(ValueError, match="unknown state 'stale'.*ASSIGNED"):
        parse("stale")


def test_replay_folds_a_legal_log():
    log = [
        ("task_assign", None, "ASSIGNED"),
        ("state_change", "ASSIGNED", "WORKING"),
        ("state_change", "WORKING", "CONFLICTED"),
        ("state_change", "CONFLICTED", "IN_REVIEW"),
        ("state_change", "IN_REVIEW", "WORKING"),
        ("state_change", "WORKING", "IN_REVIEW"),
        ("state_change", "IN_REVIEW", "APPROVED"),
        ("state_change", "APPROVED", "COMPLETED"),
    ]
    assert replay(log) == "COMPLETED"
    assert replay([]) is None


@pytest.mark.parametrize(
    "log,error",
    [
        ([("task_assign", None, "ASSIGNED"), ("task_assign", None, "ASSIGNED")], "assigned twice"),
        ([("task_assign", None, "ASSIGNED"), ("state_change", "WORKING", "IN_REVIEW")], "but state was ASSIGNED"),
        ([("task_assign", None, "ASSIGNED"), ("state_change", "ASSIGNED", "COMPLETED")], "illegal transition"),
    ],
)
def test_replay_rejects_an_illegal_log(log, error):
    with pytest.raises(ValueError, match=error):
        replay(log)
