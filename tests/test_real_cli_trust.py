"""The REAL Claude Code, Gemini CLI, Qwen Code, Codex and GitHub Copilot CLI (pinned, tests/agent_drivers.py) run a
hook committed to the repository's `.claude/settings.json` / `.gemini/settings.json` / `.qwen/settings.json` /
`.github/hooks/*.json` only once the person
trusted that exact content (issue 35: an agent's or a teammate's commit could have put it there, and a hook runs
as a shell command with the person's rights, outside the CLI's permission rules; Claude Code's private
`--settings` does not keep project settings out).

A settings file on main whose session-start and before-tool hooks write a marker file, in the task's worktree:
the first run (untrusted) starts no CLI: one line naming the file and `git nerve trust`, the run ends with an
error, no request reaches the model, the marker is never written. After `git nerve trust` in the main checkout (it
shows the file) the run works (the coder's commit) and the marker exists: the CLI really loads the file, so the
gate is not theatre; and what the CLI wrote into it meanwhile (Qwen Code's "$version") does not untrust the next
role's run. The run ends after the coder (a one-token budget).
"""

from __future__ import annotations

import dataclasses
import os
import json

import pytest

from fixtures.repos.build import commit_file, git
from git_nerve import trust
from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from tests.real_agents import AgentRepo, _check, chat_params

pytestmark = pytest.mark.real

#: (adapter, its trust key, the settings file, its before-tool hook event, the user's own environment for it).
#: Gemini CLI 0.61 reads its settings files before it parses ``--skip-trust``: it loads the worktree's
#: settings.json where the user's setup trusts the folder (``GEMINI_CLI_TRUST_WORKSPACE=true``, as its docs advise
#: for headless runs; ``security.folderTrust.enabled = false``; a trusted parent folder), and its policies, skills,
#: agents and commands under ``--skip-trust`` alone
CLIS = [("claude", trust.CLAUDE, ".claude/settings.json", "PreToolUse", {}),
        ("gemini", trust.GEMINI, ".gemini/settings.json", "BeforeTool", {"GEMINI_CLI_TRUST_WORKSPACE": "true"}),
        ("qwen", trust.QWEN, ".qwen/settings.json", "PreToolUse", {})]


def settings_with_hooks(marker, before_tool: str) -> str:
    run = [{"type": "command", "command": f"touch {marker}"}]
    return json.dumps({"hooks": {"SessionStart": [{"hooks": run}], before_tool: [{"matcher": "*", "hooks": run}]}},
                      indent=1) + "\n"


@pytest.mark.parametrize("name,key,rel,before_tool,user_env", CLIS, ids=[c[0] for c in CLIS])
def test_a_committed_project_hook_runs_only_once_trusted(tmp_path, name, key, rel, before_tool, user_env):
    driver = DRIVERS[name]
    binary = driver.install()
    marker = tmp_path / "project-hook-ran"
    repo = AgentRepo.create(tmp_path, name, toml_extra="\n[budget]\ntask_tokens = 1\n")
    commit_file(repo.work, rel, settings_with_hooks(marker, before_tool), "a project hook")
    git(repo.work, "push", "-q", "origin", "main")
    git(repo.worktree, "merge", "-q", "--ff-only", "main")  # t1's worktree holds it, committed
    repo = dataclasses.replace(repo, base=git(repo.worktree, "rev-parse", "HEAD"))

    # untrusted: the CLI is not started
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop({**env_for(driver, binary, model), **user_env})
        assert model.entries() == []  # no request: the CLI never ran
    assert res.code == 1 and res.result["outcome"] == "error", res
    assert f"{name}: not started: {key} in " in res.result["reason"] and rel in res.result["reason"], res
    assert "git nerve trust" in res.result["reason"], res
    assert not marker.exists()
    assert repo.new_commits() == [] and repo.status() == ""

    # the person reads it in the main checkout and trusts it
    with ScriptedModel(params=chat_params(repo)) as model:
        env = {**env_for(driver, binary, model), **user_env}
        shown = _check(["git", "nerve", "trust"], repo.work, env)
        assert key in shown and rel in shown, shown
        # trusted: the CLI runs and loads the project's hook (it really does: the gate guards a real door)
        res = repo.run_develop(env)
    assert "not started" not in res.out + res.err, res
    assert marker.exists(), res
    assert [r["role"] for r in res.result["rounds"]][-1:] == ["coder"], res  # then the one-token budget
    assert len(repo.new_commits()) == 1, res
    # the CLI wrote nothing of its own into the settings it loads: the next role's run is not refused
    assert trust.untrusted_in(repo.work / ".git", repo.worktree, key) is None, repo.status()


