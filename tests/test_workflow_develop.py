"""End to end: the built-in `develop` workflow on a fake `claude` in a real worktree, and the
API key of an HTTP adapter never reaching the bus, the thread, the output or the logs."""

from __future__ import annotations

import json
import logging
import subprocess

import pytest

from fixtures.agents import ChatServer, Reply, completion, install
from git_nerve.bus import rounds
from git_nerve.bus.connection import Bus


def block(data: dict) -> str:
    return f"```json\n{json.dumps(data)}\n```\n"


def git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def spawned(repo, gw):
    res = gw(["spawn", "t1", "-d", "Add greet_all(names) to src/app.py"], repo.work)
    assert res.code == 0, res
    worktree = repo.work.parent / "project.worktrees" / "t1"
    assert worktree.is_dir()
    return repo.work, worktree


def test_develop_end_to_end_in_a_real_worktree(spawned, gn, gw, monkeypatch, tmp_path):
    work, worktree = spawned
    fakes = install(monkeypatch, tmp_path / "fakes")
    buggy = "def greet(name):\n    return f'hello {name}'\n\n\ndef greet_all(names):\n    return ';'.join(greet(n) for n in names)\n"
    fixed = buggy.replace("';'", "', '")
    fakes.script([
        {"expect_role": "coder", "write": {"src/app.py": buggy}, "commit": "add greet_all",
         "stdout": "Added greet_all.\n" + block({"summary": "added greet_all", "files_changed": ["src/app.py"]})},
        {"expect_role": "tester",
         "stdout": "Ran the tests: 1 failed.\n" + block({"passed": False, "failures": ["test_greet_all: wrong separator"]})},
        {"expect_role": "coder", "write": {"src/app.py": fixed}, "commit": "greet_all: join with a comma",
         "stdout": "Fixed the separator.\n" + block({"summary": "comma separator"})},
        {"expect_role": "tester", "stdout": "All green.\n```yaml\npassed: true\n```\n"},
        {"expect_role": "reviewer", "stdout": "---\napproved: true\nsummary: small and correct\n---\nLooks good to me."},
    ])
    res = gn("run develop", worktree / "src")  # from a subdirectory of the task's worktree
    assert res.code == 0, res
    assert res.out.startswith("workflow develop on t1: completed")
    assert "coder (claude) ..." in res.err and "#5 reviewer: ok" in res.err

    calls = fakes.calls()
    assert [c["role"] for c in calls] == ["coder", "tester", "coder", "tester", "reviewer"]
    for call in calls:
        assert call["agent"] == "claude" and call["cwd"] == str(worktree)
        assert call["argv"][:4] == ["-p", "--output-format", "stream-json", "--verbose"]
        assert "git nerve thread" in call["prompt"]
        assert all("Add greet_all" not in a for a in call["argv"])  # the prompt came on stdin
    assert "Add greet_all(names) to src/app.py" in calls[0]["prompt"]
    assert "round #2" in calls[2]["prompt"]  # the second pass points at the failed test round
    assert "git diff refs/heads/main...HEAD" in calls[4]["prompt"]

    bus = Bus(work / ".git" / "nerve" / "bus.db")
    got = rounds.load(bus.conn, "t1", [1, 2, 3, 4, 5])
    bus.close()
    assert [r.role for r in got] == ["coder", "tester", "coder", "tester", "reviewer"]
    assert got[1].metadata["passed"] is False and got[1].metadata["failures"] == ["test_greet_all: wrong separator"]
    assert got[3].metadata["passed"] is True and got[4].metadata["approved"] is True
    assert all(r.metadata["adapter"] == "claude" and r.metadata["workflow"] == "develop" for r in got)

    assert git(worktree, "log", "--format=%s", "main..HEAD").splitlines() == ["greet_all: join with a comma", "add greet_all"]
    assert (worktree / "src" / "app.py").read_text() == fixed

    thread = gn("thread", worktree)
    assert "[#2 tester]" in thread.out and "passed: false" in thread.out and "Looks good to me." in thread.out
    assert gw("done", worktree).code == 0  # the agents left a clean, committed worktree


