"""The drain on a real bus: stop precedence, skip/add, notes, cursors per consumer, crash safety,
and `tell`'s validation (nothing queued on bad input)."""

from __future__ import annotations

import pytest

from git_nerve import clock
from git_nerve.bus import rounds, steer, workers
from git_nerve.bus.connection import Bus
from git_nerve.errors import UsageError
from git_nerve.steer.drain import QUEUE_CONSUMER, drain, task_consumer
from git_nerve.steer.queue import Queue
from git_nerve.steer.tell import about, tell


@pytest.fixture
def bus(tmp_path):
    b = Bus(tmp_path / "bus.db")
    yield b
    b.close()


def add_task(bus: Bus, task_id: str, state: str = "WORKING", *, at: float | None = None, approved_at: float | None = None):
    ts = clock.now() if at is None else at
    with bus.write() as conn:
        workers.insert(conn, workers.Worker(
            task_id=task_id, state=state, branch=f"feat/{task_id}", worktree=f"/nowhere/{task_id}", base="refs/heads/main",
            integration="main", description="", assigned_at=ts, state_changed_at=ts, last_heartbeat=None,
            last_activity=ts, approved_at=approved_at, heartbeat_status=None, progress=None,
        ))


def queue_message(bus: Bus, text: str, *, scope: str = "queue", kind: str | None = None, task_id: str | None = None,
                  target: str | None = None, ts: float | None = None) -> int:
    """Write an inbox row directly (for batches `tell` would refuse to build, e.g. a stale timestamp)."""
    from git_nerve.steer.parse import parse

    parsed = parse(text, kind)
    with bus.write() as conn:
        return steer.enqueue(conn, scope=scope, kind=parsed.kind, text=text, ts=ts or clock.now(), task_id=task_id,
                             target=target or parsed.target)


def outbox(bus: Bus) -> list[tuple[str | None, int | None, str, str]]:
    return [(o.consumer, o.inbox_id, o.kind, o.text) for o in steer.outbox_after(bus.conn)]


# -- stop precedence --------------------------------------------------------------------------


@pytest.mark.parametrize("order", [
    ["skip t2", "stop now", "add t3", "keep going"],
    ["stop now", "skip t2", "add t3", "keep going"],
    ["keep going", "add t3", "skip t2", "stop now"],
], ids=["middle", "first", "last"])
def test_stop_takes_precedence_wherever_it_is_in_the_batch(bus, order):
    for t in ("t2", "t3"):
        add_task(bus, t, "APPROVED", approved_at=clock.now())
    queue = Queue(workers.all_workers(bus.conn, states=("APPROVED",)))
    ids = {}
    for text in order:
        scope = "all" if text == "keep going" else "queue"
        ids[text] = queue_message(bus, text, scope=scope)
    stop_ts = clock.iso(steer.for_queue_after(bus.conn, ids["stop now"] - 1)[0].ts)

    result = drain(bus, QUEUE_CONSUMER, respond=queue.respond)
    queue.adopt()

    assert result.stop is True
    assert result.stop_message == f'stopped by queued message: "stop now" (queued at {stop_ts})'
    assert queue.tasks == ["t2", "t3"]  # neither the skip nor the add was applied
    lines = {inbox_id: text for _, inbox_id, _, text in outbox(bus)}
    assert lines[ids["stop now"]] == result.stop_message
    assert lines[ids["skip t2"]].startswith(f"skip t2: not applied, stopped by queued message #{ids['stop now']}; ")
    assert lines[ids["add t3"]].startswith("add t3: not applied")
    assert ids["keep going"] not in lines  # a note gets no outbox line
    assert [n.text for n in result.notes] == ["keep going"]
    assert result.lines == [t for _, _, _, t in outbox(bus)]


