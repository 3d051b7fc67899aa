"""Claude Code's, Gemini CLI's, Qwen Code's and Codex's own project settings are trusted settings (issue 35), as opencode's
are (tests/test_trust_opencode.py): their inventory entries, the adapter starting no CLI in a worktree whose
committed settings are untrusted (one line naming them and `git nerve trust`), then starting it once `git nerve
trust` recorded them and refusing again after a one-byte change, `show` flagging a change to them, and every
adapter's rules refusing the agent's own edits of every CLI's project settings. The real Claude Code:
tests/test_real_claude_trust.py."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest
from conftest import git
from fixtures.repos.build import commit_file, write
from git_nerve import trust
from git_nerve.paths import discover
from git_nerve.trust.settings import claude, gemini, qwen
from git_nerve.workflow.adapters import claude as claude_adapter
from git_nerve.workflow.adapters import codex as codex_adapter
from git_nerve.workflow.adapters import copilot as copilot_adapter
from git_nerve.workflow.adapters import gemini as gemini_adapter
from git_nerve.workflow.adapters import qwen as qwen_adapter
from git_nerve.workflow.adapters.base import AdapterSpawnFailed, AgentContext, StartFrame

#: (adapter name, its factory, the trust key, the committed settings file whose hook would write a marker)
CLIS = [
    ("claude", claude_adapter.create_claude, trust.CLAUDE, ".claude/settings.json"),
    ("gemini", gemini_adapter.create_gemini, trust.GEMINI, ".gemini/settings.json"),
    ("qwen", qwen_adapter.create_qwen, trust.QWEN, ".qwen/settings.json"),
    ("codex", codex_adapter.create_codex, trust.CODEX, ".codex/config.toml"),
    ("copilot", copilot_adapter.create_copilot, trust.COPILOT, ".github/hooks/x.json"),
    # a custom agent (its MCP servers and hooks) and a skill (its allowed-tools): Copilot CLI's too
    ("copilot", copilot_adapter.create_copilot, trust.COPILOT, ".github/agents/x.agent.md"),
    ("copilot", copilot_adapter.create_copilot, trust.COPILOT, ".github/skills/s/SKILL.md"),
]


def hook_settings(marker: Path) -> str:
    """A settings file (Claude Code's shape, which Gemini CLI and Qwen Code read too) whose hook writes ``marker``."""
    entry = [{"matcher": "*", "hooks": [{"type": "command", "command": f"touch {marker}"}]}]
    return json.dumps({"hooks": {"SessionStart": entry, "PreToolUse": entry}}, indent=1) + "\n"


def wt_of(work: Path, task_id: str) -> Path:
    return work.parent / f"{work.name}.worktrees" / task_id


def test_the_inventory_entries_are_every_file_each_cli_loads_by_path_and_bytes(tmp_path):
    git(tmp_path, "init", "-q")  # what a CLI writes into its folder itself is left out where git tracks none of it
    assert claude(tmp_path) == gemini(tmp_path) == qwen(tmp_path) == {}  # absent: nothing to trust
    write(tmp_path, ".mcp.json", '{"mcpServers": {"x": {"command": "sh"}}}\n')
    write(tmp_path, ".claude/settings.json", "{}\n")
    write(tmp_path, ".claude/agents/a.md", "---\nname: a\nhooks: {}\n---\n")
    write(tmp_path, ".gemini/policies/p.toml", "[[rule]]\n")
    write(tmp_path, ".qwen/settings.json", '{"hooks": {}}\n')
    s = claude(tmp_path)[trust.CLAUDE]
    assert list(s.value) == [".claude/agents/a.md", ".claude/settings.json", ".mcp.json"]
    assert [line.split(":")[0] for line in s.shown] == list(s.value)
    assert list(gemini(tmp_path)[trust.GEMINI].value) == [".gemini/policies/p.toml"]
    assert list(qwen(tmp_path)[trust.QWEN].value) == [".qwen/settings.json"]
    before = s.digest, qwen(tmp_path)[trust.QWEN].digest
    # what the CLIs write there themselves changes nothing (their worktrees, a subagent's memory, scratch files)
    write(tmp_path, ".claude/worktrees/w/x.py", "x\n")
    write(tmp_path, ".claude/agent-memory/a/MEMORY.md", "x\n")
    write(tmp_path, ".qwen/tmp/args.json", "{}\n")
    write(tmp_path, ".qwen/settings.json", '{\n "hooks": {},\n "$version": 4\n}\n')  # Qwen Code's migration
    assert (claude(tmp_path)[trust.CLAUDE].digest, qwen(tmp_path)[trust.QWEN].digest) == before
    write(tmp_path, ".claude/settings.local.json", '{"permissions": {"allow": ["Bash"]}}\n')  # a new file does
    assert claude(tmp_path)[trust.CLAUDE].digest != before[0]
    # the inventory `git nerve trust` reads holds all four CLIs' entries
    from git_nerve.trust.settings import AGENT_CLI

    assert set(AGENT_CLI) == {trust.OPENCODE, trust.CLAUDE, trust.GEMINI, trust.QWEN, trust.CODEX, trust.COPILOT}


def test_copilots_entry_is_its_nested_hooks_folder_its_repository_settings_and_the_workspace_mcp_files(tmp_path):
    """Copilot CLI's project settings live under `.github/` beside files that are no setting (workflows, its
    instructions): only `.github/hooks/`, `.github/copilot/settings(.local).json` and the MCP files count."""
    from git_nerve.trust.settings import copilot

    git(tmp_path, "init", "-q")
    write(tmp_path, ".github/workflows/ci.yml", "on: push\n")
    write(tmp_path, ".github/copilot-instructions.md", "Be brief.\n")
    assert copilot(tmp_path) == {}
    write(tmp_path, ".github/hooks/x.json", '{"version": 1, "hooks": {}}\n')
    write(tmp_path, ".github/hooks/sub/y.json", "{}\n")
    write(tmp_path, ".github/copilot/settings.json", '{"hooks": {}}\n')
    write(tmp_path, ".github/mcp.json", '{"mcpServers": {}}\n')
    write(tmp_path, ".mcp.json", '{"mcpServers": {}}\n')
    s = copilot(tmp_path)[trust.COPILOT]
    assert list(s.value) == [".github/copilot/settings.json", ".github/hooks/sub/y.json", ".github/hooks/x.json",
                             ".github/mcp.json", ".mcp.json"], s.value
    assert list(claude(tmp_path)[trust.CLAUDE].value) == [".mcp.json"]  # Claude Code's too
    # its custom agents (MCP servers, hooks) and project skills (allowed-tools) in each folder it finds them
    write(tmp_path, ".github/agents/helper.agent.md", "---\nname: helper\nmcp-servers: {}\n---\n")
    write(tmp_path, ".github/skills/s/SKILL.md", "---\nname: s\nallowed-tools: shell\n---\n")
    write(tmp_path, ".agents/skills/t/SKILL.md", "---\nname: t\n---\n")
    write(tmp_path, ".claude/skills/u/SKILL.md", "---\nname: u\n---\n")
    write(tmp_path, ".claude/settings.json", "{}\n")  # Claude Code's alone
    assert list(copilot(tmp_path)[trust.COPILOT].value) == [
        ".agents/skills/t/SKILL.md", ".claude/skills/u/SKILL.md", ".github/agents/helper.agent.md",
        ".github/copilot/settings.json", ".github/hooks/sub/y.json", ".github/hooks/x.json", ".github/mcp.json",
        ".github/skills/s/SKILL.md", ".mcp.json"]
    assert list(claude(tmp_path)[trust.CLAUDE].value) == [".claude/settings.json", ".claude/skills/u/SKILL.md",
                                                          ".mcp.json"]


def test_codex_entry_holds_the_repository_skills_it_loads(tmp_path):
    """Codex reads the repository's skills from `.agents/skills/` besides `.codex/`: both count, one key."""
    from git_nerve.trust.settings import agent_project

    git(tmp_path, "init", "-q")
    write(tmp_path, ".agents/skills/t/SKILL.md", "---\nname: t\n---\n")
    write(tmp_path, ".codex/config.toml", "\n")
    assert list(agent_project(trust.CODEX, tmp_path)[trust.CODEX].value) == [".agents/skills/t/SKILL.md",
                                                                             ".codex/config.toml"]


def _fake_cli(tmp_path: Path, monkeypatch, name: str) -> Path:
    """``name`` on PATH: a stand-in that records that it ran (the file it returns)."""
    fake = tmp_path / "bin" / name
    fake.parent.mkdir(exist_ok=True)
    ran = tmp_path / f"{name}-ran"
    fake.write_text(f"#!/bin/sh\necho ran > {ran}\ncat > /dev/null\necho done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    return ran


@pytest.mark.parametrize("name,create,key,rel", CLIS, ids=[f"{c[0]}:{c[3]}" for c in CLIS])
def test_the_adapter_starts_no_cli_until_its_committed_project_settings_are_trusted(
        repo, gw, gn, tmp_path, monkeypatch, name, create, key, rel):
    ran = _fake_cli(tmp_path, monkeypatch, name)
    work = repo.work
    hook_marker = tmp_path / "hook-ran"
    commit_file(work, rel, hook_settings(hook_marker), f"{name} settings with a hook")
    assert gw("spawn t1", work).code == 0
    wt = wt_of(work, "t1")
    start = StartFrame(task_id="t1", workflow="wf", content="x", workdir=str(wt))
    ctx = AgentContext(start, (), str(wt), threading.Event(), "t1", "coder")

    listed = json.loads(gn("trust --show --json", wt).out)["settings"]
    assert [(s["setting"], s["trusted"]) for s in listed] == [(key, False)], listed

    with pytest.raises(AdapterSpawnFailed) as refused:
        create()("prompt", ctx)
    assert not ran.exists() and not hook_marker.exists()  # no process started: neither the CLI nor its hook
    line = str(refused.value)
    assert "\n" not in line and f"not started: {key} in {wt}" in line and rel in line, line
    assert "git nerve trust" in line, line

    res = gn("trust --json", work)
    assert res.code == 0 and json.loads(res.out)["trusted_now"] == [key], res
    create()("prompt", ctx)  # trusted: it starts
    assert ran.read_text() == "ran\n"
    ran.unlink()

    (wt / rel).write_text((wt / rel).read_text().replace("hook-ran", "hook-raN"))  # one byte, in the worktree
    with pytest.raises(AdapterSpawnFailed):
        create()("prompt", ctx)
    assert not ran.exists()
    git(wt, "checkout", "--", rel)  # back to the committed content, as trusted
    create()("prompt", ctx)
    assert ran.exists()


def test_an_adapter_loads_only_its_own_clis_settings(repo, tmp_path, monkeypatch):
    """Another CLI's untrusted project settings do not stop this one (it does not load them)."""
    ran = _fake_cli(tmp_path, monkeypatch, "claude")
    write(repo.work, ".gemini/settings.json", "{}\n")
    write(repo.work, "opencode.json", "{}\n")
    start = StartFrame(task_id="t1", workflow="wf", content="x", workdir=str(repo.work))
    claude_adapter.create_claude()("prompt", AgentContext(start, (), str(repo.work), threading.Event(), "t1", "coder"))
    assert ran.exists()
    assert trust.untrusted_in(discover(repo.work).common_dir, repo.work, trust.GEMINI) is not None


@pytest.mark.parametrize("rel,key", [(".claude/settings.json", trust.CLAUDE),
                                     (".gemini/settings.json", trust.GEMINI), (".qwen/commands/x.toml", trust.QWEN),
                                     (".codex/config.toml", trust.CODEX),
                                     (".github/hooks/x.json", trust.COPILOT),
                                     (".github/copilot/settings.json", trust.COPILOT),
                                     (".github/agents/x.agent.md", trust.COPILOT),
                                     (".github/skills/s/SKILL.md", trust.COPILOT)])
def test_show_flags_a_task_that_changes_a_clis_project_settings(repo, gw, rel, key):
    work = repo.work
    assert gw("spawn t1", work).code == 0
    wt = wt_of(work, "t1")
    write(wt, rel, '{"hooks": {}}\n')
    git(wt, "add", "-f", rel)
    git(wt, "commit", "-q", "-m", "tooling")
    flags = json.loads(gw("show t1 --json", work).out)["trust_flags"]
    assert [f.split(":")[0] for f in flags] == [f"this change edits {key}"], flags


def test_show_flags_a_change_to_the_mcp_file_two_clis_load_for_each(repo, gw):
    """`.mcp.json` is loaded by Claude Code and by Copilot CLI: a change to it is flagged for both."""
    assert gw("spawn t1", repo.work).code == 0
    wt = wt_of(repo.work, "t1")
    write(wt, ".mcp.json", '{"mcpServers": {}}\n')
    git(wt, "add", ".mcp.json")
    git(wt, "commit", "-q", "-m", "tooling")
    flags = json.loads(gw("show t1 --json", repo.work).out)["trust_flags"]
    assert sorted(f.split(":")[0] for f in flags) == sorted(
        f"this change edits {key}" for key in (trust.CLAUDE, trust.COPILOT)), flags


SETTINGS_FILES = [".claude/settings.json", ".claude/hooks/x.sh", ".mcp.json", ".gemini/settings.json",
                  ".qwen/settings.json", ".codex/config.toml", ".opencode/plugins/x.js", "opencode.json", "opencode.jsonc",
                  ".github/hooks/x.json", ".github/copilot/settings.json", ".github/copilot/settings.local.json",
                  ".github/mcp.json", ".github/agents/x.agent.md", ".github/skills/s/SKILL.md",
                  ".agents/skills/s/SKILL.md", ".claude/skills/s/SKILL.md", ".env"]


def test_every_adapter_refuses_the_agents_edits_of_every_clis_project_settings(tmp_path):
    wt = os.path.realpath(tmp_path)
    deny = claude_adapter.settings(str(tmp_path))["permissions"]["deny"]
    for rel in SETTINGS_FILES:  # Claude Code: an Edit rule (it covers Write) on the absolute path, `//abs`
        folder = next((d for d in trust.AGENT_SETTINGS_DIRS if rel.startswith(d + "/")), None)
        assert (f"Edit(/{wt}/{folder}/**)" if folder else f"Edit(/{wt}/{rel})") in deny, (rel, deny)
    refused = copilot_adapter.settings_denied(str(tmp_path))  # Copilot CLI: write rules on the absolute path
    for rel in SETTINGS_FILES:
        folder = next((d for d in trust.AGENT_SETTINGS_DIRS if rel.startswith(d + "/")), None)
        assert (f"write({wt}/{folder}/**)" if folder else f"write({wt}/{rel})") in refused, (rel, refused)
    pattern = re.compile(gemini_adapter.SETTINGS_PATHS)  # Gemini CLI's policy: matched against the tool's JSON args
    assert json.dumps(gemini_adapter.SETTINGS_PATHS) in gemini_adapter.policy_text("")
    for rel in SETTINGS_FILES:
        for arg in ("file_path", "absolute_path"):
            assert pattern.search(json.dumps({arg: f"{wt}/{rel}"})), rel
            assert pattern.search(json.dumps({arg: rel})), rel
    for rel in ("src/claude.py", "docs/.mcp.json.md", "opencode.json.bak", "x.gemini/y", "qwen/settings.json",
                ".github/workflows/ci.yml", ".github/hooksy/x.json", ".github/copilot-instructions.md", ".env.example"):
        assert not pattern.search(json.dumps({"file_path": f"{wt}/{rel}"})), rel
    for rel in (".claude/**", ".mcp.json", ".gemini/**", ".qwen/**", ".opencode/**", ".codex/**", "opencode.json",
                "opencode.jsonc", ".github/hooks/**", ".github/copilot/settings.json", ".github/mcp.json",
                ".github/agents/**", ".github/skills/**", ".agents/skills/**", ".env"):
        assert f"edit(/{rel})" in qwen_adapter.DENIED and f"write_file(/{rel})" in qwen_adapter.DENIED, rel


def test_the_persons_own_ignored_settings_in_the_main_checkout_do_not_untrust_the_tasks(
        repo, gw, gn, tmp_path, monkeypatch):
    """A Claude Code user keeps an untracked, git-ignored `.claude/settings.local.json` in the main checkout (Claude
    Code writes it when they approve something). A task's worktree has only the committed files: after `git nerve
    trust` in the main checkout, the task's run starts. A local settings file the task itself holds (its copy
    differing from the person's, or a file its own .gitignore hides) stops it."""
    ran = _fake_cli(tmp_path, monkeypatch, "claude")
    work = repo.work
    commit_file(work, ".claude/settings.json", '{"permissions": {}}\n', "claude settings")
    commit_file(work, ".gitignore", ".claude/settings.local.json\n", "ignore the local settings")
    write(work, ".claude/settings.local.json", '{"permissions": {"allow": ["Bash(make:*)"]}}\n')  # theirs
    assert gw("spawn t1", work).code == 0
    wt = wt_of(work, "t1")
    res = gn("trust --json", work)
    assert res.code == 0 and json.loads(res.out)["trusted_now"] == [trust.CLAUDE], res
    assert list(claude(work)[trust.CLAUDE].value) == [".claude/settings.json"]  # theirs is not listed
    start = StartFrame(task_id="t1", workflow="wf", content="x", workdir=str(wt))
    ctx = AgentContext(start, (), str(wt), threading.Event(), "t1", "coder")
    claude_adapter.create_claude()("prompt", ctx)  # the committed file, as trusted
    assert ran.exists()
    ran.unlink()

    # their own file copied into the worktree (.worktreeinclude), byte for byte: still theirs
    write(wt, ".claude/settings.local.json", (work / ".claude/settings.local.json").read_text())
    claude_adapter.create_claude()("prompt", ctx)
    assert ran.exists()
    ran.unlink()
    # a different one in the task's worktree is the task's: refused
    write(wt, ".claude/settings.local.json", '{"hooks": {"SessionStart": []}}\n')
    with pytest.raises(AdapterSpawnFailed):
        claude_adapter.create_claude()("prompt", ctx)
    (wt / ".claude/settings.local.json").unlink()
    # a file the task's own .gitignore hides is still the task's
    write(wt, ".gitignore", ".claude/settings.local.json\n.claude/hooks/\n")
    write(wt, ".claude/hooks/start.sh", "touch /tmp/x\n")
    with pytest.raises(AdapterSpawnFailed):
        claude_adapter.create_claude()("prompt", ctx)
    assert not ran.exists()


@pytest.mark.parametrize("name,create", [("gemini", gemini_adapter.create_gemini), ("qwen", qwen_adapter.create_qwen)])
def test_the_worktrees_dotenv_is_gemini_and_qwens_setting_unless_it_is_the_persons_copy(
        repo, gw, gn, tmp_path, monkeypatch, name, create):
    """Gemini CLI and Qwen Code load the worktree's top-level `.env` into their environment and every command they
    run (GIT_CONFIG_* there runs what git config names). The person's own `.env` (untracked, ignored), copied into
    the task's worktree by `.worktreeinclude`, is theirs: the run starts. Once they change theirs, the older copy
    stops the run, and the line says to copy theirs again (trusting cannot help). A `.env` the task wrote where the
    person has none stops it and names `git nerve trust`."""
    ran = _fake_cli(tmp_path, monkeypatch, name)
    work = repo.work
    commit_file(work, ".gitignore", ".env\n", "ignore .env")
    commit_file(work, ".worktreeinclude", ".env\n", "copy .env into worktrees")
    write(work, ".env", "OPENAI_API_KEY=sk-mine\n")
    assert gn("trust --json", work).code == 0  # .worktreeinclude
    assert gw("spawn t1", work).code == 0
    wt = wt_of(work, "t1")
    assert (wt / ".env").read_text() == "OPENAI_API_KEY=sk-mine\n"
    start = StartFrame(task_id="t1", workflow="wf", content="x", workdir=str(wt))
    ctx = AgentContext(start, (), str(wt), threading.Event(), "t1", "coder")
    create()("prompt", ctx)  # the person's copy: it starts
    assert ran.exists()
    ran.unlink()

    write(work, ".env", "OPENAI_API_KEY=sk-rotated\n")
    with pytest.raises(AdapterSpawnFailed) as refused:
        create()("prompt", ctx)
    assert ".env differ from your own in the main checkout" in str(refused.value), refused.value
    assert "copy yours there again" in str(refused.value) and not ran.exists()

    (work / ".env").unlink()
    write(wt, ".env", "GIT_CONFIG_COUNT=1\nGIT_CONFIG_KEY_0=core.fsmonitor\nGIT_CONFIG_VALUE_0=touch /tmp/x\n")
    with pytest.raises(AdapterSpawnFailed) as refused:
        create()("prompt", ctx)
    assert ".env" in str(refused.value) and "git nerve trust" in str(refused.value), refused.value
    assert not ran.exists()


def test_claude_codes_nested_skills_count_at_any_depth(repo, gw, gn, tmp_path, monkeypatch):
    """Claude Code finds skills below the top too (`src/.claude/skills/`: it searches the directories of the files
    its agent touches), and a skill's frontmatter may carry hooks and allowed-tools. Every such file counts, committed
    or not, ignored or not, reached through a symlink too: the claude adapter starts no Claude Code until they are
    trusted, and `show` flags a task that adds one. The person's own (untracked, ignored) nested skill in the main
    checkout is theirs, as at the top."""
    from git_nerve.git.tracked import nested_folders

    ran = _fake_cli(tmp_path, monkeypatch, "claude")
    work = repo.work
    commit_file(work, ".gitignore", "mine/\n", "ignore mine/")
    write(work, "mine/.claude/skills/m/SKILL.md", "---\nname: m\n---\n")  # the person's own, ignored
    commit_file(work, "lib/.claude/skills/s/SKILL.md", "---\nname: s\n---\n", "a nested skill")
    assert nested_folders(work, ".claude/skills") == ["lib/.claude/skills", "mine/.claude/skills"]
    assert list(claude(work)[trust.CLAUDE].value) == ["lib/.claude/skills/s/SKILL.md"]
    assert gn("trust --json", work).code == 0
    assert gw("spawn t1", work).code == 0
    wt = wt_of(work, "t1")
    start = StartFrame(task_id="t1", workflow="wf", content="x", workdir=str(wt))
    ctx = AgentContext(start, (), str(wt), threading.Event(), "t1", "coder")
    claude_adapter.create_claude()("prompt", ctx)  # the committed one, trusted
    assert ran.exists()
    ran.unlink()

    hooks = "---\nname: x\nhooks:\n  PreToolUse:\n    - hooks: [{type: command, command: 'touch /tmp/x'}]\n---\n"
    for place in ("src/deep/.claude/skills/x/SKILL.md", "build/.claude/skills/x/SKILL.md"):
        write(wt, place, hooks)
        if place.startswith("build/"):
            write(wt, ".gitignore", "mine/\nbuild/\n")  # hidden from git status: still found
        with pytest.raises(AdapterSpawnFailed) as refused:
            claude_adapter.create_claude()("prompt", ctx)
        assert place in str(refused.value) and not ran.exists(), refused.value
        (wt / place).unlink()
    (wt / "elsewhere/skills/y").mkdir(parents=True)
    write(wt, "elsewhere/skills/y/SKILL.md", hooks)
    (wt / "docs").mkdir(exist_ok=True)
    os.symlink(wt / "elsewhere", wt / "docs/.claude")  # a nested .claude reached through a symlink
    assert "docs/.claude/skills" in nested_folders(wt, ".claude/skills")
    with pytest.raises(AdapterSpawnFailed) as refused:
        claude_adapter.create_claude()("prompt", ctx)
    assert "docs/.claude/skills/y/SKILL.md" in str(refused.value), refused.value

    (wt / "docs/.claude").unlink()
    write(wt, "src/.claude/skills/z/SKILL.md", hooks)
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", "a nested skill")
    flags = json.loads(gw("show t1 --json", work).out)["trust_flags"]
    assert [f.split(":")[0] for f in flags] == [f"this change edits {trust.CLAUDE}"], flags
