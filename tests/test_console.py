"""`git nerve console`: the real server as a subprocess, on real repositories (no browser here:
tests/test_console_browser.py drives the page in Chromium)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import git
from console_support import Console, Events, worker_row
from fixtures.repos.build import commit_file
from startup_support import loaded_after


def _spawn(gw, work, *tasks):
    for t in tasks:
        assert gw(f"spawn {t} -d 'task {t}'", work).code == 0


@pytest.fixture
def console(repo, gw):
    _spawn(gw, repo.work, "t1", "t2")
    c = Console(repo.work)
    yield c
    assert c.stop() == 0


def test_every_request_needs_the_token_the_host_and_for_a_post_the_header_origin_and_json(console):
    c = console
    assert c.request("GET", "/", token=False)[0] == 403
    assert c.request("GET", "/api/state", token=False)[0] == 403
    assert c.request("GET", "/api/state", headers={"X-Nerve-Token": "wrong"}, token=False)[0] == 403
    assert c.request("GET", f"/?token={c.token}x", token=False)[0] == 403
    # the page and the stream take the token from the URL; the API from the header
    status, page = c.request("GET", f"/?token={c.token}", token=False)
    assert status == 200 and "git nerve console" in page
    assert c.request("GET", "/api/state")[0] == 200
    # DNS rebinding: another name for 127.0.0.1 is refused, token or not
    status, text = c.request("GET", "/api/state", headers={"Host": f"evil.example:{c.port}"})
    assert status == 403 and "Host" in text
    assert c.request("GET", "/api/state", headers={"Host": f"localhost:{c.port}"})[0] == 200
    note = {"task": "t1", "text": "hello"}
    # a POST: the token in the URL alone is not enough (a cross-site form could carry it)
    assert c.request("POST", f"/api/tell?token={c.token}", body=note, token=False)[0] == 403
    status, text = c.request("POST", "/api/tell", body=note, headers={"Origin": "http://evil.example"})
    assert status == 403 and "cross-site" in text
    assert c.request("POST", "/api/tell", body=note, headers={"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert c.request("POST", "/api/tell", body=note, headers={"Content-Type": "text/plain"})[0] == 415
    assert c.request("POST", "/api/tell", body=note, headers={"Content-Type": "application/x-www-form-urlencoded"})[0] == 415
    # none of the refused requests reached the bus
    assert json.loads(c.request("GET", "/api/task/t1")[1])["told"] == []
    status, text = c.request("POST", "/api/tell", body=note, headers={"Origin": f"http://127.0.0.1:{c.port}"})
    assert status == 200, text
    assert json.loads(text)["told"]["rounds"] == [{"task": "t1", "round": 1}]


def test_every_response_forbids_framing_caching_and_foreign_scripts(console):
    conn_status, _ = console.request("GET", "/api/state")
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", console.port, timeout=10)
    conn.request("GET", f"/?token={console.token}")
    resp = conn.getresponse()
    resp.read()
    assert resp.getheader("x-frame-options") == "DENY"
    assert resp.getheader("cache-control") == "no-store"
    assert resp.getheader("referrer-policy") == "no-referrer"
    csp = resp.getheader("content-security-policy")
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "frame-ancestors 'none'" in csp
    conn.close()


def test_the_stream_follows_heartbeats_commits_and_tells(console, repo, gw):
    events = Events(console.url)
    try:
        first = events.next()
        assert [w["task_id"] for w in first["workers"]] == ["t1", "t2"]
        wt = repo.work.parent / "project.worktrees" / "t1"
        if not wt.is_dir():
            wt = __import__("pathlib").Path(worker_row(first, "t1")["worktree"])
        # a heartbeat from another process (the hook path's `git worker heartbeat`)
        subprocess.run(["git", "worker", "heartbeat", "--status", "compiling", "--progress", "0.4"], cwd=wt, check=True)
        state = events.until(lambda s: worker_row(s, "t1")["status"] == "compiling")
        assert worker_row(state, "t1")["progress"] == 0.4 and worker_row(state, "t1")["last_heartbeat"]
        # a commit in the worker: the shim only spools it; the console ingests the spool itself
        sha = commit_file(wt, "feature.txt", "one\n", "add the feature")
        state = events.until(lambda s: (worker_row(s, "t1")["last_commit"] or {}).get("sha") == sha)
        assert worker_row(state, "t1")["last_commit"]["subject"] == "add the feature"
        # a tell: the outbox stays empty (a note is acknowledged when an agent reads it) but the task's version moves
        before = worker_row(state, "t1")["version"]
        assert console.request("POST", "/api/tell", body={"task": "t1", "text": "mind the tests"})[0] == 200
        state = events.until(lambda s: worker_row(s, "t1")["version"] != before)
        # the agent reads it (the door mid-run delivery uses): the outbox says so
        probe = ("import sys; from git_nerve.bus.connection import Bus; from git_nerve.paths import discover;"
                 "from git_nerve.steer import delivery;"
                 "b = Bus(discover().bus_path); print(len(delivery.deliver(b, 't1', reader='probe', via='hook', pid=1)))")
        assert subprocess.run([sys.executable, "-c", probe], cwd=wt, capture_output=True, text=True, check=True).stdout.strip() == "1"
        state = events.until(lambda s: any("note delivered to probe" in line["text"] for line in s["outbox"]))
    finally:
        events.close()
    detail = json.loads(console.request("GET", "/api/task/t1")[1])
    assert [m["kind"] for m in detail["messages"]][-1] == "commit"
    assert detail["told"][0]["delivery"]["state"] == "delivered"
    assert detail["thread"]["rounds"][-1]["content"] == "mind the tests"


def test_review_and_merge_go_through_the_lifecycle(repo, gw, tmp_path):
    """Started from a subdirectory of the task's own worktree, which the merge then removes."""
    _spawn(gw, repo.work, "t1")
    wt = __import__("pathlib").Path(json.loads(gw("status --json", repo.work).out)[0]["worktree"])
    c = Console(wt / "src")
    try:
        # wrong state: the lifecycle's own refusal, with its exit code
        status, text = c.request("POST", "/api/approve", body={"task": "t1"})
        assert status == 409 and json.loads(text)["exit_code"] == 3 and "ASSIGNED" in json.loads(text)["error"]
        assert c.request("POST", "/api/approve", body={})[0] == 400
        assert c.request("POST", "/api/approve", body={"task": "nope"})[0] == 400
        assert c.request("POST", "/api/launch", body={"task": "t1"})[0] == 404
        assert c.request("POST", "/api/tell", body=["not", "an", "object"])[0] == 400
        assert gw("start", wt).code == 0
        sha = commit_file(wt, "feature.txt", "one\n", "add the feature")
        assert gw("done", wt).code == 0
        # the same rules as `git worker request-changes`: a comment is optional, a wrong type is bad input
        status, text = c.request("POST", "/api/request-changes", body={"task": "t1", "comment": 3})
        assert status == 400 and "comment" in json.loads(text)["error"]
        status, text = c.request("POST", "/api/request-changes", body={"task": "t1", "comment": "rename it"})
        assert status == 200 and json.loads(text)["worker"]["state"] == "WORKING"
        assert gw("done", wt).code == 0
        status, text = c.request("POST", "/api/approve", body={"task": "t1", "comment": "good"})
        assert status == 200 and json.loads(text)["worker"]["state"] == "APPROVED"
        status, text = c.request("POST", "/api/merge", body={"task": "t1"})
        assert status == 200, text
        merged = json.loads(text)
        assert merged["state"] == "COMPLETED" and merged["worktree_removed"]
        # git is the ground truth: main holds the merge commit and the task's commit
        assert git(repo.work, "rev-parse", "main") == merged["merge_commit"]
        assert git(repo.work, "merge-base", "--is-ancestor", sha, "main", check=False) == ""
        assert not wt.exists()
        status, text = c.request("GET", "/api/task/t1")
        rounds = json.loads(text)["thread"]["rounds"]
        assert [(r["role"], r["content"]) for r in rounds] == [("reviewer", "rename it"), ("reviewer", "good")]
        assert worker_row(json.loads(c.request("GET", "/api/state")[1]), "t1")["state"] == "COMPLETED"
    finally:
        assert c.stop() == 0


