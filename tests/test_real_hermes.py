"""The real Hermes agent (PyPI hermes-agent, pinned, in its own venv) through the shipped `hermes` adapter.

Every test runs the real command `git nerve run develop --task t1 --adapter hermes`
on a repository with an origin, after a plain `git nerve init`, against the
scripted model (Chat Completions, git_nerve/scripted_model/chat.py) on 127.0.0.1.
The provider is the user's own Hermes config (~/.hermes/config.yaml: a custom
OpenAI-compatible endpoint) in the test's temporary HOME. `hermes -z` gets a
pointer to the private prompt file; the scripted model reads it first.
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
from tests.realtools import pip_tool

pytestmark = pytest.mark.real

VERSION = "0.19.0"


@pytest.fixture(scope="module")
def hermes_bin() -> Path:
    return pip_tool("hermes-agent", VERSION, "hermes")


def hermes_env(bin_path: Path, model: ScriptedModel, key: str = API_KEY) -> dict[str, str]:
    """The user's own Hermes setup in the test's HOME: a custom OpenAI-compatible provider."""
    env = agent_env(bin_path)
    config = Path(env["HOME"]) / ".hermes" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "model:\n"
        "  provider: custom\n"
        f"  base_url: {model.url}/v1\n"
        f"  default: {MODEL}\n"
        f"  api_key: {key}\n"
    )
    return env


def test_develop_completes_with_a_commit_on_the_branch(tmp_path, hermes_bin):
    repo = AgentRepo.create(tmp_path, "hermes")
    with ScriptedModel(params=chat_params(repo)) as model:
        res = assert_happy_path(repo, model, hermes_env(hermes_bin, model))
    print(f"\nhermes develop run: {res.seconds:.1f}s")


def test_escape_attempts_are_refused(tmp_path, hermes_bin):
    repo = AgentRepo.create(tmp_path, "hermes")
    before = home_files()
    with ScriptedModel(mode="escape", params=chat_params(repo)) as model:
        res = repo.run_develop(hermes_env(hermes_bin, model))
        results = "\n".join(model.results("coder"))
        assert_escape_refused(repo, model, res, before)
    # Hermes's own words, sent back to the model as the tool results
    assert "approvals.deny" in results, results
    assert "HERMES_WRITE_SAFE_ROOT" in results, results


def test_a_wrong_key_fails_fast_with_one_line(tmp_path, hermes_bin):
    repo = AgentRepo.create(tmp_path, "hermes")
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(hermes_env(hermes_bin, model, key="wrong-key"), timeout=120)
    assert res.code != 0, res
    assert res.seconds < 30, res
    assert res.result["outcome"] == "failed", res
    detail = res.result["rounds"][0]["detail"]
    assert "\n" not in detail and "Incorrect API key" in detail and "api_key" in detail, detail


def test_a_hanging_model_is_a_timeout_that_keeps_the_output(tmp_path, hermes_bin):
    repo = AgentRepo.create(tmp_path, "hermes", timeout=25)
    with ScriptedModel(params=chat_params(repo)) as model:
        model.hang_seconds = 120
        res = repo.run_develop(hermes_env(hermes_bin, model), timeout=150)
    assert res.code != 0 and res.seconds < 90, res
    assert res.result["outcome"] == "failed", res
    coder = res.result["rounds"][0]
    assert coder["status"] == "timeout" and "timed out" in coder["detail"], coder



def test_stop_via_tell_ends_the_run_promptly(tmp_path, hermes_bin):
    repo = AgentRepo.create(tmp_path, "hermes")
    _check(["git", "config", "nerve.heartbeatInterval", "1"], repo.work, agent_env(hermes_bin))
    with ScriptedModel(params=chat_params(repo)) as model:
        model.hang_seconds = 120
        env = hermes_env(hermes_bin, model)
        proc = repo.start_develop(env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not agent_pids(repo.worktree, "hermes") and proc.poll() is None:
                time.sleep(0.2)
            assert proc.poll() is None, ("the run ended before the stop", proc.communicate())
            time.sleep(8)  # it boots and asks the model, which hangs
            assert agent_pids(repo.worktree, "hermes"), "hermes is not running"
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
