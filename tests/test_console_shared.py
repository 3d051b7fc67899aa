"""The console in shared mode (issue 24): two clones of a real bare remote, each its own machine; after a sync,
machine two's console lists machine one's task with its machine and how fresh the view is, offers its review and
merge (run from any machine, issue 36) and refuses the rest with the CLI's exit-8 line, changing nothing."""

from __future__ import annotations

import json
from pathlib import Path

from console_support import Console, worker_row
from fixtures.repos import build
from tests import shared_support as ss


def _claim_tip(bare: Path, task: str) -> str:
    return build.git(bare, "for-each-ref", "--format=%(objectname)", f"refs/nerve/claims/{task}")


def test_the_console_shows_another_machines_task_read_only(tmp_path):
    bare = ss.origin(tmp_path)  # served over file://
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t", "-d", "the feature"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    ss.ok(["worker", "heartbeat", "--task", "t"], one)
    ss.ok(["worker", "spawn", "mine"], two)
    for w in (one, two):
        ss.ok(["nerve", "sync"], w)
    tip = _claim_tip(bare, "t")
    c = Console(two)
    try:
        status, text = c.request("GET", "/api/state")
        assert status == 200, text
        state = json.loads(text)
        assert state["shared"]["machine"] == "two"
        assert state["shared"]["view"].startswith("synced ") and state["shared"]["view"].endswith(" s ago")
        t = worker_row(state, "t")
        assert (t["state"], t["machine"], t["elsewhere"]) == ("WORKING", "one", True)
        assert isinstance(t["heartbeat_ts"], float) and t["description"] == "the feature"  # as one published them
        assert t["allowed_actions"] == []
        assert t["held_elsewhere"] == ("held by machine one: its review and merge run from here (shared mode); cancel, "
                                       "retry and its worktree stay on machine one")
        assert (worker_row(state, "mine")["machine"], worker_row(state, "mine")["allowed_actions"]) == (
            "two", ["cancel"])

        status, text = c.request("GET", "/api/task/t")  # what this machine knows of it, not an error
        assert status == 200, text
        detail = json.loads(text)
        assert (detail["worker"]["machine"], detail["worker"]["state"]) == ("one", "WORKING")
        assert {"task_assign", "state_change"} <= {m["kind"] for m in detail["messages"]}

        status, text = c.request("POST", "/api/cancel", body={"task": "t"})
        refusal = json.loads(text)
        assert (status, refusal["code"]) == (409, 8), text
        assert refusal["error"].startswith("task t is held by machine one (WORKING when this machine last synced)")
        assert refusal["error"].endswith("nothing changed here")
        status, text = c.request("POST", "/api/approve", body={"task": "t"})  # reviewed from here, but not WORKING
        assert "cannot approve t: it is WORKING on machine one" in json.loads(text)["error"], text
    finally:
        assert c.stop() == 0
    assert _claim_tip(bare, "t") == tip  # nothing moved on the remote, nothing here
    rows = {r["task_id"]: r for r in json.loads(ss.ok(["worker", "status", "--json"], two).stdout)}
    assert (rows["t"]["state"], rows["t"]["machine"]) == ("WORKING", "one")
    with ss.bus(two) as b:
        from git_nerve.bus import workers

        assert workers.get(b.conn, "t") is None
    bare.rename(bare.with_name("gone.git"))  # the remote out of reach: the cached view, said so
    assert ss.run(["nerve", "sync"], two).returncode != 0
    c = Console(two)
    try:
        state = json.loads(c.request("GET", "/api/state")[1])
        assert state["shared"]["view"].startswith("remote unreachable since ")
        assert state["shared"]["view"].endswith(": cached view")
        assert (worker_row(state, "t")["machine"], worker_row(state, "t")["allowed_actions"]) == ("one", [])
    finally:
        assert c.stop() == 0


def test_a_shared_table_nerve_toml_gets_wrong_is_said_and_the_console_goes_on(repo, gw):
    assert gw("spawn t1", repo.work).code == 0
    (repo.work / "nerve.toml").write_text('[shared]\nbackend = "carrier-pigeon"\n')
    c = Console(repo.work)
    try:
        status, text = c.request("GET", "/api/state")
        assert status == 200, text
        state = json.loads(text)
        assert state["shared"] == {"machine": None, "view": "nerve.toml [shared] backend = 'carrier-pigeon' is not one "
                                                           "of local, git, postgres"}
        assert worker_row(state, "t1")["allowed_actions"] == ["cancel"]
    finally:
        assert c.stop() == 0


def test_on_the_git_remote_another_machines_task_in_review_shows_its_pushed_diff_and_is_approved_here(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t", "-d", "the feature"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    rows = {r["task_id"]: r for r in json.loads(ss.ok(["worker", "status", "--json"], one).stdout)}
    wt = Path(rows["t"]["worktree"])
    build.commit_file(wt, "feature.txt", "the feature\n")
    ss.ok(["worker", "done", "--task", "t"], one)  # pushes its branch
    tip = build.git(wt, "rev-parse", "HEAD").strip()
    for w in (one, two):
        ss.ok(["nerve", "sync"], w)
    claim = _claim_tip(bare, "t")
    c = Console(two)
    try:
        t = worker_row(json.loads(c.request("GET", "/api/state")[1]), "t")
        assert (t["state"], t["machine"], t["allowed_actions"]) == ("IN_REVIEW", "one", ["approve", "request_changes"])
        status, text = c.request("GET", "/api/task/t/files")  # its diff: the branch machine one pushed
        assert status == 200, text
        assert (json.loads(text)["head"], [f["path"] for f in json.loads(text)["files"]]) == (tip, ["feature.txt"])
        status, text = c.request("GET", "/api/task/t/diff?path=feature.txt")
        assert status == 200 and "the feature" in text, text
        status, text = c.request("POST", "/api/merge", body={"task": "t"})  # not APPROVED yet
        assert status == 409 and "cannot merge t: it is IN_REVIEW on machine one" in json.loads(text)["error"], text
        assert _claim_tip(bare, "t") == claim
        status, text = c.request("POST", "/api/approve", body={"task": "t", "comment": "from two"})
        assert status == 200, text
    finally:
        assert c.stop() == 0
    assert _claim_tip(bare, "t") != claim
    assert json.loads(build.git(bare, "cat-file", "blob", "refs/nerve/claims/t:record.json"))["state"] == "APPROVED"
