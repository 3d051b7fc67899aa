"""What only Codex CLI does, through the shipped `codex` adapter (the contract every CLI keeps is
tests/test_real_agents.py; its driver, with the pinned version, is in tests/agent_drivers.py).

Codex runs its tools inside its own OS sandbox (bubblewrap): here, the sandbox's own evidence for each escape.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from git_nerve.scripted_model import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from tests.real_agents import AgentRepo, chat_params

pytestmark = [pytest.mark.real, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return DRIVERS["codex"].install()


@pytest.fixture
def repo(tmp_path) -> AgentRepo:
    return AgentRepo.create(tmp_path, adapter="codex")


def test_the_sandbox_refuses_what_is_outside_the_worktree(codex_bin, repo):
    home = Path(os.environ["HOME"])
    with ScriptedModel(mode="escape", params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(DRIVERS["codex"], codex_bin, model))
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
