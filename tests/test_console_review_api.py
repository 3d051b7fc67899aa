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
from console_support import Console
from fixtures.repos.build import commit_file


def _get(c: Console, path: str):
    status, text = c.request("GET", path)
    return status, json.loads(text) if text.startswith(("{", "[")) else text


def _post(c: Console, action: str, body: dict):
    status, text = c.request("POST", f"/api/{action}", body=body)
    return status, json.loads(text)


def _worktree(gw, work: Path, task: str) -> Path:
    rows = json.loads(gw("status --json", work).out)
    return Path(next(r for r in rows if r["task_id"] == task)["worktree"])


@pytest.fixture
def review(repo, gw):
    """t1 changed files every way git tells apart (its own commits), t2 spawned untouched; a console."""
    for t in ("t1", "t2"):
        assert gw(f"spawn {t} -d 'task {t}'", repo.work).code == 0
    wt = _worktree(gw, repo.work, "t1")
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


def test_lines_two_tasks_both_edit_are_flagged_naming_the_other_task(repo, gw):
    for t in ("a1", "b2"):
        assert gw(f"spawn {t}", repo.work).code == 0
    commit_file(_worktree(gw, repo.work, "a1"), "src/app.py", "def greet(name):\n    return f'A {name}'\n")
    commit_file(_worktree(gw, repo.work, "b2"), "src/app.py", "def greet(name):\n    return f'B {name}'\n")
    assert gw("conflicts --refresh", repo.work).code in (0, 1)
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
    th = threading.Thread(target=lambda: done.append(adapter("prompt", ctx)))
    th.start()
    try:
        deadline = time.monotonic() + 20
        while True:
            out = _get(c, "/api/task/t1/output")[1]
            if "starting" in out["text"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert out["rounds"] == [{"round": 3, "role": "coder", "adapter": "probe", "running": True,
                                  "size": out["rounds"][0]["size"]}]
        assert out["running"] and out["text"] == "starting with [redacted]\n" and secret not in out["text"]
        gate.write_text("go")
        th.join(20)
        follow = _get(c, f"/api/task/t1/output?round=3&after={out['next']}")[1]
        assert follow["text"].splitlines() == ["second line", "on stderr"] or sorted(follow["text"].splitlines()) == [
            "on stderr", "second line"]
        assert not follow["running"] and follow["next"] == follow["rounds"][0]["size"]
        assert _get(c, f"/api/task/t1/output?round=3&after={follow['next']}")[1]["text"] == ""
    finally:
        gate.write_text("go")
        th.join(20)
    assert "second line" in done[0]
    # the round is kept on disk, recorded as ours
    log = Path(git(repo.work, "rev-parse", "--git-common-dir")).resolve() if False else None
    assert _get(c, "/api/task/t1/output?round=3")[1]["text"].startswith("starting with [redacted]")
    assert _get(c, "/api/task/t1/output?after=x")[0] == 400
