"""Threads on a real bus: views, posting, validation, metadata parsing."""

from __future__ import annotations

import calendar
import time

import pytest

from git_nerve.bus import Bus, rounds, workers
from git_nerve.errors import UsageError
from git_nerve.thread import service


def ts(iso: str) -> float:
    return float(calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")))


def add_task(bus: Bus, task_id: str) -> None:
    now = time.time()
    with bus.write() as conn:
        workers.insert(conn, workers.Worker(
            task_id=task_id, state="ASSIGNED", branch=f"worker/{task_id}", worktree=f"/nowhere/{task_id}",
            base="refs/heads/main", integration="main", description="", assigned_at=now, state_changed_at=now,
            last_heartbeat=None, last_activity=now, approved_at=None, heartbeat_status=None, progress=None,
        ))


@pytest.fixture
def bus(tmp_path):
    b = Bus(tmp_path / "nerve" / "bus.db")
    add_task(b, "t1")
    yield b
    b.close()


def fill(bus: Bus, thread: str, n: int, size: int = 10, role: str = "coder") -> None:
    with bus.write() as conn:
        for i in range(n):
            rounds.append(conn, thread, role=role, content="x" * size, metadata=None, ts=1000.0 + i)


def test_the_seed_example_end_to_end(bus):
    """The seed's own example, posted to a bus and read back with the default view."""
    service.post(bus, "t1", role="analyzer", content="Analysis complete. Found 3 files that need updating...",
                 metadata={"exit_code": 0, "files_changed": 3}, ts=ts("2026-04-23T13:00:00Z"))
    for i, role in enumerate(("coder", "coder", "reviewer"), start=2):
        service.post(bus, "t1", role=role, content=f"round {i} " * 50, ts=ts("2026-04-23T13:00:00Z") + i)
    number = service.post(bus, "t1", role="tester", content="All tests passed, sense validates correctly.",
                          metadata={"exit_code": 0, "assertions_passed": 3}, ts=ts("2026-04-23T13:00:12Z"))
    assert number == 5
    view = service.view(bus, "t1", budget=100)
    assert view.render() == (
        "[#1 analyzer] 2026-04-23T13:00:00Z\n---\nexit_code: 0\nfiles_changed: 3\n---\n"
        "Analysis complete. Found 3 files that need updating...\n\n"
        "... 3 messages omitted (use --before 5 to load) ...\n\n"
        "[#5 tester] 2026-04-23T13:00:12Z\n---\nexit_code: 0\nassertions_passed: 3\n---\n"
        "All tests passed, sense validates correctly."
    )
    assert view.as_dict()["omitted"] == [{"from": 2, "to": 4, "count": 3, "before": 5}]
    # the hinted command loads exactly the omitted rounds (and round 1 once the walk reaches it)
    page = service.view(bus, "t1", before=5, budget=10**6)
    assert [r.round for r in page.rounds] == [1, 2, 3, 4]


def test_round_ids_are_sequential_per_thread_and_stable(bus):
    add_task(bus, "t2")
    assert [service.post(bus, "t1", role="a", content="one"), service.post(bus, "t2", role="a", content="uno"),
            service.post(bus, "t1", role="a", content="two")] == [1, 1, 2]
    before = service.view(bus, "t1").as_dict()["rounds"]
    service.post(bus, "t1", role="a", content="three")
    assert service.view(bus, "t1").as_dict()["rounds"][:2] == before


def test_json_view_fields(bus):
    service.post(bus, "t1", role="tester", content="ok\n", metadata={"n": {"deep": [1, 2]}},
                 ts=ts("2026-04-23T13:00:00Z"))
    assert service.view(bus, "t1").as_dict() == {
        "thread": "t1",
        "rounds": [{"round": 1, "role": "tester", "ts": "2026-04-23T13:00:00Z",
                    "metadata": {"n": {"deep": [1, 2]}}, "content": "ok\n"}],
        "omitted": [],
    }


def test_rounds_written_by_others_hide_reserved_keys_and_show_unknown_roles(bus):
    with bus.write() as conn:
        rounds.append(conn, "t1", role=None, content="raw", metadata={"type": "role_result", "ok": 1}, ts=0.0)
    view = service.view(bus, "t1")
    assert view.render() == "[#1 unknown] 1970-01-01T00:00:00Z\n---\nok: 1\n---\nraw"
    assert view.as_dict()["rounds"][0]["metadata"] == {"ok": 1}


def test_unknown_thread(bus):
    with pytest.raises(UsageError, match="unknown thread 'nope'"):
        service.view(bus, "nope")
    with pytest.raises(UsageError, match="did you mean 't1'"):
        service.view(bus, "T1")
    with pytest.raises(UsageError, match="unknown thread"):
        service.post(bus, "nope", role="a", content="x")
    assert rounds.threads(bus.conn) == []


def test_a_thread_with_rounds_but_no_task_row_is_known(bus):
    fill(bus, "orphan", 2)
    assert [r.round for r in service.view(bus, "orphan").rounds] == [1, 2]
    assert service.post(bus, "orphan", role="a", content="x") == 3


def test_empty_known_thread_is_an_empty_view(bus):
    view = service.view(bus, "t1")
    assert view.rounds == () and view.omitted == () and view.render() == ""


@pytest.mark.parametrize("kwargs, message", [
    ({"budget": 0}, "--budget"), ({"budget": -5}, "--budget"),
    ({"before": 0}, "--before"), ({"before": -1}, "--before"),
])
def test_bad_numbers_are_usage_errors(bus, kwargs, message):
    with pytest.raises(UsageError, match=message):
        service.view(bus, "t1", **kwargs)


@pytest.mark.parametrize("role, content, metadata, message", [
    ("", "x", None, "needs a role"),
    ("   ", "x", None, "needs a role"),
    ("a\nb", "x", None, "one line"),
    ("tester", "", None, "nothing to post"),
    ("tester", "  \n", {}, "nothing to post"),
    ("tester", "x", {"role": "other"}, "reserved"),
    ("tester", "x", {"content": "other"}, "reserved"),
    ("tester", "x", {"type": "role_result"}, "reserved"),
    ("tester", "x", [1, 2], "JSON object"),
    ("tester", "x", {"n": float("nan")}, "plain JSON"),
    ("tester", "x", {1: "a"}, "non-empty strings"),
])
def test_bad_posts_write_nothing(bus, role, content, metadata, message):
    with pytest.raises(UsageError, match=message):
        service.post(bus, "t1", role=role, content=content, metadata=metadata)
    assert rounds.last_round(bus.conn, "t1") == 0


def test_empty_content_with_metadata_is_a_round(bus):
    assert service.post(bus, "t1", role="ci", content="", metadata={"passed": True}) == 1
    assert service.view(bus, "t1").render().endswith("---\npassed: true\n---")


def test_role_is_trimmed(bus):
    service.post(bus, "t1", role="  tester ", content="x")
    assert service.view(bus, "t1").rounds[0].role == "tester"


def test_the_query_reads_what_the_budget_needs_not_the_whole_thread(bus):
    """SQLite's instruction count for a view does not grow with the thread."""
    add_task(bus, "big")
    fill(bus, "t1", 20, size=100)
    fill(bus, "big", 20_000, size=100)

    def instructions(thread: str, **kw) -> tuple[int, service.ThreadView]:
        count = 0

        def tick() -> int:
            nonlocal count
            count += 1
            return 0

        bus.conn.set_progress_handler(tick, 10)
        try:
            view = service.view(bus, thread, **kw)
        finally:
            bus.conn.set_progress_handler(None, 0)
        return count, view

    for kw in ({"budget": 1000}, {"budget": 1000, "before": 15}):
        small, _ = instructions("t1", **kw)
        big, view = instructions("big", **kw)
        assert len(view.rounds) <= 12
        assert big <= 2 * small + 20, (kw, small, big)


# -- --meta parsing ------------------------------------------------------------------


@pytest.mark.parametrize("raw, value", [
    ("3", 3), ("-12", -12), ("0", 0), ("0.5", 0.5), ("-1.25", -1.25), ("1.5e+3", 1500.0),
    ("true", True), ("False", False), ("null", None), ("~", None),
    ("", ""), ("hello", "hello"), ("hello world", "hello world"),
    ("yes", "yes"), ("no", "no"), ("on", "on"), ("NO", "NO"),  # YAML 1.1 booleans stay words
    ("010", "010"), ("0x1F", "0x1F"), ("1:30", "1:30"), ("1_000", "1_000"),  # no octal, hex or sexagesimal
    ("2026-04-23", "2026-04-23"), (".inf", ".inf"), (".nan", ".nan"),
    ("[1, 2]", "[1, 2]"), ("{a: 1}", "{a: 1}"), ("a: b", "a: b"), ("- x", "- x"),
    ("fix #12", "fix #12"), ("x #comment", "x #comment"), ("[unclosed", "[unclosed"), ("@at", "@at"),
    ('"42"', "42"), ("'007'", "007"), ('"a\\tb"', "a\tb"), ('"unterminated', '"unterminated'),
    ("  padded  ", "  padded  "), ("ünïcødé ✓", "ünïcødé ✓"),
])
def test_meta_values_are_yaml_scalars_without_surprises(raw, value):
    parsed = service.parse_meta_value(raw)
    assert parsed == value and type(parsed) is type(value)


def test_parse_metadata_merges_json_then_pairs():
    meta = service.parse_metadata(["b=2", "c=x=y", "a=override"], '{"a": {"nested": [1, true]}, "z": null}')
    assert meta == {"a": "override", "z": None, "b": 2, "c": "x=y"}
    assert list(meta) == ["a", "z", "b", "c"]


@pytest.mark.parametrize("pairs, meta_json, message", [
    (["novalue"], None, "KEY=VALUE"),
    (["=3"], None, "KEY=VALUE"),
    (["role=x"], None, "reserved"),
    ([], '{"content": "x"}', "reserved"),
    ([], "[1, 2]", "JSON object"),
    ([], "not json", "not valid JSON"),
    ([], '{"a": NaN}', "not valid JSON"),
    ([], '{"a": Infinity}', "not valid JSON"),
])
def test_bad_metadata_is_refused(pairs, meta_json, message):
    with pytest.raises(UsageError, match=message):
        service.parse_metadata(pairs, meta_json)
