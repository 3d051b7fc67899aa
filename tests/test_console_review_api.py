"""The console's review API: a task's files and diffs from git objects, its commits, the radar's flagged
lines, its agent's live output, and every review action with the CLI's own rules. The real server (a
subprocess, as in tests/test_console.py) on real repositories."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import git
from console_support import Console, flagged_pair, post_action, worktree_of
from fixtures.repos.build import commit_file


def _get(c: Console, path: str):
    status, text = c.request("GET", path)
    return status, json.loads(text) if text.startswith(("{", "[")) else text


@pytest.fixture
def review(repo, gw):
    """t1 changed files every way git tells apart (its own commits), t2 spawned untouched; a console."""
    for t in ("t1", "t2"):
        assert gw(f"spawn {t} -d 'task {t}'", repo.work).code == 0
    wt = worktree_of(repo.work, "t1", gw)
    commit_file(wt, "src/app.py", "def greet(name):\n    return f'hi {name}'\n\n\ndef bye():\n    return 'bye'\n", "greet shorter")
    commit_file(wt, "new.txt", "one\ntwo\nthree\n", "add new.txt")
    (wt / "logo.bin").write_bytes(bytes(range(256)) * 4)
    (wt / "huge.txt").write_text("x" * 100 + "\n" * 1 + ("line\n" * 250_000))
    git(wt, "add", "logo.bin", "huge.txt")
    git(wt, "mv", "README.md", "READ-ME.md")
    git(wt, "rm", "-q", "docs/guide.md") if (wt / "docs/guide.md").exists() else None
    git(wt, "commit", "-q", "-m", "binary, big, rename, delete")
    c = Console(repo.work)
    yield c, wt
    assert c.stop() == 0


def test_the_file_list_counts_adds_modifies_deletes_renames_binary_and_big_files(review, repo):
    c, wt = review
    status, data = _get(c, "/api/task/t1/files")
    assert status == 200, data
    assert data["integration"] == "main"
    assert data["head"] == git(wt, "rev-parse", "HEAD") and data["base"] == git(repo.work, "rev-parse", "main")
    by = {f["path"]: f for f in data["files"]}
    # what `git diff --numstat -M main...t1` says, file by file
    numstat = git(wt, "diff", "--numstat", "-M", f"{data['base']}..{data['head']}")
    for line in numstat.splitlines():
        added, deleted, name = line.split("\t")
        path = name.split(" => ")[-1].strip("{}") if "=>" in name else name
        f = by[path if path in by else "READ-ME.md"]
        if f["too_large"]:
            continue  # over the limit: not diffed line by line (git still counts it)
        assert (f["added"], f["deleted"]) == ((None, None) if added == "-" else (int(added), int(deleted))), f
    assert by["src/app.py"]["status"] == "M" and (by["src/app.py"]["added"], by["src/app.py"]["deleted"]) == (5, 1)
    assert by["new.txt"] == {**by["new.txt"], "status": "A", "added": 3, "deleted": 0, "old_path": None}
    assert by["READ-ME.md"]["status"] == "R" and by["READ-ME.md"]["old_path"] == "README.md"
    assert by["logo.bin"]["binary"] and by["logo.bin"]["added"] is None
    assert by["huge.txt"]["too_large"] and not by["huge.txt"]["binary"]
    if "docs/guide.md" in by:
        assert by["docs/guide.md"]["status"] == "D" and by["docs/guide.md"]["added"] == 0
    # an untouched task changed nothing
    assert _get(c, "/api/task/t2/files")[1]["files"] == []


def test_a_diff_is_numbered_as_git_numbers_it_and_binary_or_big_files_are_summarised(review):
    c, wt = review
    status, d = _get(c, "/api/task/t1/diff?path=src/app.py")
    assert status == 200, d
    assert [h["header"] for h in d["hunks"]] == ["@@ -1,2 +1,6 @@"]
    lines = d["hunks"][0]["lines"]
    assert lines[0] == {"kind": " ", "old": 1, "new": 1, "text": "def greet(name):"}
    assert {"kind": "-", "old": 2, "new": None, "text": "    return f'hello {name}'"} in lines
    assert {"kind": "+", "old": None, "new": 6, "text": "    return 'bye'"} in lines
    for path in ("logo.bin", "huge.txt"):
        status, text = c.request("GET", f"/api/task/t1/diff?path={path}")
        d = json.loads(text)
        assert status == 200 and d["hunks"] == [] and (d["binary"] or d["too_large"])
        assert len(text) < 2000  # never the content
    status, d = _get(c, "/api/task/t1/diff?path=READ-ME.md")
    assert d["status"] == "R" and d["old_path"] == "README.md"
    status, d = _get(c, "/api/task/t1/diff?path=nope.txt")
    assert status == 400 and "nope.txt" in d["error"]
    assert _get(c, "/api/task/t1/diff")[0] == 400
    assert _get(c, "/api/task/zz/files")[1]["error"] == "unknown task 'zz' (see `git worker status`)"


def test_the_commits_are_listed_each_with_its_own_diff(review):
    c, wt = review
    status, commits = _get(c, "/api/task/t1/commits")
    assert status == 200
    assert [x["subject"] for x in commits] == ["binary, big, rename, delete", "add new.txt", "greet shorter"]
    assert [x["files"] for x in commits][1:] == [1, 1]
    first = commits[-1]["sha"]
    status, d = _get(c, f"/api/task/t1/diff?path=src/app.py&commit={first}")
    assert status == 200 and d["head"] == first and len(d["hunks"]) == 1
    # new.txt is not in that commit
    assert _get(c, f"/api/task/t1/diff?path=new.txt&commit={first}")[0] == 400
    # a commit that is not the task's is refused
    main = git(wt, "rev-parse", "main")
    status, d = _get(c, f"/api/task/t1/diff?path=src/app.py&commit={main}")
    assert status == 400 and "not one of the commits of t1" in d["error"]


def test_a_commits_file_list_is_that_commit_against_its_parent(review, gw, repo):
    """Even a file the task's whole change no longer has (added by one commit, removed by the next) is listed, with
    the counts `git show --numstat` gives."""
    c, wt = review
    commit_file(wt, "scratch.txt", "a\nb\n", "scratch")
    git(wt, "rm", "-q", "scratch.txt")
    git(wt, "commit", "-q", "-m", "drop scratch")
    status, commits = _get(c, "/api/task/t1/commits")
    added = next(x["sha"] for x in commits if x["subject"] == "scratch")
    status, d = _get(c, f"/api/task/t1/files?commit={added}")
    assert status == 200, d
    assert [(f["path"], f["status"], f["added"], f["deleted"]) for f in d["files"]] == [("scratch.txt", "A", 2, 0)]
    assert d["head"] == added and d["base"] == git(wt, "rev-parse", f"{added}^")
    whole = {f["path"] for f in _get(c, "/api/task/t1/files")[1]["files"]}
    assert "scratch.txt" not in whole
    status, fd = _get(c, f"/api/task/t1/diff?path=scratch.txt&commit={added}")
    assert status == 200 and [ln["text"] for h in fd["hunks"] for ln in h["lines"]] == ["a", "b"]
    main = git(wt, "rev-parse", "main")
    status, d = _get(c, f"/api/task/t1/files?commit={main}")
    assert status == 400 and "not one of the commits of t1" in d["error"]


def test_lines_two_tasks_both_edit_are_flagged_naming_the_other_task(repo, gw):
    flagged_pair(repo.work, gw)
    c = Console(repo.work)
    try:
        for me, other in (("a1", "b2"), ("b2", "a1")):
            files = {f["path"]: f for f in _get(c, f"/api/task/{me}/files")[1]["files"]}
            assert {"line": 2, "task": other} in files["src/app.py"]["flagged"], files
            d = _get(c, f"/api/task/{me}/diff?path=src/app.py")[1]
            assert {"line": 2, "task": other} in d["flagged"]
    finally:
        assert c.stop() == 0


def test_every_new_route_refuses_without_the_token_and_no_get_writes(review):
    c, _ = review
    for path in ("/api/task/t1/files", "/api/task/t1/diff?path=new.txt", "/api/task/t1/commits",
                 "/api/task/t1/output"):
        assert c.request("GET", path, token=False)[0] == 403
        assert c.request("GET", path, headers={"X-Nerve-Token": "wrong"}, token=False)[0] == 403
        assert c.request("GET", path)[0] == 200
    for action in ("approve", "request_changes", "merge", "cancel", "retry", "spawn", "merge_all"):
        assert c.request("POST", f"/api/{action}", body={"task": "t2"}, token=False)[0] == 403
        assert c.request("GET", f"/api/{action}?task=t2")[0] in (404, 405)
    assert _get(c, "/api/task/t2/files")[0] == 200
    state = _get(c, "/api/state")[1]
    assert {w["task_id"]: w["state"] for w in state["workers"]} == {"t1": "ASSIGNED", "t2": "ASSIGNED"}
    # one machine (no shared mode): no machine, no view, every action its state allows (as before issue 24)
    assert "shared" not in state and not any({"machine", "elsewhere", "held_elsewhere"} & set(w) for w in state["workers"])
    assert [w["allowed_actions"] for w in state["workers"]] == [["cancel"], ["cancel"]]


def test_the_running_agents_output_is_followed_live_and_finished_rounds_are_kept(review, repo, monkeypatch):
    from git_nerve.workflow.adapters.base import AgentContext, StartFrame
    from git_nerve.workflow.adapters.command import create_exec

    c, wt = review
    gate = wt.parent / "gate"
    script = ("import sys, time, os\n"
              "print('starting with', os.environ['NERVE_TEST_API_KEY'], flush=True)\n"
              f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\n"
              "print('second line', flush=True); print('on stderr', file=sys.stderr, flush=True)\n")
    secret = "sk-very-secret-123456"
    adapter = create_exec([sys.executable, "-c", script], name="probe", env={"NERVE_TEST_API_KEY": secret})
    start = StartFrame(task_id="t1", workflow="develop", content="x", workdir=str(wt), branch="nerve/t1", base="main")
    ctx = AgentContext(start, (), str(wt), task_id="t1", role="coder", round=3)
    done: list[str] = []
    def agent() -> None:
        try:
            done.append(adapter("prompt", ctx))
        except Exception as exc:  # noqa: BLE001 - shown by the assertions
            done.append(f"raised {exc!r}")

    th = threading.Thread(target=agent)
    th.start()
    try:
        deadline = time.monotonic() + 60  # a loaded machine starts python slowly
        while True:
            out = _get(c, "/api/task/t1/output")[1]
            if "starting" in out["text"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert out["rounds"] == [{"round": 3, "role": "coder", "adapter": "probe", "running": True,
                                  "size": out["rounds"][0]["size"] if out["rounds"] else None}], (out, done)
        assert out["running"] and out["text"] == "starting with [redacted]\n" and secret not in out["text"], out
        gate.write_text("go")
        th.join(60)
        follow = _get(c, f"/api/task/t1/output?round=3&after={out['next']}")[1]
        assert sorted(follow["text"].splitlines()) == ["on stderr", "second line"], (follow, done)
        assert not follow["running"] and follow["next"] == follow["rounds"][0]["size"], follow
        assert _get(c, f"/api/task/t1/output?round=3&after={follow['next']}")[1]["text"] == ""
    finally:
        gate.write_text("go")
        th.join(60)
    assert "second line" in done[0]
    # the finished round is kept on disk, recorded as git-nerve's own (the door may remove only such files)
    from git_nerve.git import ownership

    log = repo.work / ".git" / "nerve" / "runs" / "t1" / "3-coder.log"
    assert log.is_file() and secret.encode() not in log.read_bytes()
    assert ownership.recorded(repo.work / ".git", "runlog", str(log))["task"] == "t1"
    assert _get(c, "/api/task/t1/output?round=3")[1]["text"].startswith("starting with [redacted]")
    assert _get(c, "/api/task/t1/output?after=x")[0] == 400


def test_a_workflow_runs_rounds_are_logged_under_their_thread_round_numbers(review, repo, gn, monkeypatch, tmp_path):
    """`git nerve run` with a command adapter: each role's output is in the log of the round it became."""
    import types

    from pydantic import BaseModel

    from git_nerve.workflow.adapters import create_exec
    from git_nerve.workflow.spec import END, Role, Thread, Workflow

    class Step(BaseModel):
        done: bool

    def moderator(thread: Thread):
        last = thread.last("coder")
        return "coder" if last is None or not last.metadata.get("done") else END

    count = tmp_path / "count"
    script = (f"import json, pathlib; p = pathlib.Path({str(count)!r}); n = int(p.read_text()) + 1 if p.exists() else 1;"
              "p.write_text(str(n)); print(f'pass {n}');"
              "print('```json'); print(json.dumps({'done': n >= 2})); print('```')")
    flow = Workflow(name="loop", roles={"coder": Role(create_exec([sys.executable, "-c", script], name="scripted"),
                                                      "Do it.", Step)}, moderator=moderator, max_rounds=4)
    module = types.ModuleType("nerve_review_flow")
    module.workflow = flow
    monkeypatch.setitem(sys.modules, "nerve_review_flow", module)
    c, wt = review
    assert gn(["tell", "--task", "t1", "a note first (round 1)"], repo.work).code == 0
    res = gn(["run", "nerve_review_flow:workflow", "--task", "t1"], repo.work)
    assert res.code == 0, res
    out = _get(c, "/api/task/t1/output")[1]
    assert [(r["round"], r["role"], r["adapter"], r["running"]) for r in out["rounds"]] == [
        (2, "coder", "scripted", False), (3, "coder", "scripted", False)]
    assert out["round"] == 3 and out["text"].startswith("pass 2\n")
    assert _get(c, "/api/task/t1/output?round=2")[1]["text"].startswith("pass 1\n")
    thread = json.loads(gn(["thread", "t1", "--json"], repo.work).out)
    assert [(r["round"], r["role"]) for r in thread["rounds"]][-2:] == [(2, "coder"), (3, "coder")]


