"""The lifecycle through the CLI: the happy path, every command from every state (allowed,
idempotent or refused with exit 3), and running each command twice."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.bus import messages
from git_nerve.worker.states import replay

STATES = ["ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED", "COMPLETED", "FAILED"]

#: command -> state -> outcome: a new state, "=" (succeeds, nothing changes) or an exit code (state unchanged)
MATRIX = {
    "start": {"ASSIGNED": "WORKING", "WORKING": "=", "CONFLICTED": 6, "IN_REVIEW": 3, "APPROVED": 3, "COMPLETED": 3, "FAILED": 3},
    "done": {"ASSIGNED": 3, "WORKING": "IN_REVIEW", "CONFLICTED": 6, "IN_REVIEW": "=", "APPROVED": "=", "COMPLETED": "=", "FAILED": 3},
    "approve": {"ASSIGNED": 3, "WORKING": 3, "CONFLICTED": 3, "IN_REVIEW": "APPROVED", "APPROVED": "=", "COMPLETED": 3, "FAILED": 3},
    "request-changes": {"ASSIGNED": 3, "WORKING": "=", "CONFLICTED": 3, "IN_REVIEW": "WORKING", "APPROVED": "WORKING",
                        "COMPLETED": 3, "FAILED": 3},
    "merge": {"ASSIGNED": 3, "WORKING": 3, "CONFLICTED": 3, "IN_REVIEW": 3, "APPROVED": "COMPLETED", "COMPLETED": "=", "FAILED": 3},
    "cancel": {"ASSIGNED": "FAILED", "WORKING": "FAILED", "CONFLICTED": "FAILED", "IN_REVIEW": "FAILED", "APPROVED": "FAILED",
               "COMPLETED": 3, "FAILED": "="},
    "retry": {"ASSIGNED": "=", "WORKING": 3, "CONFLICTED": 3, "IN_REVIEW": 3, "APPROVED": 3, "COMPLETED": 3, "FAILED": "ASSIGNED"},
    "fail": {"ASSIGNED": "FAILED", "WORKING": "FAILED", "CONFLICTED": "FAILED", "IN_REVIEW": 3, "APPROVED": 3, "COMPLETED": 3,
             "FAILED": "="},
}


def run_command(gw, work, wt, command: str, task_id: str):
    """Agent commands run inside the worktree when it exists (as an agent would); the rest from the main checkout."""
    if command in ("start", "done"):
        args = [command, "--allow-empty"] if command == "done" else [command]  # emptiness: tests/test_traps.py
        return gw(args, wt) if wt.is_dir() else gw([*args, "--task", task_id], work)
    if command == "fail":
        return gw(["fail", "gave up"], wt) if wt.is_dir() else gw(["fail", "gave up", "--task", task_id], work)
    return gw([command, task_id], work)


def to_state(work, task_id: str, state: str):
    return wk.drive(work, task_id, state, greeting=f"hello from {task_id}" if state == "CONFLICTED" else None)


def assert_log_replays(work, task_id: str) -> None:
    with closing(sqlite3.connect(wk.bus_path(work))) as conn:
        events = [(m.kind, m.payload.get("from"), m.payload["to"]) for m in messages.for_task(conn, task_id)
                  if m.kind in ("task_assign", "state_change")]
    assert replay(events) == wk.state(work, task_id)


def test_happy_path_end_to_end(repo, gw):
    work = repo.work
    res = gw("spawn t1 -d 'a feature'", work)
    assert res.code == 0, res
    wt = wk.worktree(work, "t1")
    assert gw("start", wt).code == 0
    assert gw("heartbeat --status coding --progress 0.5", wt / "src").code == 0
    build.commit_file(wt, "feature.txt", "feature\n")
    res = gw("done", wt)
    assert res.code == 0 and "Ready for review: t1" in res.out, res
    res = gw("approve t1 --by alice --comment LGTM", work)
    assert res.code == 0 and "IN_REVIEW -> APPROVED" in res.out, res
    res = gw("merge t1", work)
    assert res.code == 0 and "Merged: t1 into main" in res.out, res
    assert wk.state(work, "t1") == "COMPLETED"
    assert (work / "feature.txt").read_text() == "feature\n"  # the clean main checkout followed
    assert git(work, "log", "-1", "--format=%P", "main").count(" ") == 1  # a real --no-ff merge
    lifecycle_kinds = [k for k in wk.kinds(work, "t1") if k not in ("heartbeat", "commit", "rewrite", "push")]
    assert lifecycle_kinds == [
        "task_assign", "state_change", "state_change", "review_request",
        "state_change", "review_approved", "state_change", "merged", "cleanup",
    ]
    assert wk.kinds(work, "t1").count("heartbeat") >= 2  # start's and the explicit one
    assert_log_replays(work, "t1")


@pytest.mark.parametrize("state", STATES)
def test_commands_that_change_nothing_leave_everything_as_it_was(repo, gw, state):
    """Every refused command exits with its code and moves nothing; every idempotent one succeeds."""
    work = repo.work
    wt = to_state(work, "t1", state)
    before_refs = git(work, "for-each-ref")
    before_msgs = len(wk.kinds(work, "t1"))
    for command, outcomes in MATRIX.items():
        expected = outcomes[state]
        if expected not in (3, 6, "="):
            continue
        res = run_command(gw, work, wt, command, "t1")
        want = 0 if expected == "=" else expected
        assert res.code == want, (command, state, res)
        if want:
            assert res.err.startswith("error: ") and "Traceback" not in res.err, res
        assert wk.state(work, "t1") == state, command
    assert git(work, "for-each-ref") == before_refs
    assert len(wk.kinds(work, "t1")) == before_msgs  # nothing published (no-op retries say so, write nothing)
    assert_log_replays(work, "t1")


CHANGES = [(cmd, state, to) for cmd, outcomes in MATRIX.items() for state, to in outcomes.items() if to in STATES]


@pytest.mark.parametrize("command,state,expected", CHANGES, ids=[f"{c}-{s}" for c, s, _ in CHANGES])
def test_every_allowed_transition(repo, gw, command, state, expected):
    work = repo.work
    wt = to_state(work, "t1", state)
    res = run_command(gw, work, wt, command, "t1")
    assert res.code == 0, res
    assert wk.state(work, "t1") == expected
    assert_log_replays(work, "t1")
    # running it again is a no-op success
    assert MATRIX[command][expected] == "="
    again = run_command(gw, work, wk.worktree(work, "t1"), command, "t1")
    assert again.code == 0, again
    assert wk.state(work, "t1") == expected


def test_refused_transition_names_the_state_and_what_to_do(repo, gw):
    wk.drive(repo.work, "t1", "ASSIGNED")
    res = gw("approve t1", repo.work)
    assert res.code == 3
    assert res.err.strip() == "error: cannot approve t1: it is ASSIGNED (run `git worker start` first)"
    wk.drive(repo.work, "t2", "FAILED")
    res = gw("merge t2", repo.work)
    assert res.code == 3 and "it is FAILED" in res.err and "merge needs APPROVED" in res.err


def test_unknown_task_is_exit_2(repo, gw):
    wk.spawn(repo.work, "t1")
    for args in (["approve", "nope"], ["merge", "nope"], ["cancel", "nope"], ["retry", "nope"], ["show", "nope"],
                 ["request-changes", "nope"]):
        res = gw(args, repo.work)
        assert res.code == 2 and "unknown task 'nope'" in res.err, (args, res)


def test_agent_commands_outside_a_worker_worktree_need_task(repo, gw):
    wk.spawn(repo.work, "t1")
    for args in (["start"], ["done"], ["fail", "why"], ["heartbeat"]):
        res = gw(args, repo.work)
        assert res.code == 2 and "--task" in res.err, (args, res)


def test_agent_commands_find_their_task_from_a_subdirectory(repo, gw):
    wt = wk.spawn(repo.work, "t1")
    wk.spawn(repo.work, "t2")
    assert gw("start", wt / "src").code == 0
    assert wk.state(repo.work, "t1") == "WORKING" and wk.state(repo.work, "t2") == "ASSIGNED"
    assert gw("start --task t2", wt / "docs").code == 0  # --task overrides the worktree's own task
    assert wk.state(repo.work, "t2") == "WORKING"


def test_fail_needs_a_reason(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    assert gw(["fail", "  "], wt).code == 2
    res = gw(["fail", "tests do not build"], wt)
    assert res.code == 0 and wk.state(repo.work, "t1") == "FAILED"
    with closing(sqlite3.connect(wk.bus_path(repo.work))) as conn:
        failed = messages.for_task(conn, "t1", kinds=("task_failed",))
    assert failed[-1].payload == {"reason": "tests do not build", "by": "agent"}


def test_request_changes_reaches_the_thread_and_approval_resets(repo, gw):
    wt = wk.drive(repo.work, "t1", "APPROVED")
    assert wk.row(repo.work, "t1").approved_at is not None
    res = gw(["request-changes", "t1", "--comment", "handle the empty name"], repo.work)
    assert res.code == 0 and "APPROVED -> WORKING" in res.out
    assert wk.row(repo.work, "t1").approved_at is None
    with closing(sqlite3.connect(wk.bus_path(repo.work))) as conn:
        rounds = conn.execute("SELECT role, content FROM rounds WHERE thread_id = 't1'").fetchall()
    assert rounds[-1] == ("reviewer", "handle the empty name")
    build.commit_file(wt, "fix.txt", "fixed\n")
    assert gw("done", wt).code == 0 and wk.state(repo.work, "t1") == "IN_REVIEW"


def test_heartbeat_is_idempotent_and_updates_liveness(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    first = wk.row(repo.work, "t1").last_heartbeat
    for _ in range(2):
        res = gw("heartbeat --status testing --progress 0.25", wt)
        assert res.code == 0 and res.out.startswith("heartbeat: t1 at "), res
    w = wk.row(repo.work, "t1")
    assert w.state == "WORKING" and w.last_heartbeat >= first
    assert (w.heartbeat_status, w.progress) == ("testing", 0.25)
    assert gw("heartbeat --progress 2", wt).code == 2


def test_retry_after_a_crash_between_state_change_and_worktree_is_finished_by_retry(repo, gw):
    wt = wk.drive(repo.work, "t1", "FAILED")
    git(repo.work, "worktree", "remove", "--force", str(wt))
    from git_nerve.bus import workers
    from git_nerve.bus.connection import Bus

    with closing(Bus(wk.bus_path(repo.work))) as bus, bus.write() as conn:  # as if retry died after its CAS
        assert workers.set_state(conn, "t1", "FAILED", "ASSIGNED", 0.0)
    res = gw("retry t1", repo.work)
    assert res.code == 0 and "already ASSIGNED" in res.out, res
    assert git(wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"


def test_conflicted_back_to_working_after_aborting_the_rebase(repo, gw):
    wt = wk.drive(repo.work, "t1", "CONFLICTED", greeting="hey")
    res = gw("start", wt)
    assert res.code == 6 and "still in progress" in res.err and "git rebase --abort" in res.err, res
    git(wt, "rebase", "--abort")
    res = gw("start", wt)
    assert res.code == 0 and "CONFLICTED -> WORKING" in res.out, res
    assert not wk.rebase_in_progress(wt)
    res = gw("done", wt)  # still conflicts: back to CONFLICTED with git's rebase stopped again
    assert res.code == 6 and wk.state(repo.work, "t1") == "CONFLICTED" and wk.rebase_in_progress(wt)
    assert_log_replays(repo.work, "t1")


def test_a_context_file_that_is_a_symlink_is_refused(repo, gw, tmp_path):
    wt = wk.spawn(repo.work, "t1")
    ctx = Path(git(wt, "rev-parse", "--path-format=absolute", "--git-dir")) / "nerve" / ".worker-ctx.json"
    assert ctx.is_file()
    decoy = tmp_path / "decoy.json"
    decoy.write_text(ctx.read_text().replace('"t1"', '"t2"'))
    ctx.unlink()
    ctx.symlink_to(decoy)
    res = gw("start", wt)
    assert res.code == 2 and "symlink" in res.err, res
    assert wk.state(repo.work, "t1") == "ASSIGNED"
