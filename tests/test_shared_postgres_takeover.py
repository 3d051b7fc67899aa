"""Issue 36, points 5 and 6 on PostgreSQL (a real server started by the tests): what was told to a task whose
holder went silent reaches the machine that takes it over, once, and the teller sees where; heartbeats renew a
machine's lease by the database's clock without any `git nerve sync` or listener."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests import shared_support as ss
from tests.pg_support import stop_listeners, team
from tests.waiting import wait_until


def _inbox(work: Path, task: str) -> list[tuple[str, str]]:
    from git_nerve.bus import steer

    with ss.bus(work) as b:
        return [(m.kind, m.text) for m in steer.about_task(b.conn, task, all_since=None)]


def test_notes_told_while_the_holder_is_silent_reach_the_machine_that_takes_over(tmp_path, db):
    one, two = team(tmp_path, db, ["one", "two"], lease=2, background=False, listen=False)
    try:
        ss.ok(["worker", "spawn", "t"], one)
        ss.ok(["worker", "start", "--task", "t"], one)
        ss.ok(["nerve", "sync"], one)
        ss.ok(["nerve", "sync"], two)
        told = json.loads(ss.ok(["nerve", "tell", "--task", "t", "--json", "cover the empty input"], two).stdout)
        assert (told["machine"], told["pending"]) == ("one", True)
        ss.ok(["nerve", "post", "--task", "t", "--role", "reviewer", "rename parse()"], two)
        ss.ok(["nerve", "sync"], two)
        time.sleep(2.5)  # one stays silent past the lease (the database's clock)
        ss.ok(["worker", "takeover", "t"], two)
        assert _inbox(two, "t") == [("note", "cover the empty input")]
        ss.ok(["nerve", "sync"], two)
        ss.ok(["nerve", "sync", "--rebuild"], two)
        assert _inbox(two, "t") == [("note", "cover the empty input")]  # once
        assert ("reviewer", "rename parse()", "two") in ss.rounds_of(two, "t")
        told = [d for d in json.loads(ss.ok(["nerve", "outbox", "--json"], two).stdout) if d.get("task")]
        assert [(d["kind"], d["status"], d["machine"]) for d in told] == [("note", "delivered", "two"),
                                                                            ("post", "delivered", "two")]
        ss.ok(["nerve", "sync"], one)  # one is back: fenced, it queues none of it
        assert ("note", "cover the empty input") not in _inbox(one, "t")
    finally:
        stop_listeners(tmp_path)


def test_heartbeats_renew_the_lease_on_postgres(tmp_path, db):
    """No listener, no `git nerve sync` on one: its agent's heartbeats alone keep its task for longer than the
    lease (each starts a background sync once a tenth of the lease passed: the database sees one)."""
    one, two = team(tmp_path, db, ["one", "two"], lease=2, listen=False)
    try:
        ss.ok(["worker", "spawn", "t"], one)
        ss.ok(["worker", "start", "--task", "t"], one)
        ss.ok(["nerve", "sync"], one)
        wt = Path(ss.row(one, "t").worktree)
        end = time.monotonic() + 3.5
        while time.monotonic() < end:  # beats for longer than the lease: the time passing is the point
            ss.ok(["worker", "heartbeat", "--status", "testing"], wt)
            time.sleep(0.4)
        proc = ss.run(["worker", "takeover", "t"], two)
        assert proc.returncode == 8 and "held by machine one" in proc.stderr, proc
        wait_until(lambda: ss.run(["worker", "takeover", "t"], two).returncode == 0, 30,
                   what="two taking the task over once one's heartbeats stopped", interval=0.5)
    finally:
        stop_listeners(tmp_path)
