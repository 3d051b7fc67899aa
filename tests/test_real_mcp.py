"""git-nerve's MCP server with real agent CLIs (pinned, installed by tests/realtools.py).

* A workflow run on the real Claude Code against the scripted model in mode
  "mcp": the model calls our tools by the names Claude Code gives them
  (mcp__nerve__<tool>); the test checks what they returned (the tool results
  Claude Code sent back to the model) and what they changed on the bus (a note
  delivered to Claude Code by its client name and pid, acted on; the heartbeat's
  status; a posted round), and that `done`, which a run does not allow, was refused.
* `git nerve mcp install` / `uninstall` seen by each CLI's own `mcp list` (Claude
  Code and Gemini CLI connect to the server to list it), and every other byte of
  their configuration files left alone.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
import tomli_w

from git_nerve.demo.scripted_model.scenario import CODER_LINE, MCP_POST, MCP_STATUS, TEST_CMD
from git_nerve.demo.scripted_model.server import API_KEY, ScriptedModel
from tests.real_agents import VENV_BIN, AgentRepo, _check, agent_env
from tests.agent_drivers import DRIVERS, env_for

pytestmark = pytest.mark.real

NOTE = "Keep the README line short, please."


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return DRIVERS["claude"].install()


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return DRIVERS["gemini"].install()


def _params(repo: AgentRepo) -> dict:
    return {"workdir": str(repo.worktree), "home": str(Path(agent_env("x")["HOME"])), "base": repo.base}


def _deliveries(work: Path) -> list:
    from git_nerve.bus import steer
    from git_nerve.bus.connection import Bus

    with Bus(work / ".git" / "nerve" / "bus.db") as bus:
        return steer.deliveries_for(bus.conn, "t1")


def test_claude_code_calls_our_mcp_tools_in_a_workflow_run(tmp_path, claude_bin):
    repo = AgentRepo.create(tmp_path, "claude")
    # This test is about the MCP notes tool: the run gets the adapter's own permission rules but not its notes
    # hook (which would hand the note over first, at the prompt: tests/test_real_claude_notes.py covers that door).
    from git_nerve.workflow.adapters import claude

    settings = tmp_path / "claude-settings-without-notes-hook.json"
    settings.write_text(json.dumps(claude.settings(str(repo.worktree), TEST_CMD, None)))
    toml = repo.work / "nerve.toml"
    data = tomllib.loads(toml.read_text())
    data.setdefault("adapters", {}).setdefault("claude", {})["extra_args"] = ["--settings", str(settings)]
    toml.write_text(tomli_w.dumps(data))  # the main checkout's nerve.toml counts, committed or not
    env = agent_env(claude_bin, ANTHROPIC_API_KEY=API_KEY)
    _check(["git", "nerve", "trust"], repo.work, env)  # the person's own extra_args (issue 35: else left out)
    _check(["git", "nerve", "tell", "--task", "t1", NOTE], repo.work, env)
    with ScriptedModel(mode="mcp", params=_params(repo)) as model:
        env["ANTHROPIC_BASE_URL"] = model.url
        res = repo.run_develop(env)
        coder = model.results("coder")
        log = [(e.role, e.step, e.reply_text[:400], e.tool_calls, [r[:300] for r in e.results[-1:]])
               for e in model.entries()]
        tester, reviewer = model.results("tester"), model.results("reviewer")
    assert res.code == 0 and res.result.get("outcome") == "completed", (res, log)

    # what our tools returned, as Claude Code handed it back to the model
    assert any(NOTE in r and "note #" in r for r in coder), coder  # notes: the person's note
    assert any("recorded as acted on: note #" in r for r in coder), coder
    assert any(r.startswith("heartbeat: t1 at ") for r in coder), coder
    # thread: the very text `git nerve thread` prints (then the thread held only the person's note, round 1)
    first_round = _check(["git", "nerve", "thread", "--before", "2"], repo.worktree, env).rstrip("\n")
    # (after the task's briefing, which opens the first page: issue 37)
    assert first_round.startswith("[#1 human]") and any(r.endswith(first_round) for r in coder), (first_round, coder)
    assert any("round" in r and "posted to the thread of t1" in r for r in coder), coder
    assert any('"state": "WORKING"' in r for r in coder), coder  # state
    done = [r for r in coder if "done" in r.lower() and ("permission" in r.lower() or "denied" in r.lower())]
    assert done, coder  # `done` is not among the tools a run allows: refused by Claude Code, not run
    for role, results in (("tester", tester), ("reviewer", reviewer)):
        assert any("[#1 " in r and "coder" in r for r in results), (role, results)  # the thread via MCP

    # what they changed on the bus
    (d,) = _deliveries(repo.work)
    assert d.via == "mcp" and d.reader.startswith("claude-code/"), d
    assert d.pid and d.pid > 1 and d.acted == "read the note before starting", d
    view = repo.view()
    assert any(b.payload.get("source") == "mcp" and b.payload.get("status") == MCP_STATUS for b in view.heartbeats)
    posted = [r for r in view.rounds if r.role == "coder-note"]
    assert posted and posted[0].content == MCP_POST and posted[0].metadata == {"via": "mcp"}
    assert view.worker.state == "WORKING"  # the run, not the agent, decides when the task is done
    outbox = json.dumps(json.loads(_check(["git", "nerve", "outbox", "--json"], repo.work, env)))
    assert f"note delivered to {d.reader} (pid {d.pid}) via mcp" in outbox
    diff = subprocess.run(["git", "diff", f"{repo.base}..HEAD"], cwd=repo.worktree, capture_output=True, text=True).stdout
    assert f"+{CODER_LINE}" in diff


def _files(*paths: Path) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.exists() else None) for p in paths}


def test_install_is_what_claude_and_gemini_list_and_uninstall_restores_every_byte(tmp_path, claude_bin, gemini_bin):
    repo = AgentRepo.create(tmp_path, "claude")
    env = agent_env(claude_bin)
    env["PATH"] = f"{Path(gemini_bin).parent}:{env['PATH']}"
    home = Path(env["HOME"])
    # the user's own configuration, written the way each CLI writes it: other servers, other settings
    claude_json = home / ".claude.json"
    claude_json.write_text(json.dumps({"numStartups": 3, "mcpServers": {"other": {
        "type": "stdio", "command": "/bin/true", "args": [], "env": {}}}}, indent=2))
    gemini_settings = home / ".gemini" / "settings.json"
    gemini_settings.parent.mkdir(parents=True, exist_ok=True)
    gemini_settings.write_text(json.dumps({"ui": {"theme": "Default"}}, indent=2) + "\n")
    # the user trusts these folders (Gemini CLI starts no MCP server in an untrusted one)
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(repo.work): "TRUST_FOLDER",
                                                                       str(repo.worktree): "TRUST_FOLDER"}))
    project = [repo.work / ".mcp.json", repo.work / ".gemini" / "settings.json"]
    _check([str(claude_bin), "mcp", "list"], repo.worktree, env)  # Claude Code adds its own keys to ~/.claude.json
    before = _files(claude_json, gemini_settings, *project)

    out = json.loads(_check(["git", "nerve", "mcp", "install", "claude", "gemini", "--json"], repo.worktree, env))
    assert [(r["cli"], r["action"]) for r in out] == [("claude", "installed"), ("gemini", "installed")], out
    out = json.loads(_check(["git", "nerve", "mcp", "install", "claude", "gemini", "--scope", "project", "--json"],
                            repo.work, env))
    assert [r["action"] for r in out] == ["installed", "installed"], out
    exe = str(VENV_BIN / "git-nerve")

    # each CLI's own view: it reads the entry and connects to the server (started in the task's worktree)
    claude_list = _check([str(claude_bin), "mcp", "list"], repo.worktree, env)
    line = next(ln for ln in claude_list.splitlines() if ln.startswith("nerve"))
    assert f"{exe} mcp" in line and "Connected" in line, claude_list
    gemini_list = subprocess.run([str(gemini_bin), "mcp", "list"], cwd=repo.worktree, env=env, capture_output=True,
                                 text=True, timeout=120)
    listed = gemini_list.stdout + gemini_list.stderr
    assert "nerve" in listed and f"{exe} mcp" in listed and "Connected" in listed, listed

    out = json.loads(_check(["git", "nerve", "mcp", "uninstall", "--json"], repo.worktree, env))
    assert sorted(r["action"] for r in out) == ["removed"] * 4, out
    assert _files(claude_json, gemini_settings, *project) == before
    assert "nerve" not in _check([str(claude_bin), "mcp", "list"], repo.worktree, env).split()


def test_gemini_cli_calls_our_mcp_tools_in_a_workflow_run(tmp_path, gemini_bin):
    repo = AgentRepo.create(tmp_path, "gemini")
    with ScriptedModel(mode="mcp", params=_params(repo)) as model:
        env = env_for(DRIVERS["gemini"], gemini_bin, model)
        # the user registers git-nerve's server with Gemini CLI once; the adapter's policy allows its tools
        _check(["git", "nerve", "mcp", "install", "gemini"], repo.work, env)
        _check(["git", "nerve", "tell", "--task", "t1", NOTE], repo.work, env)
        res = repo.run_develop(env)
        coder = model.results("coder")
        log = [(e.role, e.step, e.reply_text[:300], e.tool_calls, [r[:300] for r in e.results[-1:]])
               for e in model.entries()]
    assert res.code == 0 and res.result.get("outcome") == "completed", (res, log)
    assert any(NOTE in r for r in coder), log
    assert any("heartbeat: t1 at " in r for r in coder), log
    first_round = _check(["git", "nerve", "thread", "--before", "2"], repo.worktree, env).rstrip("\n")
    assert any(first_round in r for r in coder), (first_round, log)
    # `done` is not among the tools a run allows: Gemini CLI does not even offer it to the model
    offered = [e for e in log if e[0] == "coder" and "is not offered" in e[2]]
    assert offered and "'done'" in offered[0][2] and "mcp_nerve_thread" in offered[0][2], log
    (d,) = _deliveries(repo.work)
    assert d.via == "mcp" and d.reader.startswith("gemini-cli"), d
    assert d.pid and d.acted == "read the note before starting", d
    view = repo.view()
    assert any(b.payload.get("source") == "mcp" and b.payload.get("status") == MCP_STATUS for b in view.heartbeats)
    assert [r.content for r in view.rounds if r.role == "coder-note"] == [MCP_POST]
    assert view.worker.state == "WORKING"


def test_install_is_what_codex_opencode_and_qwen_list(tmp_path):
    codex, opencode, qwen = (DRIVERS[name].install() for name in ("codex", "opencode", "qwen"))
    repo = AgentRepo.create(tmp_path, "codex")
    env = agent_env(codex)
    env["PATH"] = f"{Path(opencode).parent}:{Path(qwen).parent}:{env['PATH']}"
    home = Path(env["HOME"])
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('model = "scripted"\n')
    before = config.read_bytes()
    out = json.loads(_check(["git", "nerve", "mcp", "install", "--json"], repo.worktree, env))  # the CLIs on PATH
    assert {r["cli"]: r["action"] for r in out} == {"codex": "installed", "opencode": "installed", "qwen": "installed"}
    exe = str(VENV_BIN / "git-nerve")

    def listed(binary: Path) -> str:
        proc = subprocess.run([str(binary), "mcp", "list"], cwd=repo.worktree, env=env, capture_output=True,
                              text=True, timeout=120)
        return proc.stdout + proc.stderr

    row = next(ln for ln in listed(codex).splitlines() if ln.startswith("nerve"))
    assert row.split()[:4] == ["nerve", exe, "mcp", "-"] and "enabled" in row, row
    text = listed(opencode)
    assert "nerve" in text and "connected" in text and f"{exe} mcp" in text, text  # opencode connects to it
    text = listed(qwen)
    assert f"nerve: {exe} mcp (stdio) - Connected" in text, text

    out = json.loads(_check(["git", "nerve", "mcp", "uninstall", "--json"], repo.worktree, env))
    assert sorted(r["action"] for r in out) == ["removed"] * 3, out
    assert config.read_bytes() == before
    assert "nerve" not in listed(codex).split()
