"""What only aider does, through the shipped `aider` adapter (the contract every CLI keeps is
tests/test_real_agents.py; its driver, with the pinned version, is in tests/agent_drivers.py).

aider has no sandbox and no permission rules: the adapter starts it through a launcher that answers its questions
by a fixed policy, with edit format `diff`. Here: edits come as SEARCH/REPLACE blocks (never a whole file), and
in the escape run the model did ask for what the policy refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from tests.real_agents import AgentRepo, assert_happy_path, chat_params

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def aider_bin() -> Path:
    return DRIVERS["aider"].install()


def test_edits_are_search_replace_blocks(tmp_path, aider_bin):
    repo = AgentRepo.create(tmp_path, "aider")
    with ScriptedModel(params=chat_params(repo)) as model:
        assert_happy_path(repo, model, env_for(DRIVERS["aider"], aider_bin, model))
        edits = [e.reply_text for e in model.entries("coder") if "README.md" in e.reply_text]
    assert edits and all("<<<<<<< SEARCH" in t for t in edits), edits


def test_the_escape_the_policy_refused_was_asked_for(tmp_path, aider_bin):
    repo = AgentRepo.create(tmp_path, "aider")
    with ScriptedModel(mode="escape", params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(DRIVERS["aider"], aider_bin, model))
        replies = "\n".join(e.reply_text for e in model.entries("coder"))
    # the model asked for a write under $HOME and for shell commands; the policy refused (the contract checks
    # that nothing happened); here: that the attempt was real
    assert "escaped-write.txt" in replies and "apt-get install" in replies, replies
    assert res.code != 0 and repo.new_commits() == []