def test_two_stops_one_stop_line_and_the_task_consumer_sees_only_its_own(bus):
    add_task(bus, "t1")
    add_task(bus, "t2")
    first = queue_message(bus, "stop: tests are red", scope="task", task_id="t1")
    queue_message(bus, "stop for t2", scope="task", task_id="t2")
    second = queue_message(bus, "STOP", scope="task", task_id="t1")
    result = drain(bus, task_consumer("t1"), task_id="t1")
    assert [m.id for m in result.batch.messages] == [first, second]
    assert result.stop_message.startswith('stopped by queued message: "stop: tests are red" (queued at ')
    assert result.lines[1].startswith('stop: already stopping; queued message: "STOP" (queued at ')
    other = drain(bus, task_consumer("t2"), task_id="t2")
    assert other.stop and other.stop_message.startswith('stopped by queued message: "stop for t2"')


# -- skip and add -----------------------------------------------------------------------------


def test_skip_and_add_are_deduplicated_and_the_last_word_per_task_wins(bus):
    for t in ("t1", "t2", "t3"):
        add_task(bus, t, "APPROVED", approved_at=clock.now())
    for text in ("skip t1", "skip t1", "skip t2", "add t2", "add t3"):
        queue_message(bus, text)
    queue = Queue(workers.all_workers(bus.conn, states=("APPROVED",)))
    result = drain(bus, QUEUE_CONSUMER, respond=queue.respond)
    queue.adopt()
    assert result.skip == ("t1",) and result.add == ("t2", "t3")
    assert queue.tasks == ["t2", "t3"] and queue.skipped == ["t1"]
    heads = [line.split(";")[0] for line in result.lines]
    assert heads == [
        "skip t1: taken out of the merge queue",
        "skip t1: not in the merge queue, nothing to do",
        "skip t2: taken out of the merge queue",
        "add t2: put in the merge queue (position 1)",
        "add t3: already in the merge queue",
    ]


def test_add_puts_an_approved_task_back_at_its_approval_position_and_refuses_others(bus):
    t0 = clock.now()
    add_task(bus, "late", "APPROVED", approved_at=t0 + 3)
    add_task(bus, "early", "APPROVED", approved_at=t0 + 1)
    add_task(bus, "middle", "APPROVED", approved_at=t0 + 2)
    add_task(bus, "busy", "WORKING")
    queue = Queue(workers.all_workers(bus.conn, states=("APPROVED",)))
    assert queue.tasks == ["early", "middle", "late"]  # approval order, not spawn order
    queue_message(bus, "skip middle")
    drain(bus, QUEUE_CONSUMER, respond=queue.respond)
    queue.adopt()
    assert queue.tasks == ["early", "late"]
    queue_message(bus, "add middle")
    queue_message(bus, "add busy")
    result = drain(bus, QUEUE_CONSUMER, respond=queue.respond)
    queue.adopt()
    assert queue.tasks == ["early", "middle", "late"] and queue.skipped == []
    assert result.lines[0].startswith("add middle: put in the merge queue (position 2); queued message: \"add middle\"")
    assert result.lines[1].startswith("add busy: it is WORKING, not APPROVED; not queued")


# -- notes ------------------------------------------------------------------------------------


def test_a_note_becomes_a_human_round_at_once_and_the_drain_hands_it_back(bus):
    add_task(bus, "t1")
    told = tell(bus, "use the new logger", task="t1")
    assert told.kind == "note" and told.scope == "task" and told.rounds == (("t1", 1),)
    (r,) = rounds.load(bus.conn, "t1", [1])
    assert (r.role, r.content, r.metadata) == ("human", "use the new logger", {"inbox_id": told.id})
    result = drain(bus, task_consumer("t1"), task_id="t1")
    assert not result.stop and [n.text for n in result.notes] == ["use the new logger"]
    assert outbox(bus) == []


def test_a_note_to_all_reaches_every_live_task_only(bus):
    for t, state in (("a", "WORKING"), ("b", "IN_REVIEW"), ("done", "COMPLETED"), ("dead", "FAILED")):
        add_task(bus, t, state)
    told = tell(bus, "rebase on main today", all_tasks=True)
    assert told.scope == "all" and dict(told.rounds) == {"a": 1, "b": 1}
    assert rounds.last_round(bus.conn, "done") == 0 and rounds.last_round(bus.conn, "dead") == 0


