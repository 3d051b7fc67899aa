"""What only Claude Code does, through the shipped `claude` adapter (the contract every CLI keeps is
tests/test_real_agents.py; its driver, with the pinned version, is in tests/agent_drivers.py).

Claude Code talks to the scripted model over the Anthropic Messages API (SSE) on 127.0.0.1; what is asserted
comes from git, the bus and the model server's log of the tool results Claude Code sent back.
"""

from __future__ import annotations

import pytest

from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from tests.real_agents import AgentRepo, chat_params

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def claude_bin():
    return DRIVERS["claude"].install()


def test_the_coder_commit_is_made_by_claude_code_itself(tmp_path, claude_bin):
    """Claude Code runs `git commit` through its own Bash tool (allowed by the run's permission rules): git's own
    output of that commit is what it sent back to the model."""
    repo = AgentRepo.create(tmp_path, "claude")
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(DRIVERS["claude"], claude_bin, model))
        results = model.results("coder")
    assert res.code == 0, res
    assert any("README: scripted change" in r for r in results), results
    assert len(repo.new_commits()) == 1
