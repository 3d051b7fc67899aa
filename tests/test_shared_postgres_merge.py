"""Review and merge across machines on PostgreSQL (issue 29): clones of one origin, each its own machine, on a real
PostgreSQL server started here (tests/pg_support.py)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fixtures.repos import build
from tests import shared_support as ss
from tests.pg_support import query, schema_of, team


pytestmark = pytest.mark.real

_row = ss.row
_schema = schema_of
_query = query


def _ready(work: Path, task: str, *, approve: bool = True) -> str:
    return ss.ready(work, task, approve=approve, sync=False)


_rounds = ss.rounds_of


_merges_of = ss.merges_of


def _status(work: Path) -> dict:
    return {r["task_id"]: r for r in json.loads(ss.ok(["worker", "status", "--json"], work).stdout)}


def test_another_machine_merges_the_task_and_the_holder_follows_at_its_sync(tmp_path, db):
    a, b, c = team(tmp_path, db, ["a", "b", "c"], background=False, listen=False)
    origin = tmp_path / "srv" / "project.git"
    tip = _ready(a, "t", approve=False)
    approved = ss.ok(["worker", "approve", "t", "--comment", "looks good from b"], b)  # b does not hold it
    assert "Approved: t (IN_REVIEW -> APPROVED)" in approved.stdout and "Held by machine a" in approved.stdout
    assert _row(b, "t") is None and _row(a, "t").state == "IN_REVIEW"
    for w in (a, b, a):  # its events (the branch, the reviewed tip) reach the database; b's comment reaches a
        ss.ok(["nerve", "sync"], w)
    assert _row(a, "t").state == "APPROVED"
    assert ("reviewer", "looks good from b", "b") in _rounds(a, "t")
    proc = ss.ok(["worker", "merge", "t"], c)
    assert "Merged: t into main" in proc.stdout and "(pushed)" in proc.stdout, proc.stdout
    assert "Held by machine a" in proc.stdout
    made = _merges_of(origin, tip)
    assert len(made) == 1 and build.git(origin, "rev-parse", "main").strip() == made[0]
    assert _status(c)["t"]["state"] == "COMPLETED" and _status(c)["t"]["machine"] == "a"
    history = _query(db, f"SELECT state, verb, machine, owner FROM {_schema(a)}.transitions WHERE task_id = 't' "
                         "ORDER BY version")
    assert history[-2:] == [("APPROVED", "approve", "b", "a"), ("COMPLETED", "merge", "c", "a")]
    worktree = Path(_row(a, "t").worktree)
    assert _row(a, "t").state == "APPROVED"  # a learns at its next sync
    ss.ok(["nerve", "sync"], c)  # (c's own message, with the merge commit, published: the background sync's job)
    synced = ss.ok(["nerve", "sync"], a)
    assert "t was merged by machine c: COMPLETED here" in synced.stdout, synced.stdout
    # the holder's worktree follows (issue 36): cleaned up as its own merge would, archived first, branch kept
    assert "t was merged by machine c: its worktree removed (archived under refs/nerve/archive/t)" in synced.stdout
    assert _row(a, "t").state == "COMPLETED" and not worktree.exists()
    assert build.git(a, "rev-parse", "refs/nerve/archive/t").strip() == tip
    shown = ss.ok(["worker", "show", "t"], a).stdout
    assert made[0][:10] in shown  # the merge commit c published, in a's log
    cleaned = ss.ok(["worker", "merge", "t"], a)  # nothing left to clean up
    assert "already COMPLETED" in cleaned.stdout and "Worktree removed" not in cleaned.stdout, cleaned.stdout
    assert len(_merges_of(origin, tip)) == 1


def test_another_machine_requests_changes_and_the_agent_gets_the_comment(tmp_path, db):
    a, b = team(tmp_path, db, ["a", "b"], background=False, listen=False)
    _ready(a, "t", approve=False)
    proc = ss.ok(["worker", "request-changes", "t", "--comment", "rename the helper"], b)
    assert "Changes requested: t (IN_REVIEW -> WORKING)" in proc.stdout and "Held by machine a" in proc.stdout
    refused = ss.run(["worker", "approve", "t"], b)  # the claim moved: nothing to approve
    assert refused.returncode == 3 and "cannot approve t: it is WORKING on machine a" in refused.stderr, refused
    for w in (b, a):
        ss.ok(["nerve", "sync"], w)
    assert _row(a, "t").state == "WORKING" and _row(a, "t").approved_at is None
    assert ("reviewer", "rename the helper", "b") in _rounds(a, "t")
    shown = ss.ok(["worker", "show", "t"], a).stdout
    assert "IN_REVIEW -> WORKING (request changes for)" in shown and "rename the helper" in shown
    ss.ok(["worker", "done", "--task", "t"], a)  # the holder goes on as after a local request-changes
    assert _row(a, "t").state == "IN_REVIEW"


def test_two_machines_merging_one_task_at_once_make_one_merge(tmp_path, db):
    a, b, c = team(tmp_path, db, ["a", "b", "c"], background=False, listen=False)
    origin = tmp_path / "srv" / "project.git"
    tip = _ready(a, "t")
    for w in (a, b, c):
        ss.ok(["nerve", "sync"], w)
    won, loser = ss.merge_at_once("t", {"b": b, "c": c})
    assert loser.returncode == 8 and len(loser.stderr.splitlines()) == 1, loser
    assert f"task t was merged by machine {won} (held by machine a); nothing changed here" in loser.stderr
    assert len(_merges_of(origin, tip)) == 1
    assert _query(db, f"SELECT state, machine FROM {_schema(a)}.claims WHERE task_id = 't'") == [("COMPLETED", won)]


def test_merge_all_on_three_machines_at_once_merges_every_task_exactly_once(tmp_path, db):
    machines = ["a", "b", "c"]
    works = team(tmp_path, db, machines, background=False, listen=False)
    origin = tmp_path / "srv" / "project.git"
    tips = {}
    for i, m in enumerate("aabaabaab"):  # 9 APPROVED tasks, approved in this order: 6 on a, 3 on b, none on c
        tips[f"q{i}"] = _ready(works[machines.index(m)], f"q{i}")
    for w in works:
        ss.ok(["nerve", "sync"], w)
    barrier = threading.Barrier(3)

    def merge_all(work: Path):
        barrier.wait()
        return ss.run(["worker", "merge", "--all", "--json"], work, timeout=300)

    with ThreadPoolExecutor(max_workers=3) as pool:
        procs = dict(zip(machines, pool.map(merge_all, works)))
    reported = {}
    for m, p in procs.items():
        assert p.returncode == 0, (m, p.stdout, p.stderr)
        reported[m] = [r["task_id"] for r in json.loads(p.stdout)["merged"]]
    merged_by = [t for ts in reported.values() for t in ts]
    assert sorted(merged_by) == sorted(tips), reported  # each task reported once, by one machine
    assert all(reported.values()), reported  # the runs shared the queue: c, which holds none, merged some too
    for task, tip in tips.items():
        assert len(_merges_of(origin, tip)) == 1, task  # merged exactly once on origin
    claims = dict(_query(db, f"SELECT task_id, state FROM {_schema(works[0])}.claims"))
    assert claims == {t: "COMPLETED" for t in tips}
    history = _query(db, f"SELECT task_id, machine FROM {_schema(works[0])}.transitions WHERE verb = 'merge'")
    assert sorted(history) == sorted((t, m) for m, ts in reported.items() for t in ts)  # none reports another's
    for m, ts in reported.items():  # each run took its tasks in the queue's (approval) order
        assert ts == sorted(ts, key=lambda t: int(t[1:])), (m, ts)


def test_a_conflict_met_by_another_machines_merge_sends_the_task_back_on_its_holder(tmp_path, db):
    a, b, c = team(tmp_path, db, ["a", "b", "c"], background=False, listen=False)
    origin = tmp_path / "srv" / "project.git"
    _ready(a, "t")
    build.commit_file(b, "t.txt", "b's own t.txt, straight on main\n")  # the same file, another content
    build.git(b, "push", "-q", "origin", "HEAD:main")
    before = build.git(origin, "rev-parse", "main").strip()
    ss.ok(["nerve", "sync"], a)
    proc = ss.run(["worker", "merge", "t"], c)
    assert proc.returncode == 6 and "merging t into main conflicts; the task is back to WORKING (on machine a" \
        in proc.stderr, proc
    assert build.git(origin, "rev-parse", "main").strip() == before  # nothing pushed
    assert _query(db, f"SELECT state, verb, machine FROM {_schema(a)}.claims WHERE task_id = 't'") == \
        [("WORKING", "merge", "c")]
    for w in (c, a):
        ss.ok(["nerve", "sync"], w)
    assert _row(a, "t").state == "WORKING"
    assert "merge_conflict" in ss.ok(["worker", "show", "t"], a).stdout


def test_the_holders_listener_follows_another_machines_approval_with_no_command_run_there(tmp_path, db):
    """With the listeners on (the default), the holder's row follows another machine's approval, and the
    reviewer's comment joins the agent's thread, within seconds, while nobody runs a command on the holder."""
    from tests.pg_support import listening
    from waiting import wait_until  # noqa: I001

    a, b = team(tmp_path, db, ["a", "b"])
    _ready(a, "t", approve=False)
    wait_until(lambda: listening(a), timeout=10)
    ss.ok(["nerve", "sync"], b)  # b learns of t (its listener would too)
    ss.ok(["worker", "approve", "t", "--comment", "ship it, from b"], b)
    wait_until(lambda: _row(a, "t").state == "APPROVED", timeout=5)
    wait_until(lambda: ("reviewer", "ship it, from b", "b") in _rounds(a, "t"), timeout=10)


def test_a_holder_that_missed_the_approval_follows_the_merge_made_on_a_third_machine(tmp_path, db):
    """Approved on b, merged on c, and the holder a synced at neither: at its next sync a's row goes through the
    approval it missed to COMPLETED (it used to stay IN_REVIEW for good), with both steps in its log."""
    from git_nerve.bus import messages

    a, b, c = team(tmp_path, db, ["a", "b", "c"], background=False, listen=False)
    _ready(a, "t", approve=False)
    ss.ok(["nerve", "sync"], a)  # t's events (its branch, the tip to review) reach the database
    ss.ok(["worker", "approve", "t", "--comment", "fine by b"], b)
    ss.ok(["nerve", "sync"], b)
    ss.ok(["worker", "merge", "t"], c)
    ss.ok(["nerve", "sync"], c)
    assert _row(a, "t").state == "IN_REVIEW"
    ss.ok(["nerve", "sync"], a)
    assert _row(a, "t").state == "COMPLETED"
    with ss.bus(a) as bus:
        kinds = [(m.kind, m.payload.get("machine")) for m in messages.for_task(bus.conn, "t")]
    assert ("review_approved", "b") in kinds and ("merged", "c") in kinds
    assert kinds.index(("review_approved", "b")) < kinds.index(("merged", "c"))
