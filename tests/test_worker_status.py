"""`status` (table, --json, --state, --stale, --watch), staleness, and `show`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from waiting import wait_until

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
KEYS = {"task_id", "state", "branch", "worktree", "base", "description", "assigned_at", "state_changed_at",
        "last_heartbeat", "stale"}


def status_json(gw, cwd, *args) -> list[dict]:
    res = gw(["status", "--json", *args], cwd)
    assert res.code == 0, res
    data = json.loads(res.out)
    assert isinstance(data, list)
    return data


def test_status_json_is_an_array_of_worker_objects(repo, gw):
    assert status_json(gw, repo.work) == []
    wk.drive(repo.work, "t1", "WORKING")
    wk.spawn(repo.work, "t2", description="second")
    rows = status_json(gw, repo.work)
    assert [r["task_id"] for r in rows] == ["t1", "t2"]
    for r in rows:
        assert KEYS <= set(r)
        assert Path(r["worktree"]).is_absolute() and Path(r["worktree"]).is_dir()
        assert ISO.match(r["assigned_at"]) and ISO.match(r["state_changed_at"])
        assert r["stale"] is False
    t1, t2 = rows
    assert t1["state"] == "WORKING" and ISO.match(t1["last_heartbeat"])
    assert t2["state"] == "ASSIGNED" and t2["last_heartbeat"] is None and t2["description"] == "second"


def test_status_is_the_same_from_a_subdirectory_and_from_a_worker_worktree(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    wk.spawn(repo.work, "t2")
    here = status_json(gw, repo.work)
    assert status_json(gw, repo.work / "docs") == here
    assert status_json(gw, wt / "src") == here


def test_state_filter(repo, gw):
    wk.drive(repo.work, "a", "WORKING")
    wk.drive(repo.work, "b", "IN_REVIEW")
    wk.spawn(repo.work, "c")
    assert [r["task_id"] for r in status_json(gw, repo.work, "--state", "working")] == ["a"]
    got = status_json(gw, repo.work, "--state", "IN_REVIEW", "--state", "assigned")
    assert sorted(r["task_id"] for r in got) == ["b", "c"]
    assert status_json(gw, repo.work, "--state", "failed") == []
    res = gw("status --state bogus", repo.work)
    assert res.code == 2 and "unknown state 'bogus'" in res.err


def test_staleness_is_computed_from_heartbeats_and_activity(repo, gw):
    work = repo.work
    now = time.time()
    wk.drive(work, "quiet", "WORKING")
    wk.set_columns(work, "quiet", last_heartbeat=now - 600)  # 10 min without a heartbeat
    wk.drive(work, "alive", "WORKING")
    wk.spawn(work, "never")  # ASSIGNED, no heartbeat ever: counted from assignment
    wk.set_columns(work, "never", assigned_at=now - 400)
    wk.drive(work, "review-old", "IN_REVIEW")
    wk.set_columns(work, "review-old", last_activity=now - 7200, last_heartbeat=now - 7200)
    wk.drive(work, "review-new", "IN_REVIEW")
    wk.set_columns(work, "review-new", last_activity=now - 1800, last_heartbeat=now - 7200)
    wk.drive(work, "approved", "APPROVED")
    wk.set_columns(work, "approved", last_activity=now - 86400, last_heartbeat=now - 86400)

    stale = {r["task_id"]: r["stale"] for r in status_json(gw, work)}
    assert stale == {"quiet": True, "alive": False, "never": True, "review-old": True, "review-new": False,
                     "approved": False}
    assert sorted(r["task_id"] for r in status_json(gw, work, "--stale")) == ["never", "quiet", "review-old"]
    assert wk.state(work, "quiet") == "WORKING"  # STALE is never stored

    table = gw("status", work).out
    line = next(ln for ln in table.splitlines() if ln.startswith("quiet "))
    assert "STALE" in line and "10m ago" in line and line.split()[1] == "WORKING"  # the state, and a marker
    alive = next(ln for ln in table.splitlines() if ln.startswith("alive "))
    assert "WORKING" in alive and "STALE" not in alive


def test_a_heartbeat_makes_a_task_fresh_again(repo, gw, sh):
    wt = wk.drive(repo.work, "t1", "WORKING")
    wk.set_columns(repo.work, "t1", last_heartbeat=time.time() - 3600)
    assert status_json(gw, repo.work)[0]["stale"] is True
    res = sh(["git", "worker", "heartbeat", "--status", "back"], wt / "src")  # the fast console-script path
    assert res.code == 0, res
    assert status_json(gw, repo.work)[0]["stale"] is False


def test_stale_after_from_git_config_and_git_dash_c(repo, sh):
    work = repo.work
    wk.drive(work, "t1", "WORKING")
    wk.set_columns(work, "t1", last_heartbeat=time.time() - 120)
    fresh = sh(["git", "worker", "status", "--stale", "--json"], work / "src")
    assert fresh.code == 0 and json.loads(fresh.out) == []
    # `git -c` reaches us (pygit2 alone would miss it)
    res = sh(["git", "-c", "nerve.staleAfter=1m", "worker", "status", "--stale", "--json"], work / "src")
    assert res.code == 0, res
    assert [r["task_id"] for r in json.loads(res.out)] == ["t1"]
    git(work, "config", "nerve.staleAfter", "30s")
    assert [r["task_id"] for r in json.loads(sh(["git", "worker", "status", "--stale", "--json"], work).out)] == ["t1"]
    git(work, "config", "nerve.reviewStaleAfter", "soon")
    git(work, "config", "nerve.staleAfter", "soon")
    bad = sh(["git", "worker", "status", "--json"], work)
    assert bad.code == 0  # status still works with a bad setting (defaults)...
    assert sh(["git", "worker", "spawn", "t2"], work).code == 2  # ...commands that need settings say why


def test_status_table_and_empty_messages(repo, gw):
    res = gw("status", repo.work)
    assert res.code == 0 and "no workers yet" in res.out
    wk.spawn(repo.work, "t1", description="first line\nsecond line")
    res = gw("status", repo.work)
    header, row = res.out.splitlines()[:2]
    assert header.split()[:5] == ["TASK", "STATE", "BRANCH", "HEARTBEAT", "AGE"]
    assert row.split()[:4] == ["t1", "ASSIGNED", "feat/t1", "--"] and "first line" in row and "second" not in row
    assert "no workers match" in gw("status --state failed", repo.work).out


def test_status_outside_a_repository(tmp_path, gw):
    res = gw("status", tmp_path)
    assert res.code == 2 and res.err.strip().startswith("error: not a git repository")
    assert len(res.err.strip().splitlines()) == 1


def test_status_watch_redraws_until_interrupted(repo):
    wk.spawn(repo.work, "t1")
    # the console script itself (behind `git worker`), so the Ctrl-C lands on our process
    proc = subprocess.Popen(["git-worker", "status", "--watch", "--interval", "0.2"], cwd=repo.work,
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    chunks: list[str] = []

    def pump() -> None:
        for line in proc.stdout:  # each redraw as it comes (the command flushes after each)
            chunks.append(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:  # the Ctrl-C once two redraws were seen
        wait_until(lambda: "".join(chunks).count("TASK ") >= 2, 30, what="two redraws", alive=proc)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    out = "".join(chunks)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert out.count("TASK ") >= 2 and "t1" in out


# -- show ------------------------------------------------------------------------------------------


def test_show_prints_the_whole_history(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    for _ in range(3):
        assert gw("heartbeat", wt).code == 0
    build.commit_file(wt, "x.txt", "x\n")
    assert gw("done", wt).code == 0
    assert gw(["approve", "t1", "--comment", "looks good"], repo.work).code == 0
    res = gw("show t1", repo.work)
    assert res.code == 0, res
    lines = res.out.splitlines()
    assert lines[0].split()[:3] == ["t1", "APPROVED", "feat/t1"]
    text = res.out
    for expected in ("task_assign", "ASSIGNED -> WORKING (start)", "WORKING -> IN_REVIEW (done)", "review_request",
                     "IN_REVIEW -> APPROVED (approve)", "comment=looks good"):
        assert expected in text
    assert re.search(r"\(\d+ heartbeats\)", text)  # heartbeats are folded, not listed one by one
    assert text.index("task_assign") < text.index("(start)") < text.index("(done)") < text.index("(approve)")


def test_show_json(repo, gw):
    wk.drive(repo.work, "t1", "IN_REVIEW")
    res = gw("show t1 --json", repo.work)
    assert res.code == 0
    data = json.loads(res.out)
    assert data["worker"]["task_id"] == "t1" and data["worker"]["state"] == "IN_REVIEW"
    kinds = [m["kind"] for m in data["messages"]]
    assert kinds[0] == "task_assign" and "review_request" in kinds
    ids = [m["id"] for m in data["messages"]]
    assert ids == sorted(ids)
    assert all(ISO.match(m["ts"]) and isinstance(m["payload"], dict) for m in data["messages"])


def test_show_from_another_worktree_and_without_a_bus(repo, gw, tmp_path):
    res = gw("show t1", repo.work)
    assert res.code == 5 and "no bus" in res.err  # nothing spawned yet: show does not create one
    assert not (repo.work / ".git" / "nerve" / "bus.db").exists()
    wk.spawn(repo.work, "t1")
    wt2 = wk.spawn(repo.work, "t2")
    assert gw("show t1", wt2).code == 0


@pytest.mark.parametrize("command", ["status", "show t1"])
def test_read_commands_write_nothing(repo, gw, command):
    wk.drive(repo.work, "t1", "WORKING")
    before = wk.kinds(repo.work, "t1")
    assert gw(command, repo.work).code == 0
    assert wk.kinds(repo.work, "t1") == before


def test_a_worktree_removed_by_hand_shows_as_missing_with_the_way_back(repo, gw):
    """`rm -rf` of a live task's worktree: status, status --json and show say it is missing and name the
    commands that recreate it or end the task (before, the task stayed ASSIGNED with nothing said)."""
    import shutil

    wt = wk.spawn(repo.work, "t1")
    wk.spawn(repo.work, "t2")
    shutil.rmtree(wt)
    rows = {r["task_id"]: r for r in status_json(gw, repo.work)}
    assert rows["t1"]["worktree_missing"] is True and rows["t2"]["worktree_missing"] is False
    res = gw(["status"], repo.work)
    line = f"worktree missing ({wt}): `git worker spawn t1` recreates it, `git worker cancel t1 --cleanup` ends the task"
    assert line in res.out and res.out.count("worktree missing") == 1
    assert line in gw(["show", "t1"], repo.work).out
    assert json.loads(gw(["show", "t1", "--json"], repo.work).out)["worker"]["worktree_missing"] is True
    assert gw(["spawn", "t1"], repo.work).code == 0  # the way back it names works
    assert wt.is_dir() and status_json(gw, repo.work)[0]["worktree_missing"] is False