def _state(c: Console) -> dict[str, dict]:
    return {w["task_id"]: w for w in _get(c, "/api/state")[1]["workers"]}


def _until(c: Console, task: str, state: str) -> dict:
    deadline = time.monotonic() + 30
    while True:
        row = _state(c)[task]
        if row["state"] == state or time.monotonic() > deadline:
            return row
        time.sleep(0.1)


def test_actions_apply_the_clis_rules_with_its_messages(repo, gw, gn):
    assert gw("spawn t1 -d 'task t1'", repo.work).code == 0
    wt = worktree_of(repo.work, "t1", gw)
    c = Console(repo.work)
    try:
        # spawn from the page: the same checks as `git worker spawn` (bad input leaves nothing behind)
        status, data = post_action(c, "spawn", {"name": "t2", "description": "the second"})
        assert status == 200 and data["created"] and data["worker"]["state"] == "ASSIGNED"
        status, data = post_action(c, "spawn", {"name": "bad name", "description": "x"})
        cli = gw("spawn 'bad name' -d x", repo.work)
        assert status == 400 and cli.code == data["code"] == 2 and cli.err.strip() == f"error: {data['error']}"
        # approve a WORKING task: exactly the CLI's refusal
        assert gw("start", wt).code == 0
        row = _until(c, "t1", "WORKING")
        assert row["allowed_actions"] == ["cancel"]
        status, data = post_action(c, "approve", {"task": "t1"})
        cli = gw("approve t1", repo.work)
        assert status == 409 and data["code"] == cli.code == 3 and cli.err.strip() == f"error: {data['error']}"
        assert "it is WORKING" in data["error"]
        commit_file(wt, "feature.txt", "one\ntwo\n", "add the feature")
        assert gw("done", wt).code == 0
        assert _until(c, "t1", "IN_REVIEW")["allowed_actions"] == ["approve", "request_changes", "cancel"]
        # request changes with comments on lines: the agent reads them in `git nerve thread`
        status, data = post_action(c, "request_changes", {"task": "t1", "comment": "almost", "comments": [
            {"path": "feature.txt", "line": 2, "text": "say three"}, {"path": "feature.txt", "line": 1, "text": "and <b>"}]})
        assert status == 200 and data["worker"]["state"] == "WORKING", data
        thread = gn("thread", wt).out
        assert "almost\nfeature.txt:2: say three\nfeature.txt:1: and <b>" in thread
        status, data = post_action(c, "request_changes", {"task": "t1", "comments": [{"path": "f", "line": 0, "text": "x"}]})
        assert status == 400 and "line" in data["error"]
        commit_file(wt, "feature.txt", "one\nthree\n", "say three")
        assert gw("done", wt).code == 0
        assert post_action(c, "approve", {"task": "t1"})[0] == 200
        assert _until(c, "t1", "APPROVED")["allowed_actions"] == ["request_changes", "merge", "cancel"]
        # merge with a check that fails: nothing moves, the CLI's exit 7
        main = git(repo.work, "rev-parse", "main")
        status, data = post_action(c, "merge", {"task": "t1", "check": "grep -q four feature.txt"})
        assert status == 409 and data["code"] == 7 and "nothing was merged" in data["error"]
        assert git(repo.work, "rev-parse", "main") == main and _state(c)["t1"]["state"] == "APPROVED"
        # check: true runs nerve.toml's test command, as the merge check
        status, data = post_action(c, "merge", {"task": "t1", "check": True})
        assert status == 400 and "test_command" in data["error"]
        (repo.work / "nerve.toml").write_text('[run]\ntest_command = "grep -q three feature.txt"\n')
        # ... only once trusted on this machine (issue 35): refused like a failed check, nothing merged
        status, data = post_action(c, "merge", {"task": "t1", "check": True})
        assert status == 409 and data["code"] == 7 and "git nerve trust" in data["error"], data
        assert git(repo.work, "rev-parse", "main") == main and _state(c)["t1"]["state"] == "APPROVED"
        assert gn("trust", repo.work).code == 0
        status, data = post_action(c, "merge", {"task": "t1", "check": True})
        assert status == 200 and data["state"] == "COMPLETED", data
        assert git(repo.work, "rev-parse", "main") == data["merge_commit"]
        assert _until(c, "t1", "COMPLETED")["allowed_actions"] == []
        # a merged task still shows what its merge brought (its worktree is gone; its tip is archived)
        files = _get(c, "/api/task/t1/files")[1]
        assert [(f["path"], f["status"], f["added"]) for f in files["files"]] == [("feature.txt", "A", 2)], files
        assert [x["subject"] for x in _get(c, "/api/task/t1/commits")[1]] == ["say three", "add the feature"]
        # cancel with cleanup, then retry: the worktree goes (archived) and comes back
        wt2 = worktree_of(repo.work, "t2", gw)
        status, data = post_action(c, "cancel", {"task": "t2", "cleanup": True, "reason": "not now"})
        assert status == 200 and data["worker"]["state"] == "FAILED" and data["worktree_removed"] and not wt2.exists()
        assert _until(c, "t2", "FAILED")["allowed_actions"] == ["retry"]
        status, data = post_action(c, "retry", {"task": "t2"})
        assert status == 200 and data["worker"]["state"] == "ASSIGNED" and wt2.is_dir()
        # the queue: nothing approved is nothing to merge
        status, data = post_action(c, "merge_all", {"check": True})
        assert status == 200 and data["summary"] == "nothing to merge: no task is APPROVED" and data["code"] == 0
    finally:
        assert c.stop() == 0


