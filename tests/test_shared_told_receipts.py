"""Issue 36 point 5 at the bus: which notes and posts a holder delivers (other machines' and its own, told while
another machine held the task), the receipt each delivery leaves, and what the teller sees from receipts
(:func:`git_nerve.bus.told.sent`). No git: the cache's tables filled as a sync would."""

from __future__ import annotations

import json

import pytest

from git_nerve import clock
from git_nerve.bus import messages, steer, told, workers
from git_nerve.bus import shared as cache
from git_nerve.bus.connection import Bus


@pytest.fixture
def bus(tmp_path):
    (tmp_path / "nerve").mkdir()
    b = Bus(tmp_path / "nerve" / "bus.db")
    with b.write() as conn:
        cache.ensure(conn)
        cache.set_meta(conn, cache.MACHINE, "two")
    yield b
    b.close()


def _row(bus: Bus, task: str, state: str = "ASSIGNED") -> None:
    ts = clock.now()
    with bus.write() as conn:
        workers.insert(conn, workers.Worker(
            task_id=task, state=state, branch=f"feat/{task}", worktree=f"/nowhere/{task}", base="refs/heads/main",
            integration="main", description="", assigned_at=ts, state_changed_at=ts, last_heartbeat=None,
            last_activity=ts, approved_at=None, heartbeat_status=None, progress=None))


def _claim(bus: Bus, task: str, owner: str, state: str = "ASSIGNED") -> None:
    with bus.write() as conn:
        cache.put_claim(conn, cache.Claim(task, owner, owner, state, "takeover", 3, "0" * 40, clock.now()))


def _event(bus: Bus, eid: str, machine: str, task: str, kind: str, payload: dict) -> None:
    with bus.write() as conn:
        cache.add_events(conn, [{"id": eid, "machine": machine, "ts": clock.now(), "task": task, "kind": kind,
                                 "payload": payload}])


def _inbox(bus: Bus, task: str) -> list[tuple[str, str]]:
    return [(m.kind, m.text) for m in steer.about_task(bus.conn, task, all_since=None)]


def _receipts(bus: Bus) -> list[dict]:
    return [json.loads(r[0]) for r in bus.conn.execute("SELECT payload FROM messages WHERE kind = ?", (cache.RECEIPT,))]


def test_the_new_holder_queues_its_own_and_others_notes_once_and_leaves_receipts(bus, tmp_path):
    _claim(bus, "t", "one", "WORKING")
    with bus.write() as conn:  # told here while one held t
        own = messages.publish(conn, "t", cache.TELL_NOTE, {"kind": "note", "text": "mine", "holder": "one"}, 1.0)
    _event(bus, "three:m4", "three", "t", cache.TELL_NOTE, {"kind": "stop", "text": "stop", "holder": "one"})
    _event(bus, "three:m5", "three", "t", cache.TELL_NOTE, {"kind": "note", "text": "one had it", "holder": "one"})
    _event(bus, "one:m9", "one", "t", cache.RECEIPT, {"event": "three:m5", "teller": "three", "what": "note",
                                                       "inbox_id": 1})
    _event(bus, "evil:m1", "evil", "t", cache.RECEIPT, {"what": "note"})  # no event: suppresses nothing
    assert [s.status for s in told.sent(bus.conn, "two", "t")] == ["pending delivery on one (queued there at its "
                                                                    "next sync)"]
    with bus.write() as conn:
        assert told.deliver(conn, tmp_path / "nerve", "two") == []  # not held here: nothing
    _row(bus, "t")
    _claim(bus, "t", "two")
    assert told.deliver_held(bus, "two") == ["t", "t"]
    assert _inbox(bus, "t") == [("note", "mine"), ("stop", "stop")]  # one's delivery of three:m5 counts
    assert told.deliver_held(bus, "two") == []  # once
    assert sorted(r["event"] for r in _receipts(bus)) == sorted([f"two:m{own}", "three:m4"])
    (sent,) = told.sent(bus.conn, "two", "t")
    assert (sent.what, sent.delivered, sent.machine) == ("note", True, "two") and "delivered on two" in sent.status


def test_a_note_to_a_finished_task_is_refused_with_a_receipt_and_the_teller_sees_why(bus, tmp_path):
    _row(bus, "t", "COMPLETED")
    _claim(bus, "t", "two", "COMPLETED")
    _event(bus, "three:m4", "three", "t", cache.TELL_NOTE, {"kind": "note", "text": "too late", "holder": "two"})
    told.deliver_held(bus, "two")
    assert _inbox(bus, "t") == []
    (r,) = _receipts(bus)
    assert r["event"] == "three:m4" and "t was COMPLETED on two when it arrived" in r["refused"]


