"""What a queued message asks for: the anchored patterns, explicit kinds (pure)."""

from __future__ import annotations

import pytest

from git_nerve.errors import UsageError
from git_nerve.steer.parse import Parsed, parse


@pytest.mark.parametrize("text", ["stop", "STOP!", "  stop: the tests are red", "Stop. Now.", "stop\nplease"])
def test_stop_only_as_the_first_word(text):
    assert parse(text) == Parsed("stop")


@pytest.mark.parametrize("text", ["please stop", "stopping soon", "don't stop", "nonstop", "/stop", "the stop button"])
def test_stop_elsewhere_is_a_note(text):
    assert parse(text) == Parsed("note")


@pytest.mark.parametrize(("text", "expected"), [
    ("skip t2", Parsed("skip", "t2")),
    ("Skip t2 - it is flaky", Parsed("skip", "t2")),
    ("skip task feat.login-2.", Parsed("skip", "feat.login-2")),
    ("skip: #t3, later", Parsed("skip", "t3")),
    ("add t2", Parsed("add", "t2")),
    ("ADD   t_9 back please", Parsed("add", "t_9")),
])
def test_skip_and_add_name_a_task_at_the_start(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize("text", ["please skip t2", "we should add t3", "skip", "skipt2", "add -x", "adding t2"])
def test_skip_and_add_elsewhere_are_notes(text):
    assert parse(text).kind == "note"


def test_a_message_to_a_task_only_knows_stop():
    assert parse("skip the flaky test", commands=("stop",)) == Parsed("note")
    assert parse("stop", commands=("stop",)) == Parsed("stop")


def test_an_explicit_kind_wins_over_the_text():
    assert parse("stop worrying, it is fine", "note") == Parsed("note", explicit=True)
    assert parse("whatever you are doing", "STOP") == Parsed("stop", explicit=True)
    assert parse("t2", "skip") == Parsed("skip", "t2", explicit=True)
    assert parse("add t2", "add") == Parsed("add", "t2", explicit=True)


def test_bad_explicit_kinds_are_usage_errors():
    with pytest.raises(UsageError, match="unknown kind 'halt': use one of stop, skip, add, note"):
        parse("now", "halt")
    with pytest.raises(UsageError, match="--kind skip needs a task id"):
        parse("   ", "skip")