def test_merge_all_runs_the_queue_with_its_check(repo, gw):
    for t in ("qa", "qb"):
        assert gw(f"spawn {t}", repo.work).code == 0
        wt = worktree_of(repo.work, t, gw)
        assert gw("start", wt).code == 0
        commit_file(wt, f"{t}.txt", f"{t}\n", f"add {t}")
        assert gw("done", wt).code == 0
        assert gw(f"approve {t}", repo.work).code == 0
    c = Console(repo.work)
    try:
        main = git(repo.work, "rev-parse", "main")
        # a check every merge fails: nothing moves, each failure named with the CLI's exit code (7)
        status, data = post_action(c, "merge_all", {"check": "test -f nope.txt"})
        assert status == 200 and data["code"] == 7 and [f["task_id"] for f in data["failed"]] == ["qa", "qb"]
        assert all("nothing was merged" in f["error"] and f["code"] == 7 for f in data["failed"])
        assert git(repo.work, "rev-parse", "main") == main
        assert {t: w["state"] for t, w in _state(c).items()} == {"qa": "APPROVED", "qb": "APPROVED"}
        status, data = post_action(c, "merge_all", {"check": "test -f qa.txt"})
        assert status == 200 and data["code"] == 0, data
        assert data["summary"] == "merged 2 task(s): qa, qb" and [m["state"] for m in data["merged"]] == ["COMPLETED"] * 2
        assert git(repo.work, "show", "main:qb.txt") == "qb"
    finally:
        assert c.stop() == 0


