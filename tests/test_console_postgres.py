"""The console on PostgreSQL (issue 29): machine b's console offers the review and merge of a task machine a holds,
as `git worker approve / request-changes / merge` run them from any machine there, behind the console's token; the
task's diff comes from the branch a pushed. Clones of one origin, each its own machine, on a real PostgreSQL
server started here (tests/pg_support.py); the real `git nerve console` (tests/console_support.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console_support import Browser, Console, wait_until, worker_row
from fixtures.repos import build
from tests import shared_support as ss
from tests.pg_support import team

pytestmark = pytest.mark.real

_row = ss.row


def _in_review(work: Path, task: str) -> str:
    """spawn, start, a commit, done on ``work``'s machine; the task's tip."""
    ss.ok(["worker", "spawn", task, "-d", f"the {task} task"], work)
    ss.ok(["worker", "start", "--task", task], work)
    wt = Path(_row(work, task).worktree)
    build.commit_file(wt, f"{task}.txt", f"{task}'s work\n")
    ss.ok(["worker", "done", "--task", task], work)
    return build.git(wt, "rev-parse", "HEAD").strip()


def _state(c: Console) -> dict:
    status, text = c.request("GET", "/api/state")
    assert status == 200, text
    return json.loads(text)


def _post(c: Console, action: str, body: dict, **kw) -> tuple[int, dict | str]:
    status, text = c.request("POST", f"/api/{action}", body=body, **kw)
    return status, (json.loads(text) if text.startswith("{") else text)


def _offered(c: Console, task: str, state: str) -> list[str]:
    """The actions the console offers on ``task`` once its row shows ``state``."""
    wait_until(lambda: worker_row(_state(c), task)["state"] == state, f"{task} {state} in the console", within=20)
    return worker_row(_state(c), task)["allowed_actions"]


def test_machine_bs_console_approves_and_merges_machine_as_task(tmp_path, db):
    a, b = team(tmp_path, db, ["a", "b"], background=False, listen=False)
    origin = tmp_path / "srv" / "project.git"
    tip = _in_review(a, "t")
    for w in (a, b):
        ss.ok(["nerve", "sync"], w)
    c = Console(b)
    try:
        row = worker_row(_state(c), "t")
        assert (row["state"], row["machine"], row["elsewhere"]) == ("IN_REVIEW", "a", True)
        assert row["allowed_actions"] == ["approve", "request_changes"]
        assert row["held_elsewhere"].startswith("held by machine a: its review and merge run from here")
        status, files = c.request("GET", "/api/task/t/files")  # the diff: the branch a pushed, read-only
        assert status == 200, files
        assert json.loads(files)["head"] == tip and [f["path"] for f in json.loads(files)["files"]] == ["t.txt"]
        status, diff = c.request("GET", "/api/task/t/diff?path=t.txt")
        assert status == 200 and "t's work" in diff, diff

        for headers in ({}, {"X-Nerve-Token": "not-the-token"}):  # no token, a wrong one: refused, nothing moves
            status, text = _post(c, "approve", {"task": "t"}, token=False, headers=headers)
            assert status == 403 and "X-Nerve-Token" in text, text
        assert worker_row(_state(c), "t")["state"] == "IN_REVIEW"

        status, done = _post(c, "approve", {"task": "t", "comment": "good, from b's console"})
        assert status == 200, done
        assert done["changed"] and done["worker"] == {"task_id": "t", "state": "APPROVED", "machine": "a"}
        assert _offered(c, "t", "APPROVED") == ["request_changes", "merge"]
        status, told = _post(c, "tell", {"task": "t", "text": "mind the changelog"})  # as `tell` does: for a's sync
        assert status == 200 and (told["told"]["machine"], told["told"]["pending"]) == ("a", True), told
        ss.ok(["nerve", "sync"], a)  # a's row follows the approval (its listener would, in a clone that has one)
        assert _row(a, "t").state == "APPROVED"

        status, merged = _post(c, "merge", {"task": "t", "check": False})
        assert status == 200, merged
        assert (merged["state"], merged["holder"], merged["pushed"]) == ("COMPLETED", "a", True)
        made = [ln.split()[0] for ln in build.git(origin, "rev-list", "--merges", "--parents", "main").splitlines()
                if ln.split()[2:3] == [tip]]
        assert made == [merged["merge_commit"]] == [build.git(origin, "rev-parse", "main").strip()]
        status, again = _post(c, "merge", {"task": "t"})  # run again where it was merged: done already (issue 36)
        assert status == 200 and again["state"] == "COMPLETED", again
        assert made == [build.git(origin, "rev-parse", "main").strip()]  # nothing merged twice
        assert _offered(c, "t", "COMPLETED") == []
    finally:
        assert c.stop() == 0
    for w in (b, a):  # b publishes its messages, a follows
        ss.ok(["nerve", "sync"], w)
    assert _row(a, "t").state == "COMPLETED" and _row(b, "t") is None


def test_the_approve_and_merge_buttons_show_for_another_machines_approved_task_in_chromium(tmp_path, db):
    a, b = team(tmp_path, db, ["a", "b"], background=False, listen=False)
    _in_review(a, "t")
    ss.ok(["worker", "approve", "t"], a)
    ss.ok(["worker", "spawn", "w"], a)  # WORKING on a: nothing to run from here
    for w in (a, b):
        ss.ok(["nerve", "sync"], w)
    console = Console(b)
    browser = Browser.start()
    try:
        assert browser("goto", url=console.url) == 200
        browser("wait_text", selector="tr.worker[data-task=t] [data-testid=machine]", text="a (elsewhere)")
        assert browser.open_task("t", "thread") == {"request_changes", "merge"}
        browser("wait_text", selector="[data-testid=held-elsewhere]", text="its review and merge run from here")
        assert browser.open_task("w", "thread") == set()
        assert browser.problems() == []
    finally:
        browser.close()
        assert console.stop() == 0
