"""The REAL Claude Code (pinned, tests/agent_drivers.py) runs a hook committed to the repository's
`.claude/settings.json` only once the person trusted that exact content (issue 35: an agent's or a teammate's
commit could have put it there, and a hook runs as a shell command with the person's rights, outside Claude
Code's permission rules; the adapter's private `--settings` does not keep project settings out).

A `.claude/settings.json` on main whose SessionStart and PreToolUse hooks write a marker file, in the task's
worktree: the first run (untrusted) starts no Claude Code: one line naming the file and `git nerve trust`, the run
ends with an error, no request reaches the model, the marker is never written. After `git nerve trust` in the main
checkout (it shows the file) the run works (the coder's commit) and the marker exists: Claude Code really loads the
file, so the gate is not theatre. The run ends after the coder (a one-token budget).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from fixtures.repos.build import commit_file, git
from git_nerve import trust
from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from tests.real_agents import AgentRepo, _check, chat_params

pytestmark = pytest.mark.real

REFUSED = f"claude: not started: {trust.CLAUDE} in "


def settings_with_hooks(marker) -> str:
    entry = [{"matcher": "*", "hooks": [{"type": "command", "command": f"touch {marker}"}]}]
    return json.dumps({"hooks": {"SessionStart": [{"hooks": entry[0]["hooks"]}], "PreToolUse": entry}}, indent=1) + "\n"


def test_a_committed_claude_hook_runs_only_once_trusted(tmp_path):
    driver = DRIVERS["claude"]
    binary = driver.install()
    marker = tmp_path / "project-hook-ran"
    repo = AgentRepo.create(tmp_path, "claude", toml_extra="\n[budget]\ntask_tokens = 1\n")
    commit_file(repo.work, ".claude/settings.json", settings_with_hooks(marker), "a project hook")
    git(repo.work, "push", "-q", "origin", "main")
    git(repo.worktree, "merge", "-q", "--ff-only", "main")  # t1's worktree holds it, committed
    repo = dataclasses.replace(repo, base=git(repo.worktree, "rev-parse", "HEAD"))

    # untrusted: Claude Code is not started
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(driver, binary, model))
        assert model.entries() == []  # no request: no Claude Code ran
    assert res.code == 1 and res.result["outcome"] == "error", res
    assert REFUSED in res.result["reason"] and ".claude/settings.json" in res.result["reason"], res
    assert "git nerve trust" in res.result["reason"], res
    assert not marker.exists()
    assert repo.new_commits() == [] and repo.status() == ""

    # the person reads it in the main checkout and trusts it
    with ScriptedModel(params=chat_params(repo)) as model:
        env = env_for(driver, binary, model)
        shown = _check(["git", "nerve", "trust"], repo.work, env)
        assert trust.CLAUDE in shown and ".claude/settings.json" in shown, shown
        # trusted: Claude Code runs and loads the project's hook (it really does: the gate guards a real door)
        res = repo.run_develop(env)
    assert REFUSED not in res.out + res.err, res
    assert marker.exists(), res
    assert [r["role"] for r in res.result["rounds"]][-1:] == ["coder"], res  # then the one-token budget
    assert len(repo.new_commits()) == 1, res
    # Claude Code wrote nothing of its own into the settings it loads: the next role's run is not refused
    common = repo.work / ".git"
    assert trust.untrusted_in(common, repo.worktree, trust.CLAUDE) is None, repo.status()
