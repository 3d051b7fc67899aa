"""Notes delivered to a running agent: once per task, to whom and when, then acted on; all of it in the outbox
and in `git worker show`'s history."""

from __future__ import annotations

from git_nerve.bus import steer
from git_nerve.steer import delivery
from git_nerve.steer.tell import about, tell

from test_steer_drain import add_task, bus  # noqa: F401  (the fixture)


def test_a_note_is_delivered_once_with_reader_pid_and_time(bus):  # noqa: F811
    add_task(bus, "t1")
    add_task(bus, "t2")
    told = tell(bus, "use the new API", task="t1", kind="note")
    tell(bus, "unrelated", task="t2", kind="note")

    got = delivery.deliver(bus, "t1", reader="claude (hook)", via="hook", pid=4242)
    assert [m.id for m in got] == [told.id]
    assert delivery.deliver(bus, "t1", reader="mcp", via="mcp") == []  # the first door wins; never twice

    lines = [o for o in steer.outbox_after(bus.conn) if o.inbox_id == told.id]
    assert len(lines) == 1 and lines[0].kind == delivery.DELIVERED and lines[0].consumer == "task:t1"
    assert "claude (hook) (pid 4242) via hook" in lines[0].text and '"use the new API"' in lines[0].text

    entry = next(e for e in about(bus, "t1") if e.message.id == told.id)
    assert entry.status.startswith("delivered to claude (hook) (pid 4242) via hook at ")
    assert entry.as_dict()["delivery"]["delivered"]["pid"] == 4242
    # t2's note is untouched: still queued
    assert next(e for e in about(bus, "t2")).status.startswith("queued")


def test_acted_on_is_recorded_once_and_shown(bus):  # noqa: F811
    add_task(bus, "t1")
    a = tell(bus, "rename foo to bar", task="t1", kind="note")
    delivery.deliver(bus, "t1", reader="codex", via="prompt")
    b = tell(bus, "and add a test", task="t1", kind="note")  # queued after the delivery: not acted on yet

    done = delivery.acted(bus, "t1", how="commit 1a2b3c4")
    assert [d.inbox_id for d in done] == [a.id]
    assert delivery.acted(bus, "t1", how="again") == []

    states = {e.message.id: e.as_dict()["delivery"]["state"] for e in about(bus, "t1")}
    assert states == {a.id: "acted on", b.id: "queued"}
    acted_lines = [o.text for o in steer.outbox_after(bus.conn) if o.kind == delivery.ACTED]
    assert acted_lines == [f'note acted on by codex: commit 1a2b3c4; queued message: "rename foo to bar" '
                           f'(queued at {acted_lines[0].split("queued at ")[1][:-1]})']


def test_a_note_to_every_task_reaches_each_task_once_and_only_tasks_that_existed(bus):  # noqa: F811
    add_task(bus, "t1", at=1.0)
    told = tell(bus, "freeze the schema", all_tasks=True, kind="note")
    add_task(bus, "t2")  # spawned after the note: it never reaches t2
    assert [m.id for m in delivery.deliver(bus, "t1", reader="a", via="hook")] == [told.id]
    assert delivery.deliver(bus, "t2", reader="b", via="hook") == []


def test_the_text_handed_to_an_agent_is_the_persons_note_cleaned(bus):  # noqa: F811
    add_task(bus, "t1")
    tell(bus, "stop using \x1b[31mred\x1b[0m", task="t1", kind="note")
    text = delivery.for_agent(delivery.deliver(bus, "t1", reader="x", via="hook"))
    assert text.startswith("Notes from the person in charge of this task")
    assert "\x1b" not in text and "stop using" in text
    assert delivery.for_agent([]) == ""
