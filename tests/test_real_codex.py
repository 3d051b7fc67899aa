"""The real Codex CLI (npm @openai/codex, pinned) through the shipped adapter, unchanged, on the scripted model."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from git_nerve.scripted_model import API_KEY, MODEL, ScriptedModel
from tests.real_agents import AgentRepo, agent_env, assert_happy_path, chat_params
from tests.realtools import npm_tool

pytestmark = [pytest.mark.real, pytest.mark.timeout(1200)]

VERSION = "0.169.0"


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return npm_tool("@openai/codex", VERSION, "codex")


def env_for(codex_bin: Path, model: ScriptedModel, key: str = API_KEY) -> dict[str, str]:
    """The user's own Codex configuration: a provider on the scripted model (Responses API), its key variable."""
    codex_home = Path(os.environ["HOME"]) / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "nerve"\n\n[model_providers.nerve]\nname = "nerve"\n'
        f'base_url = "{model.url}/v1"\nenv_key = "NERVE_TEST_OPENAI_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n"
    )
    return agent_env(codex_bin, CODEX_HOME=str(codex_home), NERVE_TEST_OPENAI_KEY=key)


@pytest.fixture
def repo(tmp_path) -> AgentRepo:
    return AgentRepo.create(tmp_path, adapter="codex")


def test_develop_completes_with_a_commit_on_the_branch(codex_bin, repo):
    with ScriptedModel(params=chat_params(repo)) as model:
        assert_happy_path(repo, model, env_for(codex_bin, model))
        assert repo.view().worker.heartbeat_status == "develop: completed"


def test_the_sandbox_refuses_what_is_outside_the_worktree(codex_bin, repo):
    home = Path(os.environ["HOME"])
    with ScriptedModel(mode="escape", params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(codex_bin, model))
        assert res.code == 1 and res.result["outcome"] == "failed"
        assert not (home / "escaped-by-agent").exists() and not (home / "escaped-write.txt").exists()
        assert model.exfil == []  # curl never reached the server: no network in the sandbox
        results = model.results("coder")
        # the CLI's own evidence that its sandbox refused each attempt
        assert "Read-only file system" in results[0]  # touch under $HOME
        assert "read only lock file" in results[1]  # apt-get ran confined: dpkg's state is read-only, nothing installed
        assert "exited with code 0" not in results[2]  # curl: no network in the sandbox
        assert "rejected" in results[3] and "outside of the project" in results[3]  # apply_patch outside the worktree
        assert repo.new_commits() == []


def test_a_rejected_key_is_one_line_within_30_seconds(codex_bin, repo):
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(codex_bin, model, key="sk-wrong"))
        assert res.code == 1 and res.seconds < 30, res
        (first,) = res.result["rounds"]
        assert first["status"] == "agent_failed" and "the API key was rejected" in first["detail"]


def test_a_hanging_model_is_a_timeout_that_keeps_the_output(codex_bin, tmp_path):
    repo = AgentRepo.create(tmp_path, adapter="codex", timeout=15)
    with ScriptedModel(params=chat_params(repo)) as model:
        model.hang_seconds = 120
        res = repo.run_develop(env_for(codex_bin, model))
        (first,) = res.result["rounds"]
        assert first["status"] == "timeout" and res.seconds < 60, res
        view = repo.view()
        assert "last stderr" in view.rounds[0].content or "last stdout" in view.rounds[0].content
        assert view.worker.heartbeat_status.startswith("develop: failed")


def test_a_stop_ends_the_running_agent(codex_bin, repo):
    # a heartbeat (and so a look at the steering queue) every 2 s: the stop lands inside the coder's `sleep 30`
    subprocess.run(["git", "config", "nerve.heartbeatInterval", "2s"], cwd=repo.work, check=True)
    with ScriptedModel(mode="slow", params=chat_params(repo)) as model:
        env = env_for(codex_bin, model)
        proc = repo.start_develop(env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not model.calls("coder"):
            time.sleep(0.2)
        told_ok = subprocess.run(["git", "nerve", "tell", "--task", "t1", "stop"], cwd=repo.work, env=env,
                                 capture_output=True, text=True).returncode == 0
        assert told_ok
        told = time.monotonic()
        out, err = proc.communicate(timeout=90)
        data = json.loads(out)
        assert data["outcome"] == "stopped", err[-2000:]
        # the coder was running `sleep 30`: the stop ended it at the next heartbeat, not after the sleep
        assert time.monotonic() - told < 25
        assert data["rounds"][0]["status"] == "stopped"  # the round a stop ended is "stopped", not a failure