#: (adapter, where its escape scenario writes: another CLI's project settings, which its own rules did not name before
#: issue 35's edge; Claude Code refuses writes under `.claude/` itself, whatever the rules say; whether the folder is
#: there already: Copilot CLI's file tool makes no parent directory, so it is, empty, as a checkout can leave it)
ESCAPES = [("claude", ".opencode/plugins", False), ("gemini", ".claude/hooks", False), ("qwen", ".claude/hooks", False),
           ("copilot", ".claude/hooks", True), ("claude", "src/.claude/skills", False)]


@pytest.mark.parametrize("name,target,made", ESCAPES, ids=[f"{e[0]}:{e[1]}" for e in ESCAPES])
def test_the_agent_cannot_write_another_clis_project_settings(tmp_path, name, target, made):
    """Each CLI's rules refuse a write under another CLI's project settings in the worktree (the scripted model's
    escape scenario, its write aimed there), which the next role's CLI would load: nothing is written, the refusal
    goes back to the model."""
    driver = DRIVERS[name]
    binary = driver.install()
    repo = AgentRepo.create(tmp_path, name, toml_extra="\n[budget]\ntask_tokens = 1\n")
    folder = repo.worktree / target
    new = next(p for p in [*reversed(folder.parents), folder] if not p.exists())  # the first part not there yet
    if made:
        folder.mkdir(parents=True)  # untracked and empty: git status stays clean
    with ScriptedModel(mode="escape", params={**chat_params(repo), "home": str(folder)}) as model:
        res = repo.run_develop(env_for(driver, binary, model))
        results = model.results("coder")
    assert [r["role"] for r in res.result["rounds"]][:1] == ["coder"], res
    assert not (folder / "escaped-write.txt").exists(), res
    assert made or not new.exists(), res
    assert driver.refused(results), results
    assert not made or any("`write(" in r for r in results), results  # the write itself reached the CLI, refused
    assert repo.status() == ""


def test_a_committed_codex_mcp_server_starts_only_once_trusted(tmp_path):
    """Codex 0.169 loads a task worktree's `.codex/config.toml` once the person trusted their repository in Codex
    (it records that trust for the main checkout, and honours it in every linked worktree): its MCP servers start as
    commands outside Codex's sandbox. Untrusted by git-nerve: Codex is not started, the server's marker is never
    written; trusted: the run works and the server was started."""
    driver = DRIVERS["codex"]
    binary = driver.install()
    marker = tmp_path / "project-mcp-started"
    repo = AgentRepo.create(tmp_path, "codex", toml_extra="\n[budget]\ntask_tokens = 1\n")
    server = f'[mcp_servers.probe]\ncommand = "sh"\nargs = ["-c", "touch {marker}; exit 1"]\n'
    commit_file(repo.work, ".codex/config.toml", server, "a project MCP server")
    git(repo.work, "push", "-q", "origin", "main")
    git(repo.worktree, "merge", "-q", "--ff-only", "main")
    repo = dataclasses.replace(repo, base=git(repo.worktree, "rev-parse", "HEAD"))

    def env_of(model):
        env = env_for(driver, binary, model)
        with open(f"{env['CODEX_HOME']}/config.toml", "a", encoding="utf-8") as fh:  # trusted in Codex itself
            fh.write(f'\n[projects.{json.dumps(os.path.realpath(repo.work))}]\ntrust_level = "trusted"\n')
        return env

    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(env_of(model))
        assert model.entries() == []
    assert res.code == 1 and f"codex: not started: {trust.CODEX} in " in res.result["reason"], res
    assert ".codex/config.toml" in res.result["reason"] and not marker.exists(), res

    with ScriptedModel(params=chat_params(repo)) as model:
        env = env_of(model)
        shown = _check(["git", "nerve", "trust"], repo.work, env)
        assert trust.CODEX in shown and ".codex/config.toml" in shown, shown
        res = repo.run_develop(env)
    assert "not started" not in res.out + res.err, res
    assert marker.exists(), res
    assert len(repo.new_commits()) == 1, res
    assert trust.untrusted_in(repo.work / ".git", repo.worktree, trust.CODEX) is None, repo.status()