def test_a_message_to_every_task_does_not_reach_tasks_spawned_after_it(bus):
    add_task(bus, "old", at=clock.now() - 100)
    queue_message(bus, "stop everything", scope="all", ts=clock.now() - 50)
    add_task(bus, "new")
    assert drain(bus, task_consumer("new"), task_id="new").stop is False
    assert drain(bus, task_consumer("old"), task_id="old").stop is True


# -- cursors ----------------------------------------------------------------------------------


def test_each_consumer_has_its_own_cursor_and_sees_each_message_once(bus):
    add_task(bus, "t1")
    add_task(bus, "t2", "APPROVED", approved_at=clock.now())
    tell(bus, "stop", task="t1")
    tell(bus, "stop", all_tasks=True)
    tell(bus, "skip t2")

    first = drain(bus, task_consumer("t1"), task_id="t1")
    assert [m.text for m in first.batch.messages] == ["stop", "stop"] and first.stop
    assert drain(bus, task_consumer("t1"), task_id="t1").batch.messages == ()  # seen once

    queue = drain(bus, QUEUE_CONSUMER)
    assert [(m.scope, m.kind) for m in queue.batch.messages] == [("all", "stop"), ("queue", "skip")]
    assert drain(bus, QUEUE_CONSUMER).batch.messages == ()

    # a message queued while no consumer runs waits for the next one
    told = tell(bus, "stop", task="t1")
    later = drain(bus, task_consumer("t1"), task_id="t1")
    assert [m.id for m in later.batch.messages] == [told.id]
    assert steer.cursor(bus.conn, task_consumer("t1")) == told.id
    assert steer.cursor(bus.conn, QUEUE_CONSUMER) == told.id - 1
    assert steer.cursor(bus.conn, task_consumer("t2")) == 0


def test_draining_never_deletes_or_edits_a_message(bus):
    add_task(bus, "t1")
    for text in ("stop", "note one", "stop again"):
        tell(bus, text, task="t1")
    before = steer.for_task_after(bus.conn, "t1", 0, all_since=None)
    drain(bus, task_consumer("t1"), task_id="t1")
    drain(bus, task_consumer("t1"), task_id="t1")
    assert steer.for_task_after(bus.conn, "t1", 0, all_since=None) == before
    assert [e.status for e in about(bus, "t1")] == [
        "acted on by task:t1", "queued (in the thread; no running agent has read it yet)", "acted on by task:t1"]


# -- crash between reading and acknowledging --------------------------------------------------


@pytest.mark.parametrize("fault_in", ["advance", "acknowledge"])
def test_a_crash_before_the_commit_loses_nothing_and_repeats_nothing(bus, monkeypatch, fault_in):
    add_task(bus, "t1")
    ids = [tell(bus, text, task="t1").id for text in ("stop", "note", "stop again")]
    real = getattr(steer, fault_in)
    calls = {"n": 0}

    def crash(*args, **kwargs):
        calls["n"] += 1
        if fault_in == "acknowledge" and calls["n"] == 1:
            return real(*args, **kwargs)  # the first outbox line is written, then the process "dies"
        raise RuntimeError("killed before the commit")

    monkeypatch.setattr(steer, fault_in, crash)
    with pytest.raises(RuntimeError, match="killed before the commit"):
        drain(bus, task_consumer("t1"), task_id="t1")
    assert outbox(bus) == [] and steer.cursor(bus.conn, task_consumer("t1")) == 0  # rolled back
    monkeypatch.setattr(steer, fault_in, real)

    again = drain(bus, task_consumer("t1"), task_id="t1")  # the restarted consumer
    assert [m.id for m in again.batch.messages] == ids and again.stop  # nothing lost
    assert [(c, i) for c, i, _, _ in outbox(bus)] == [(task_consumer("t1"), ids[0]), (task_consumer("t1"), ids[2])]
    assert drain(bus, task_consumer("t1"), task_id="t1").batch.messages == ()  # nothing repeated
    assert len(outbox(bus)) == 2