def test_develop_stops_at_its_round_limit(spawned, gn, monkeypatch, tmp_path):
    work, _ = spawned
    fakes = install(monkeypatch, tmp_path / "fakes")
    fakes.script([
        {"expect_role": "coder", "write": {"a.txt": "1\n"}, "commit": "try", "stdout": block({"summary": "tried"})},
        {"expect_role": "tester", "stdout": block({"passed": True})},
        {"expect_role": "reviewer", "stdout": block({"approved": False, "comments": ["rename it"]})},
        {"expect_role": "coder", "write": {"a.txt": "2\n"}, "commit": "rename", "stdout": block({"summary": "renamed"})},
    ])
    res = gn("run develop --task t1 --max-rounds 4 --json", work)
    data = json.loads(res.out)
    assert res.code == 1 and data["outcome"] == "round_limit" and data["exit_code"] == 1
    assert [r["role"] for r in data["rounds"]] == ["coder", "tester", "reviewer", "coder"]
    assert "the moderator wanted tester next" in data["reason"]


def test_develop_ends_when_an_agent_fails(spawned, gn, monkeypatch, tmp_path):
    work, _ = spawned
    fakes = install(monkeypatch, tmp_path / "fakes")
    fakes.script([{"expect_role": "coder", "exit": 1, "stderr": "API Error: 529 overloaded\n"}])
    res = gn("run develop --task t1", work)
    assert res.code == 1
    assert "failed (the coder failed (non_zero_exit))" in res.out
    assert "API Error: 529 overloaded" in res.out  # the summary quotes the error


KEY = "sk-live-PLANTED-9f8e7d6c5b4a3210"

SECRET_FLOW = """
import os
from pydantic import BaseModel
from git_nerve.workflow import END, Role, Workflow
from git_nerve.workflow.adapters import create_http


class Plan(BaseModel):
    steps: list[str]


planner = create_http(os.environ["TEST_CHAT_URL"], "fake-model", api_key_env="NERVE_TEST_API_KEY")

workflow = Workflow(
    name="plan",
    roles={"planner": Role(planner, "Plan the work.", Plan)},
    moderator=lambda thread: "planner" if len(thread.rounds) < 2 else END,
)
"""


def test_the_api_key_never_reaches_the_bus_the_thread_the_output_or_the_logs(spawned, gn, monkeypatch, caplog):
    work, _ = spawned
    server = ChatServer()
    try:
        monkeypatch.setenv("NERVE_TEST_API_KEY", KEY)
        monkeypatch.setenv("TEST_CHAT_URL", server.base_url)
        (work / ".nerve" / "workflows").mkdir(parents=True)
        (work / ".nerve" / "workflows" / "plan.py").write_text(SECRET_FLOW, encoding="utf-8")
        (work / "nerve.toml").write_text(
            f'[extract]\nprovider = "llm"\nbase_url = "{server.base_url}"\nmodel = "extractor"\napi_key_env = "NERVE_TEST_API_KEY"\n'
        )
        assert gn("trust", work).code == 0  # the person's own workflow and endpoint (issue 35)
        server.reply(
            Reply(body=completion("First write the test, then the code.")),  # no block: the LLM extract runs
            Reply(body=completion('{"steps": ["write the test", "write the code"]}')),  # the extract endpoint
            Reply(status=401, echo_auth=True),  # a careless server echoing the credentials
        )
        caplog.set_level(logging.DEBUG)
        run = gn("run plan --task t1", work)
        thread = gn("thread t1", work)
        thread_json = gn("thread t1 --json", work)
        validate = gn("validate --json", work)
    finally:
        server.close()
    assert run.code == 0, run
    auth = [r["headers"].get("Authorization") for r in server.requests]
    assert auth == [f"Bearer {KEY}"] * 3  # the key was really used...
    assert "[redacted]" in thread.out and "bad credentials" in thread.out
    assert "write the test" in thread.out
    everything = [run.out, run.err, thread.out, thread.err, thread_json.out, validate.out, caplog.text]
    assert not [text for text in everything if KEY in text]  # ...and is nowhere else
    for path in (work / ".git").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for path in (work / "nerve.toml", work / ".nerve" / "workflows" / "plan.py"):
        assert KEY not in path.read_text()
