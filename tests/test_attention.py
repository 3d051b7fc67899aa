"""What needs the person (issue 38): each task's ``attention`` in `git worker status --json`, the human table sorted
and marked by it, and the MCP tool's state carrying the same value."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import git
from fixtures.repos import worker as wk
from fixtures.repos.build import commit_file
from waiting import wait_until


def attention(gw, work) -> dict[str, str | None]:
    res = gw("status --json", work)
    assert res.code == 0, res.err
    return {r["task_id"]: r["attention"] for r in json.loads(res.out)}


def test_each_task_says_what_needs_the_person_and_status_lists_those_first(repo, gw, sh):
    work = repo.work
    wk.drive(work, "idle", "ASSIGNED")
    wk.drive(work, "busy", "WORKING")
    wk.drive(work, "rev", "IN_REVIEW")
    wk.drive(work, "gone", "FAILED")
    wk.drive(work, "merged", "COMPLETED")
    asks = wk.drive(work, "asks", "WORKING")
    crash = wk.drive(work, "crash", "WORKING")
    assert gw(["heartbeat", "--status", "input: which database should I use?"], asks).code == 0
    ran = sh(["git", "worker", "run", "--", sys.executable, "-c", "raise SystemExit(3)"], crash)
    assert ran.code == 3, ran
    assert attention(gw, work) == {"idle": None, "busy": None, "rev": "review", "gone": "failed", "merged": None,
                                   "asks": "input", "crash": "failed"}

    # the table: what needs the person first (failed, input, review), each marked; then the rest
    out = gw("status", work).out
    firsts = [ln.split()[0] for ln in out.splitlines()[1:] if ln[:1].strip()]
    assert firsts[:4] == ["gone", "crash", "asks", "rev"], out
    assert set(firsts[4:]) == {"idle", "busy", "merged"}
    assert "» needs you: its agent waits for your answer: which database should I use?" in out
    assert out.count("» needs you:") == 4

    # a run that exits 0 afterwards: no longer failed
    assert sh(["git", "worker", "run", "--", sys.executable, "-c", "pass"], crash).code == 0
    assert attention(gw, work)["crash"] is None


def test_a_working_task_silent_for_stuck_after_is_stuck_and_a_radar_conflict_needs_the_person(repo, gw):
    work = repo.work
    commit_file(work, "nerve.toml", "[notify]\nstuck_after = 1\n", "nerve.toml: stuck after a second")
    wt = wk.drive(work, "quiet", "WORKING")
    assert attention(gw, work)["quiet"] in (None, "stuck")
    wait_until(lambda: attention(gw, work)["quiet"] == "stuck", what="quiet to be stuck")
    assert gw("heartbeat", wt).code == 0  # a heartbeat: alive again
    assert attention(gw, work)["quiet"] is None

    # two live tasks changing the same line: the radar flags both
    one = wk.drive(work, "one", "WORKING")
    two = wk.drive(work, "two", "WORKING")
    commit_file(one, wk.APP, wk.app_text("hi"), "one: greeting")
    commit_file(two, wk.APP, wk.app_text("yo"), "two: greeting")
    assert gw("conflicts --refresh", work).code in (0, 1)
    found = attention(gw, work)
    assert found["one"] == "conflict" and found["two"] == "conflict", found
    wk.drive(work, "clash", "CONFLICTED", greeting="hola")  # a rebase stopped on a conflict
    assert attention(gw, work)["clash"] == "conflict"
    assert git(work, "status", "--porcelain") == ""


def test_the_mcp_state_tool_carries_the_same_attention(repo, gw):
    from git_nerve.mcptools import tools

    work = repo.work
    wt = wk.drive(work, "asks", "WORKING")
    assert gw(["heartbeat", "--status", "input: may I delete the cache?"], wt).code == 0
    assert json.loads(tools.state(tools.bind(wt)))["attention"] == attention(gw, work)["asks"] == "input"



def test_in_shared_mode_another_machines_task_gets_what_its_state_says(tmp_path):
    from tests import shared_support as ss

    one, two = ss.team(tmp_path, str(ss.origin(tmp_path)), ["one", "two"])
    ss.ok(["worker", "spawn", "t", "-d", "the feature"], one)
    wt = Path(json.loads(ss.ok(["worker", "status", "--json"], one).stdout)[0]["worktree"])
    ss.ok(["worker", "start"], wt)
    commit_file(wt, "feature.txt", "the feature\n", "t: the feature")
    ss.ok(["worker", "done"], wt)
    for w in (one, two):
        ss.ok(["nerve", "sync"], w)
    rows = {r["task_id"]: r for r in json.loads(ss.ok(["worker", "status", "--json"], two).stdout)}
    assert rows["t"]["machine"] == "one" and rows["t"]["state"] == "IN_REVIEW" and rows["t"]["attention"] == "review"
    assert "» needs you: review" in ss.ok(["worker", "status"], two).stdout


def test_the_mcp_conflicts_tool_says_the_attention_a_radar_conflict_gives(repo, gw):
    from git_nerve.mcptools import tools

    work = repo.work
    one, two = wk.drive(work, "one", "WORKING"), wk.drive(work, "two", "WORKING")
    commit_file(one, wk.APP, wk.app_text("hi"), "one: greeting")
    commit_file(two, wk.APP, wk.app_text("yo"), "two: greeting")
    said = tools.conflicts(tools.bind(one), refresh=True)
    assert "CONFLICT: " in said and "attention: conflict" in said, said
    assert attention(gw, work)["one"] == "conflict"
