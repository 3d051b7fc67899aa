"""`git nerve mcp`: the server, driven by the official SDK's own client, on real repositories.

In process (mcp.Client over the SDK's memory transport) for the tools, and once
over stdio as a subprocess (the real `git nerve mcp` command a CLI starts).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.conftest import BIN, cli, run

mcp = pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.types import Implementation  # noqa: E402


def _worktree(main_dir: Path, task: str = "t1") -> Path:
    assert cli(["init"], main_dir, prog="nerve").code == 0
    r = cli(["spawn", task, "-d", "a task for MCP"], main_dir)
    assert r.code == 0, r
    wt = Path(json.loads(cli(["status", "--json"], main_dir).out)[0]["worktree"])
    assert cli(["start"], wt).code == 0
    return wt


def _text(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def _call(server, calls, client_name="test-client", version="9.9"):
    """Run ``calls`` (name, args) against ``server``; the results in order."""
    out = []

    async def main():
        async with Client(server, client_info=Implementation(name=client_name, version=version), mode="legacy") as c:
            for name, args in calls:
                out.append(await c.call_tool(name, args))

    anyio.run(main)
    return out


@pytest.fixture
def main_dir(repo):
    return repo.work


@pytest.fixture
def worktree(main_dir):
    return _worktree(main_dir)


def _server(wt: Path, pid: int | None = 4242):
    from git_nerve.mcptools import server, tools

    return server.build(tools.bind(wt), client_pid=pid)


def test_the_tools_listed_are_ours(worktree):
    from git_nerve.mcptools.server import TOOL_NAMES

    async def main():
        async with Client(_server(worktree), mode="legacy") as c:
            return sorted(t.name for t in (await c.list_tools()).tools)

    assert anyio.run(main) == sorted(TOOL_NAMES)


def test_thread_is_the_text_git_nerve_thread_prints(worktree):
    for i in range(6):
        assert cli(["post", "--role", "coder", f"round {i} " + "x" * 300], worktree, prog="nerve").code == 0
    expected = run([str(BIN / "git-nerve"), "thread", "--budget", "700"], worktree)
    assert expected.code == 0
    back = run([str(BIN / "git-nerve"), "thread", "--before", "4", "--budget", "400"], worktree)

    got, got_back = _call(_server(worktree), [("thread", {"budget": 700}), ("thread", {"before": 4, "budget": 400})])

    assert not got.is_error and _text(got) == expected.out.rstrip("\n")
    assert "omitted" in _text(got)  # the budget really cut something
    assert _text(got_back) == back.out.rstrip("\n")


def test_post_and_heartbeat_show_in_the_thread_and_in_worker_status(worktree, main_dir):
    post, hb = _call(_server(worktree), [
        ("post", {"role": "tester", "content": "all green", "metadata": {"passed": True, "tests": 3}}),
        ("heartbeat", {"status": "running the tests", "progress": 0.5}),
    ])
    assert not post.is_error and "round 1" in _text(post)
    assert not hb.is_error and _text(hb).startswith("heartbeat: t1 at ")
    thread = json.loads(run([str(BIN / "git-nerve"), "thread", "--json"], worktree).out)
    assert thread["rounds"][-1]["role"] == "tester" and thread["rounds"][-1]["metadata"] == {"passed": True, "tests": 3}
    row = json.loads(run([str(BIN / "git-worker"), "status", "--json"], main_dir).out)[0]
    assert row["status"] == "running the tests" and row["progress"] == 0.5


def test_notes_are_delivered_once_to_the_client_and_its_pid_and_acted_on(worktree, main_dir):
    assert cli(["tell", "--task", "t1", "use the v2 API\x1b[31m please"], main_dir, prog="nerve").code == 0
    first, second, acted = _call(_server(worktree, pid=31337), [
        ("notes", {}), ("notes", {}), ("note_acted", {"how": "switched to the v2 API"}),
    ], client_name="claude-code", version="2.1.330")

    assert "use the v2 API" in _text(first) and "\x1b" not in _text(first) and "\\e[31m" in _text(first)
    assert _text(second) == "no new notes for t1"
    assert "note #" in _text(acted)
    outbox = run([str(BIN / "git-nerve"), "outbox", "--json"], main_dir)
    assert outbox.code == 0, outbox
    lines = json.dumps(json.loads(outbox.out))
    assert "note delivered to claude-code/2.1.330 (pid 31337) via mcp" in lines
    assert "note acted on by claude-code/2.1.330: switched to the v2 API" in lines
    show = run([str(BIN / "git-worker"), "show", "t1"], main_dir)
    assert "acted on" in show.out


def test_done_refuses_without_a_commit_and_finishes_with_one(worktree, main_dir):
    (refused,) = _call(_server(worktree), [("done", {})])
    assert refused.is_error
    assert _text(refused) == "Error executing tool done: not marked done: no commit on feat/t1 beyond main; commit your work first"
    assert json.loads(cli(["status", "--json"], main_dir).out)[0]["state"] == "WORKING"

    (worktree / "feature.txt").write_text("x\n")
    (dirty,) = _call(_server(worktree), [("done", {})])
    assert dirty.is_error and "feature.txt" in _text(dirty)

    subprocess.run(["git", "add", "feature.txt"], cwd=worktree, check=True)
    subprocess.run(["git", "commit", "-qm", "feature"], cwd=worktree, check=True)
    (ok,) = _call(_server(worktree), [("done", {})])
    assert not ok.is_error, _text(ok)
    assert json.loads(cli(["status", "--json"], main_dir).out)[0]["state"] == "IN_REVIEW"


def test_state_and_conflicts_and_bad_arguments(worktree):
    state, conflicts, bad = _call(_server(worktree), [
        ("state", {}), ("conflicts", {"refresh": True}), ("heartbeat", {"progress": 3}),
    ])
    data = json.loads(_text(state))
    assert data["task_id"] == "t1" and data["state"] == "WORKING" and data["unread_notes"] == 0
    assert not conflicts.is_error and "no overlaps between t1" in _text(conflicts)
    assert bad.is_error and "\n" not in _text(bad).strip()


def test_outside_a_task_the_task_tools_say_so_in_one_line(main_dir):
    from git_nerve.mcptools import server, tools

    assert cli(["init"], main_dir, prog="nerve").code == 0
    (res,) = _call(server.build(tools.bind(main_dir)), [("thread", {})])
    assert res.is_error and _text(res).startswith("Error executing tool thread: this MCP server was not started inside a task's worktree")


def test_git_nerve_mcp_over_stdio_is_a_real_server(worktree, tmp_path):
    """The command a CLI starts: initialize, list tools, a heartbeat; clientInfo names the reader."""
    exe = str(BIN / "git-nerve")

    async def main():
        params = StdioServerParameters(command=exe, args=["mcp"], cwd=str(worktree), env=dict(os.environ))
        async with Client(params, client_info=Implementation(name="stdio-client", version="1"), mode="legacy") as c:
            names = {t.name for t in (await c.list_tools()).tools}
            hb = await c.call_tool("heartbeat", {"status": "over stdio"})
            return names, _text(hb)

    names, hb = anyio.run(main)
    assert "thread" in names and hb.startswith("heartbeat: t1")
    row = json.loads(cli(["status", "--json"], worktree).out)[0]
    assert row["status"] == "over stdio"


def test_git_nerve_mcp_outside_a_repository_exits_2_with_one_line(tmp_path):
    proc = subprocess.run([str(BIN / "git-nerve"), "mcp"], cwd=tmp_path, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: not a git repository")


def test_runs_allow_our_tools_by_name_never_the_whole_server_nor_done():
    from git_nerve.workflow.adapters import claude, gemini

    allow = claude.settings("/w")["permissions"]["allow"]
    ours = [r for r in allow if r.startswith("mcp__")]
    assert ours == [f"mcp__nerve__{t}" for t in ("thread", "post", "heartbeat", "state", "knowledge_query",
                                                   "conflicts", "notes", "note_acted")]
    assert "mcp__nerve" not in allow and "mcp__nerve__done" not in allow and not any("*" in r for r in ours)
    rule = gemini.mcp_policy_text()
    assert 'mcpName = "nerve"' in rule and '"done"' not in rule and '"*"' not in rule
