"""Shared mode (issue 24): `git nerve tell --task T` for a task another machine holds, through a real bare
remote (file://): the note waits in the teller's log, and the holder's sync queues it in its inbox once (the
thread gains it, the notes hook is woken), as a local tell would; a stop arrives as a stop."""

from __future__ import annotations

import json
from pathlib import Path

from git_nerve.bus import steer
from git_nerve.fs import notes_marker
from tests import shared_support as ss


def _inbox(work: Path) -> list[tuple]:
    bus = ss.bus(work)
    try:
        return [(m.scope, m.task_id, m.kind, m.text) for m in steer.about_task(bus.conn, "t", all_since=None)]
    finally:
        bus.close()


def _pair(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t", "--description", "make the parser strict"], one)
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)
    return one, two


def _syncs(one: Path, two: Path) -> None:
    ss.ok(["nerve", "sync"], two)
    ss.ok(["nerve", "sync"], one)  # ingests the note: queued in the holder's inbox
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync", "--rebuild"], one)  # never twice, not even after the cache is rebuilt


def test_a_note_told_elsewhere_reaches_the_holders_inbox_once(tmp_path):
    one, two = _pair(tmp_path)
    told = json.loads(ss.ok(["nerve", "tell", "--task", "t", "--json", "please cover the empty input"], two).stdout)
    assert {k: told[k] for k in ("id", "kind", "task", "machine", "pending")} == {
        "id": None, "kind": "note", "task": "t", "machine": "one", "pending": True}
    assert "held by machine one: pending delivery" in ss.ok(["nerve", "tell", "--task", "t", "and the unicode"],
                                                            two).stdout
    assert _inbox(one) == []  # not there before the holder syncs
    nerve_dir = Path(ss.build.git(one, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "nerve"
    notes_marker(nerve_dir, "t").unlink(missing_ok=True)
    _syncs(one, two)
    assert _inbox(one) == [("task", "t", "note", "please cover the empty input"),
                           ("task", "t", "note", "and the unicode")]
    assert notes_marker(nerve_dir, "t").exists()  # the agent's notes hook is woken
    view = json.loads(ss.ok(["nerve", "thread", "t", "--json"], one).stdout)
    humans = [(r["role"], r["content"], r["metadata"].get("from_machine")) for r in view["rounds"]]
    assert humans == [("human", "please cover the empty input", "two"), ("human", "and the unicode", "two")]
    shown = json.loads(ss.ok(["worker", "show", "t", "--json"], one).stdout)
    assert "please cover the empty input" in json.dumps(shown)
    proc = ss.run(["nerve", "tell", "--task", "nope", "hello"], two)
    assert proc.returncode != 0 and "unknown task 'nope'" in proc.stderr


def test_a_stop_told_elsewhere_reaches_the_holders_inbox_as_a_stop(tmp_path):
    one, two = _pair(tmp_path)
    told = json.loads(ss.ok(["nerve", "tell", "--task", "t", "--json", "stop"], two).stdout)
    assert (told["kind"], told["machine"], told["pending"]) == ("stop", "one", True)
    _syncs(one, two)
    assert _inbox(one) == [("task", "t", "stop", "stop")]
    assert _inbox(two) == []  # the teller's own inbox stays empty: the holder's queue is the one