def test_without_a_bus_or_a_repository_it_is_one_line_and_exit_2(repo, tmp_path):
    proc = subprocess.run(["git", "nerve", "console"], cwd=repo.work, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "git nerve init" in proc.stderr
    outside = tmp_path / "nowhere"
    outside.mkdir()
    proc = subprocess.run(["git", "nerve", "console"], cwd=outside, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1


def test_a_busy_port_is_one_line(console, repo):
    proc = subprocess.run(["git", "nerve", "console", "--port", str(console.port)], cwd=repo.work,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{console.port}" in proc.stderr


def test_help_says_how_to_open_it(gn, repo):
    res = gn("console --help", repo.work)
    assert res.code == 0 and "127.0.0.1" in res.out and "token" in res.out


def test_the_hook_and_heartbeat_paths_do_not_load_the_console():
    hot = ["git_nerve.hooks.run", "git_nerve.hooks.runtime", "git_nerve.cli.entry", "git_nerve.worker.heartbeat"]
    assert loaded_after(hot, ("git_nerve.console", "starlette", "uvicorn", "anyio", "h11")) == []
    # nor does `git nerve` itself until the console command runs
    probe = ("import sys; import git_nerve.cli.nerve;"
             "print(' '.join(m for m in ('git_nerve.console', 'starlette', 'uvicorn') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


def test_tell_kinds_go_where_git_nerve_tell_sends_them(console, repo, gn):
    def tell(body):
        status, text = console.request("POST", "/api/tell", body=body)
        assert status == 200, text
        return json.loads(text)["told"]

    from git_nerve.locks import hold

    locks = repo.work / ".git" / "nerve" / "locks"
    # the same rule as `git nerve tell`: a stop with nothing running is refused, nothing queued
    status, text = console.request("POST", "/api/tell", body={"task": "t1", "kind": "stop", "text": "stop"})
    assert status == 409 and json.loads(text)["exit_code"] == 3 and "nothing to stop" in json.loads(text)["error"]
    with hold(locks / "run-t1.lock", timeout=5):  # as a running `git nerve run` of t1
        assert tell({"task": "t1", "kind": "stop", "text": "stop"})["scope"] == "task"
    with hold(locks / "merge-all.lock", timeout=5):  # as a running `git worker merge --all`
        stop = tell({"kind": "stop", "text": "stop"})  # no task: the merge queue, as outside a worktree
    assert (stop["scope"], stop["task"]) == ("queue", None)
    skip = tell({"kind": "skip", "text": "t2"})
    assert (skip["scope"], skip["kind"], skip["target"]) == ("queue", "skip", "t2")
    assert tell({"text": "add t1"})["kind"] == "add"  # read from the text, like the command
    status, text = console.request("POST", "/api/tell", body={"task": "t1", "text": "  "})
    assert status == 400 and "empty message" in json.loads(text)["error"]
    status, text = console.request("POST", "/api/tell", body={"task": "t9", "text": "hi"})
    assert status == 400 and "unknown task" in json.loads(text)["error"]
    # the command sees exactly what the console queued
    queued = json.loads(gn("outbox --json", repo.work).out)  # nothing has acted on them yet: listed as queued
    assert [(q["inbox_id"], q["kind"], q["status"]) for q in queued] == [
        (1, "stop", "queued"), (2, "stop", "queued"), (3, "skip", "queued"), (4, "add", "queued")]
    shown = json.loads(gn("tell --task t2 --json hello", repo.work).out)
    assert shown["id"] == 5