def test_the_teller_reads_delivered_and_refused_from_the_holders_receipts(bus):
    _claim(bus, "t", "one")
    with bus.write() as conn:
        a = messages.publish(conn, "t", cache.TELL_NOTE, {"kind": "note", "text": "a", "holder": "one"}, 1.0)
        b = messages.publish(conn, "t", cache.THREAD_POST, {"role": "reviewer", "content": "b", "holder": "one"}, 2.0)
        c = messages.publish(conn, "t", cache.TELL_NOTE, {"kind": "note", "text": "c", "holder": "one"}, 3.0)
    _event(bus, "one:m1", "one", "t", cache.RECEIPT, {"event": f"two:m{a}", "what": "note", "inbox_id": 7})
    _event(bus, "one:m2", "one", "t", cache.RECEIPT, {"event": f"two:m{b}", "what": "post", "round": 4})
    _event(bus, "one:m3", "one", "t", cache.RECEIPT, {"event": f"two:m{c}", "what": "note", "refused": "no"})
    assert [(s.what, s.delivered, s.status) for s in told.sent(bus.conn, "two")] == [
        ("note", True, "delivered on one (inbox #7)"), ("post", True, "delivered on one (round 4)"),
        ("note", False, "not delivered on one: no")]
    _claim(bus, "u", "one", "COMPLETED")
    with bus.write() as conn:
        messages.publish(conn, "u", cache.TELL_NOTE, {"kind": "note", "text": "d", "holder": "one"}, 4.0)
    assert told.sent(bus.conn, "two", "u")[0].status.startswith("not delivered: u became COMPLETED on one")


def test_a_receipt_of_a_machine_that_never_held_the_task_suppresses_nothing(bus, tmp_path):
    """Issue 36: a record from another machine is checked before it changes anything. A peer that never held t
    writes receipts for a note and a post to t into its own log (or for them under a task it did hold): the holder
    still delivers both, and the teller is not told they were delivered on the forger."""
    _claim(bus, "u", "evil")  # evil held another task
    _claim(bus, "t", "one", "WORKING")
    _event(bus, "three:m5", "three", "t", cache.TELL_NOTE, {"kind": "note", "text": "told", "holder": "one"})
    _event(bus, "three:m6", "three", "t", cache.THREAD_POST, {"role": "reviewer", "content": "posted", "holder": "one"})
    with bus.write() as conn:
        mine = messages.publish(conn, "t", cache.TELL_NOTE, {"kind": "note", "text": "mine", "holder": "one"}, 1.0)
    for n, (task, event) in enumerate([("t", "three:m5"), ("u", "three:m6"), ("t", f"two:m{mine}")]):
        _event(bus, f"evil:m{n}", "evil", task, cache.RECEIPT, {"event": event, "teller": event.split(":")[0],
                                                                 "what": "note", "inbox_id": 99})
    (sent,) = told.sent(bus.conn, "two", "t")
    assert sent.delivered is None and sent.machine == "one" and "evil" not in sent.status, sent
    _row(bus, "t", "WORKING")
    _claim(bus, "t", "two", "WORKING")  # two took t over: it delivers what nobody who held t delivered
    assert told.deliver_held(bus, "two") == ["t", "t"]  # both notes
    assert sorted(_inbox(bus, "t")) == [("note", "mine"), ("note", "told")]
    assert bus.conn.execute("SELECT event_id FROM shared_posts").fetchall() == [("three:m6",)]  # the post too
    (sent,) = told.sent(bus.conn, "two", "t")
    assert sent.delivered is True and "delivered on two" in sent.status, sent


def test_a_cache_of_an_older_version_keeps_the_receipts_it_counted(tmp_path):
    """Upgrading: the receipts a cache ingested before it knew holders keep counting (no note delivered again)."""
    (tmp_path / "nerve").mkdir()
    b = Bus(tmp_path / "nerve" / "bus.db")
    try:
        with b.write() as conn:
            cache.ensure(conn)
            conn.execute("DROP TABLE shared_holders")  # as an older version left it
            cache.add_events(conn, [{"id": "one:m1", "machine": "one", "ts": 1.0, "task": "t", "kind": cache.RECEIPT,
                                     "payload": {"event": "three:m5", "what": "note", "inbox_id": 1}}])
            cache.ensure(conn)
        assert b.conn.execute("SELECT task_id, machine FROM shared_holders").fetchall() == [("t", "one")]
    finally:
        b.close()