def test_a_crashed_drain_leaves_the_merge_queue_plan_unapplied(bus, monkeypatch):
    add_task(bus, "t1", "APPROVED", approved_at=clock.now())
    queue = Queue(workers.all_workers(bus.conn, states=("APPROVED",)))
    queue_message(bus, "skip t1")
    with monkeypatch.context() as crashing:  # not monkeypatch.undo(): that would undo the hermetic environment too
        crashing.setattr(steer, "advance", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("crash")))
        with pytest.raises(RuntimeError):
            drain(bus, QUEUE_CONSUMER, respond=queue.respond)
    assert queue.tasks == ["t1"]
    drain(bus, QUEUE_CONSUMER, respond=queue.respond)
    queue.adopt()
    assert queue.tasks == [] and queue.skipped == ["t1"]


def test_the_outbox_takes_one_line_per_consumer_message_and_kind(bus):
    add_task(bus, "t1")
    told = tell(bus, "stop", task="t1")
    with bus.write() as conn:
        assert steer.acknowledge(conn, consumer="x", inbox_id=told.id, kind="stop", text="a", ts=1.0) is True
        assert steer.acknowledge(conn, consumer="x", inbox_id=told.id, kind="stop", text="b", ts=2.0) is False
        assert steer.acknowledge(conn, consumer="y", inbox_id=told.id, kind="stop", text="c", ts=3.0) is True
    assert [t for _, _, _, t in outbox(bus)] == ["a", "c"]


def test_nothing_new_takes_no_write_lock(bus, monkeypatch):
    add_task(bus, "t1")
    tell(bus, "stop", task="t1")
    drain(bus, task_consumer("t1"), task_id="t1")
    monkeypatch.setattr(Bus, "write", lambda self: pytest.fail("took the write lock"))
    assert drain(bus, task_consumer("t1"), task_id="t1").batch.messages == ()


# -- tell: bad input queues nothing -----------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"text": "   \n"}, "empty message"),
    ({"text": "hello", "task": "ghost"}, "unknown task 'ghost'"),
    ({"text": "hello", "task": "T1"}, "unknown task 'T1' (did you mean 't1'?)"),
    ({"text": "now", "kind": "halt", "task": "t1"}, "unknown kind 'halt'"),
    ({"text": "skip ghost"}, "unknown task 'ghost'; to send the text as a note, pass --kind note"),
    ({"text": "t1", "kind": "skip", "task": "t1"}, "skip steers the merge queue"),
    ({"text": "hello"}, "a note needs a task"),
    ({"text": "hello", "task": "t1", "all_tasks": True}, "--task and --all exclude each other"),
    ({"text": "a\0b", "task": "t1"}, "NUL"),
])
def test_bad_input_is_refused_and_nothing_is_queued(bus, kwargs, message):
    add_task(bus, "t1")
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        tell(bus, **kwargs)
    assert steer.last_id(bus.conn) == 0 and rounds.last_round(bus.conn, "t1") == 0


def test_where_messages_go(bus):
    add_task(bus, "t1")
    add_task(bus, "t2")
    assert (tell(bus, "skip the slow test", task="t1").kind, tell(bus, "x", task="t1").scope) == ("note", "task")
    stop = tell(bus, "stop")
    assert (stop.kind, stop.scope, stop.task_id) == ("stop", "queue", None)
    here = tell(bus, "stop", here_task="t2")
    assert (here.scope, here.task_id) == ("task", "t2")
    skip = tell(bus, "skip t1 for now", here_task="t2")
    assert (skip.kind, skip.scope, skip.target) == ("skip", "queue", "t1")
    note = tell(bus, "careful with the schema", here_task="t2")
    assert note.rounds == (("t2", 1),)