def test_a_committed_copilot_hook_runs_only_once_trusted(tmp_path):
    """Copilot CLI 1.0.102 loads a task worktree's `.github/hooks/*.json` (hooks that run `bash` commands) once the
    person trusted their repository's main checkout in Copilot (``trustedFolders`` in ~/.copilot/config.json; a
    folder above it, or COPILOT_ALLOW_ALL=true, does as well). Untrusted by git-nerve: Copilot is not started, no
    request, the hook's marker is never written; trusted: the run works and the hook ran."""
    driver = DRIVERS["copilot"]
    binary = driver.install()
    marker = tmp_path / "project-hook-ran"
    repo = AgentRepo.create(tmp_path, "copilot", toml_extra="\n[budget]\ntask_tokens = 1\n")
    run = [{"type": "command", "bash": f"touch {marker}", "timeoutSec": 10}]
    hooks = json.dumps({"version": 1, "hooks": {"sessionStart": run, "preToolUse": run}}, indent=1) + "\n"
    commit_file(repo.work, ".github/hooks/probe.json", hooks, "a project hook")
    git(repo.work, "push", "-q", "origin", "main")
    git(repo.worktree, "merge", "-q", "--ff-only", "main")
    repo = dataclasses.replace(repo, base=git(repo.worktree, "rev-parse", "HEAD"))
    config = os.path.join(os.environ["HOME"], ".copilot", "config.json")
    os.makedirs(os.path.dirname(config), exist_ok=True)
    with open(config, "w", encoding="utf-8") as fh:  # the person trusted their repository in Copilot itself
        json.dump({"trustedFolders": [os.path.realpath(repo.work)]}, fh)

    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(driver, binary, model))
        assert model.entries() == []
    assert res.code == 1 and f"copilot: not started: {trust.COPILOT} in " in res.result["reason"], res
    assert ".github/hooks/probe.json" in res.result["reason"] and not marker.exists(), res
    assert repo.new_commits() == [] and repo.status() == ""

    with ScriptedModel(params=chat_params(repo)) as model:
        env = env_for(driver, binary, model)
        shown = _check(["git", "nerve", "trust"], repo.work, env)
        assert trust.COPILOT in shown and ".github/hooks/probe.json" in shown, shown
        res = repo.run_develop(env)
    assert "not started" not in res.out + res.err, res
    assert marker.exists(), res
    assert len(repo.new_commits()) == 1, res
    assert trust.untrusted_in(repo.work / ".git", repo.worktree, trust.COPILOT) is None, repo.status()


@pytest.mark.parametrize("name,user_env", [("gemini", {"GEMINI_CLI_TRUST_WORKSPACE": "true"}), ("qwen", {})],
                         ids=["gemini", "qwen"])
def test_a_committed_dotenv_reaches_the_clis_commands_only_once_trusted(tmp_path, name, user_env):
    """Gemini CLI and Qwen Code put the worktree's `.env` into their own environment, which every command they run
    inherits: a `GIT_TRACE` there makes each git they start write its trace to a file (a `GIT_CONFIG_*` could run
    anything git config names). Committed on main, it stops the run until trusted; once trusted, the CLI really
    loads it (the trace file is written)."""
    driver = DRIVERS[name]
    binary = driver.install()
    key = trust.GEMINI if name == "gemini" else trust.QWEN
    marker = tmp_path / "git-trace"
    repo = AgentRepo.create(tmp_path, name, toml_extra="\n[budget]\ntask_tokens = 1\n")
    commit_file(repo.work, ".env", f"GIT_TRACE={marker}\n", "a project .env")
    git(repo.work, "push", "-q", "origin", "main")
    git(repo.worktree, "merge", "-q", "--ff-only", "main")
    repo = dataclasses.replace(repo, base=git(repo.worktree, "rev-parse", "HEAD"))

    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop({**env_for(driver, binary, model), **user_env})
        assert model.entries() == []  # the CLI never ran
    assert res.code == 1 and f"{name}: not started: {key} in " in res.result["reason"], res
    assert ".env" in res.result["reason"] and not marker.exists(), res

    with ScriptedModel(params=chat_params(repo)) as model:
        env = {**env_for(driver, binary, model), **user_env}
        shown = _check(["git", "nerve", "trust"], repo.work, env)
        assert key in shown and ".env" in shown, shown
        res = repo.run_develop(env)
    assert "not started" not in res.out + res.err, res
    assert marker.exists(), res  # the CLI loaded the worktree's .env: the gate guards a real door
