"""The real opencode CLI (npm opencode-ai, pinned) through the shipped `opencode` adapter.

Every test runs the real command `git nerve run develop --task t1 --adapter opencode`
on a repository with an origin, after a plain `git nerve init`, against the
scripted model (Chat Completions, git_nerve/scripted_model/chat.py) on 127.0.0.1.
The provider is the user's own opencode config in the test's temporary HOME.
What is asserted comes from git, the bus and the model server's log.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from git_nerve.scripted_model.server import API_KEY, MODEL, ScriptedModel
from tests.real_agents import (
    AgentRepo, _check, agent_env, agent_pids, assert_escape_refused, assert_happy_path, chat_params, home_files,
    stop_process,
)
from tests.realtools import npm_tool

pytestmark = pytest.mark.real

VERSION = "1.18.33"


@pytest.fixture(scope="module")
def opencode_bin() -> Path:
    return npm_tool("opencode-ai", VERSION, "opencode")


def opencode_env(bin_path: Path, model: ScriptedModel, key: str = API_KEY) -> dict[str, str]:
    """The user's own opencode setup in the test's HOME: an OpenAI-compatible provider on the scripted model."""
    env = agent_env(bin_path)
    config = Path(env["HOME"]) / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"nerve": {
            "npm": "@ai-sdk/openai-compatible", "name": "Nerve scripted",
            "options": {"baseURL": f"{model.url}/v1", "apiKey": "{env:NERVE_SCRIPTED_KEY}"},
            "models": {MODEL: {"name": MODEL}},
        }},
        "model": f"nerve/{MODEL}",
        "small_model": f"nerve/{MODEL}",
    }))
    return agent_env(bin_path, NERVE_SCRIPTED_KEY=key)


def test_develop_completes_with_a_commit_on_the_branch(tmp_path, opencode_bin):
    repo = AgentRepo.create(tmp_path, "opencode")
    with ScriptedModel(params=chat_params(repo)) as model:
        res = assert_happy_path(repo, model, opencode_env(opencode_bin, model))
    print(f"\nopencode develop run: {res.seconds:.1f}s")


def test_escape_attempts_are_refused(tmp_path, opencode_bin):
    repo = AgentRepo.create(tmp_path, "opencode")
    before = home_files()
    with ScriptedModel(mode="escape", params=chat_params(repo)) as model:
        res = repo.run_develop(opencode_env(opencode_bin, model))
        results = "\n".join(model.results("coder"))
        assert_escape_refused(repo, model, res, before)
    # opencode's own words for a refused rule, sent back to the model as the tool result
    assert "rule" in results.lower() or "denied" in results.lower() or "reject" in results.lower(), results


def test_a_wrong_key_fails_fast_with_one_line(tmp_path, opencode_bin):
    repo = AgentRepo.create(tmp_path, "opencode")
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(opencode_env(opencode_bin, model, key="wrong-key"), timeout=120)
    assert res.code != 0, res
    assert res.seconds < 30, res
    assert res.result["outcome"] == "failed", res
    detail = res.result["rounds"][0]["detail"]
    assert "\n" not in detail and "Incorrect API key" in detail and "key" in detail, detail


def test_a_hanging_model_is_a_timeout_that_keeps_the_output(tmp_path, opencode_bin):
    repo = AgentRepo.create(tmp_path, "opencode", timeout=25)
    with ScriptedModel(params=chat_params(repo)) as model:
        model.hang_seconds = 120
        res = repo.run_develop(opencode_env(opencode_bin, model), timeout=150)
    assert res.code != 0 and res.seconds < 90, res
    assert res.result["outcome"] == "failed", res
    coder = res.result["rounds"][0]
    assert coder["status"] == "timeout" and "timed out" in coder["detail"], coder


def test_stop_via_tell_ends_the_run_promptly(tmp_path, opencode_bin):
    repo = AgentRepo.create(tmp_path, "opencode")
    _check(["git", "config", "nerve.heartbeatInterval", "1"], repo.work, agent_env(opencode_bin))
    with ScriptedModel(params=chat_params(repo)) as model:
        model.hang_seconds = 120
        env = opencode_env(opencode_bin, model)
        proc = repo.start_develop(env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not agent_pids(repo.worktree, "opencode") and proc.poll() is None:
                time.sleep(0.2)
            assert proc.poll() is None, ("the run ended before the stop", proc.communicate())
            time.sleep(8)  # it boots and asks the model, which hangs
            assert agent_pids(repo.worktree, "opencode"), "opencode is not running"
            told = time.monotonic()
            _check(["git", "nerve", "tell", "--task", "t1", "stop"], repo.work, env)
            out, err = proc.communicate(timeout=30)
            took = time.monotonic() - told
        finally:
            stop_process(proc)
    result = json.loads(out)
    assert result["outcome"] == "stopped", (out, err)
    assert took < 15, took
    assert agent_pids(repo.worktree) == []