def test_a_secret_split_across_two_reads_never_reaches_the_log(repo):
    from git_nerve.workflow import runlog

    secret = "tok-abcdefghijklmnop"
    tee = runlog.open_tee(repo.work / ".git", "t9", 1, "coder", "probe", {"MY_API_TOKEN": secret, "HOME": "/home/x"})
    tee.write("stdout", b"key=" + secret[:7].encode())
    # the unfinished line (with the bytes that could begin the secret) waits for its end
    assert (repo.work / ".git/nerve/runs/t9/1-coder.log").read_bytes() == b""
    assert runlog.read(repo.work / ".git", "t9")["running"] is True
    tee.write("stdout", secret[7:].encode() + b" and /home/x\n")
    tee.write("stderr", b"tok-abc")  # a prefix that never completes is written when the round ends
    tee.close()
    got = runlog.read(repo.work / ".git", "t9")
    assert got["text"] == "key=[redacted] and /home/x\ntok-abc" and not got["running"]
    assert got["rounds"] == [{"round": 1, "role": "coder", "adapter": "probe", "running": False, "size": len(got["text"])}]


def test_since_the_last_review_lists_only_what_changed_after_the_tip_reviewed(repo, gw):
    work = repo.work
    assert gw("spawn t1", work).code == 0
    wt = worktree_of(work, "t1", gw)
    assert gw("start", wt).code == 0
    commit_file(wt, "a.txt", "one\n", "t1: a")
    commit_file(wt, "b.txt", "one\n", "t1: b")
    assert gw("done", wt).code == 0
    c = Console(work)
    try:
        status, body = _get(c, "/api/task/t1/files?since=review")
        assert status == 400 and body["error"].startswith("no earlier review of t1"), body
        assert _get(c, "/api/task/t1/files")[1]["reviewed"] is None
        assert gw("request-changes t1 --comment 'b is wrong'", work).code == 0
        commit_file(wt, "b.txt", "two\n", "t1: fix b")
        assert gw("done", wt).code == 0
        whole = _get(c, "/api/task/t1/files")[1]
        assert {f["path"] for f in whole["files"]} == {"a.txt", "b.txt"} and whole["reviewed"]
        status, since = _get(c, "/api/task/t1/files?since=review")
        assert status == 200 and since["since_review"] and since["base"] == whole["reviewed"]
        assert [f["path"] for f in since["files"]] == ["b.txt"]  # a.txt did not change since the review
        fd = _get(c, "/api/task/t1/diff?path=b.txt&since=review")[1]
        assert [(ln["kind"], ln["text"]) for h in fd["hunks"] for ln in h["lines"]] == [("-", "one"), ("+", "two")]
        assert _get(c, "/api/task/t1/files?since=yesterday")[0] == 400
    finally:
        assert c.stop() == 0
