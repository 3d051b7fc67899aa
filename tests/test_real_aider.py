"""The real aider (PyPI aider-chat, pinned, in its own venv) through the shipped `aider` adapter.

Every test runs the real command `git nerve run develop --task t1 --adapter aider`
on a repository with an origin, after a plain `git nerve init`, against the
scripted model (Chat Completions; git_nerve/scripted_model/styles/aider.py answers
in aider's SEARCH/REPLACE edit format) on 127.0.0.1. The model and key are the
user's own aider setup (AIDER_MODEL, OPENAI_API_BASE, OPENAI_API_KEY).
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

VERSION = "0.86.2"


@pytest.fixture(scope="module")
def aider_bin() -> Path:
    return pip_tool("aider-chat", VERSION, "aider")


def aider_env(bin_path: Path, model: ScriptedModel, key: str = API_KEY) -> dict[str, str]:
    """The user's own aider setup: an OpenAI-compatible endpoint and key, the model by name."""
    return agent_env(bin_path, OPENAI_API_BASE=f"{model.url}/v1", OPENAI_API_KEY=key, AIDER_MODEL=f"openai/{MODEL}")


def test_develop_completes_with_a_commit_on_the_branch(tmp_path, aider_bin):
    repo = AgentRepo.create(tmp_path, "aider")
    with ScriptedModel(params=chat_params(repo)) as model:
        res = assert_happy_path(repo, model, aider_env(aider_bin, model))
        # the edit format: SEARCH/REPLACE blocks, never the whole file
        edits = [e.reply_text for e in model.entries("coder") if "README.md" in e.reply_text]
        assert edits and all("<<<<<<< SEARCH" in t for t in edits), edits
    print(f"\naider develop run: {res.seconds:.1f}s")


def test_escape_attempts_are_refused(tmp_path, aider_bin):
    repo = AgentRepo.create(tmp_path, "aider")
    before = home_files()
    with ScriptedModel(mode="escape", params=chat_params(repo)) as model:
        res = repo.run_develop(aider_env(aider_bin, model))
        assert_escape_refused(repo, model, res, before)
        # the model did ask for them: a block writing under $HOME, the commands as a shell block
        replies = "\n".join(e.reply_text for e in model.entries("coder"))
        assert "escaped-write.txt" in replies and "apt-get install" in replies, replies


def test_a_wrong_key_fails_fast_with_one_line(tmp_path, aider_bin):
    repo = AgentRepo.create(tmp_path, "aider")
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(aider_env(aider_bin, model, key="wrong-key"), timeout=120)
    assert res.code != 0, res
    assert res.seconds < 30, res
    assert res.result["outcome"] == "failed", res
    detail = res.result["rounds"][0]["detail"]
    assert "\n" not in detail and "refused the key" in detail and "AuthenticationError" in detail, detail


def test_a_hanging_model_is_a_timeout_that_keeps_the_output(tmp_path, aider_bin):
    repo = AgentRepo.create(tmp_path, "aider", timeout=20)
    with ScriptedModel(params=chat_params(repo)) as model:
        model.hang_seconds = 120
        res = repo.run_develop(aider_env(aider_bin, model), timeout=150)
    assert res.code != 0 and res.seconds < 90, res
    assert res.result["outcome"] == "failed", res
    coder = res.result["rounds"][0]
    assert coder["status"] == "timeout" and "timed out" in coder["detail"], coder


def test_stop_via_tell_ends_the_run_promptly(tmp_path, aider_bin):
    repo = AgentRepo.create(tmp_path, "aider")
    _check(["git", "config", "nerve.heartbeatInterval", "1"], repo.work, agent_env(aider_bin))
    with ScriptedModel(params=chat_params(repo)) as model:
        model.hang_seconds = 120
        env = aider_env(aider_bin, model)
        proc = repo.start_develop(env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not agent_pids(repo.worktree, "nerve_aider") and proc.poll() is None:
                time.sleep(0.2)
            assert proc.poll() is None, ("the run ended before the stop", proc.communicate())
            time.sleep(5)  # aider starts and asks the model, which hangs
            assert agent_pids(repo.worktree, "nerve_aider"), "aider is not running"
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
