"""What only Gemini CLI does, through the shipped `gemini` adapter (the contract every CLI keeps is
tests/test_real_agents.py; its driver, with the pinned version, is in tests/agent_drivers.py).

Gemini CLI's shell empties core.hooksPath for every command it runs; the adapter hands it a GIT_CONFIG_PARAMETERS
that restores the hooks (the contract's happy path checks the post-commit hook ran). Here: when a user's
environment wins over that, the runner itself records the commit.
"""

from __future__ import annotations

import pytest

from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from tests.real_agents import AgentRepo, chat_params

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def gemini_bin():
    return DRIVERS["gemini"].install()


def test_commits_are_recorded_by_the_runner_when_gemini_bypasses_the_hooks(tmp_path, gemini_bin):
    """Without the adapter's hooks restoration (extra_args cannot undo it, a user's env can): the runner records."""
    repo = AgentRepo.create(tmp_path, "gemini")
    with ScriptedModel(params=chat_params(repo)) as model:
        env = env_for(DRIVERS["gemini"], gemini_bin, model)
        # what Gemini's shell does to every command, made to win over the adapter's GIT_CONFIG_PARAMETERS
        env["GIT_CONFIG_PARAMETERS"] = "'core.hooksPath'='/dev/null/nerve-no-hooks'"
        res = repo.run_develop(env)
    assert res.code == 0, res
    commits = repo.new_commits()
    assert len(commits) == 1
    view = repo.view()
    recorded = {m.payload["sha"]: m.payload for m in view.commits}
    assert recorded[commits[0]]["source"] == "workflow"
    assert not any(b.payload.get("source") == "post-commit" for b in view.heartbeats)
