"""`git nerve mcp install|uninstall` on a real repository, in each CLI's own format (fast; the real CLIs'
own view of these files is in tests/test_real_mcp.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import BIN, run

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

EXE = str(BIN / "git-nerve")


@pytest.fixture
def work(repo):
    assert run([EXE, "init"], repo.work).code == 0
    return repo.work


def nerve(args: list[str], cwd: Path):
    return run([EXE, *args], cwd)


def home() -> Path:
    return Path(os.environ["HOME"])


def test_user_scope_writes_each_clis_own_format_and_uninstall_restores_every_byte(work):
    claude = home() / ".claude.json"
    claude.write_text(json.dumps({"numStartups": 2, "mcpServers": {"other": {"command": "x"}}, "é": "ü"},
                                 indent=2, ensure_ascii=False))
    codex = home() / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('model = "o4"\n\n[mcp_servers.other]\ncommand = "x"\n# a comment the user keeps\n')
    gemini = home() / ".gemini" / "settings.json"
    gemini.parent.mkdir()
    gemini.write_text('{"ui": {"theme": "Default"}}')  # one line, as some write it
    before = {p: p.read_bytes() for p in (claude, codex, gemini)}

    res = nerve(["mcp", "install", "claude", "codex", "gemini", "qwen", "opencode", "--json"], work)
    assert res.code == 0, res
    assert [r["action"] for r in json.loads(res.out)] == ["installed"] * 5

    assert json.loads(claude.read_text())["mcpServers"]["nerve"] == {"type": "stdio", "command": EXE, "args": ["mcp"], "env": {}}
    assert json.loads(claude.read_text())["mcpServers"]["other"] == {"command": "x"}
    assert tomllib.loads(codex.read_text())["mcp_servers"] == {"other": {"command": "x"}, "nerve": {"command": EXE, "args": ["mcp"], "startup_timeout_sec": 30}}
    assert codex.read_text().startswith(before[codex].decode())  # appended, nothing above it touched
    assert json.loads(gemini.read_text()) == {"ui": {"theme": "Default"}, "mcpServers": {"nerve": {"command": EXE, "args": ["mcp"], "timeout": 600000}}}
    qwen = home() / ".qwen" / "settings.json"
    assert json.loads(qwen.read_text()) == {"mcpServers": {"nerve": {"command": EXE, "args": ["mcp"], "timeout": 600000}}}
    opencode = home() / ".config" / "opencode" / "opencode.json"
    assert json.loads(opencode.read_text()) == {"mcp": {"nerve": {"type": "local", "command": [EXE, "mcp"], "enabled": True}}}

    again = nerve(["mcp", "install", "claude", "codex", "gemini", "--json"], work)
    assert [r["action"] for r in json.loads(again.out)] == ["already"] * 3

    res = nerve(["mcp", "uninstall", "--json"], work)
    assert res.code == 0, res
    assert sorted(r["action"] for r in json.loads(res.out)) == ["removed"] * 5
    assert {p: p.read_bytes() for p in (claude, codex, gemini)} == before
    assert not qwen.exists() and not qwen.parent.exists()  # created by install, gone again
    assert not opencode.exists() and not (home() / ".config").exists()
    assert not (work / ".git" / "nerve" / "mcp.json").exists()


def test_project_scope_writes_in_the_checkout_and_codex_refuses_it(work):
    res = nerve(["mcp", "install", "claude", "gemini", "opencode", "codex", "--scope", "project", "--json"], work)
    out = {r["cli"]: r for r in json.loads(res.out)}
    assert res.code == 1, res  # some refused, some done
    assert out["codex"]["action"] == "refused" and "--scope user" in out["codex"]["reason"]
    assert json.loads((work / ".mcp.json").read_text())["mcpServers"]["nerve"]["command"] == EXE
    assert (work / ".gemini" / "settings.json").exists() and (work / "opencode.json").exists()
    assert nerve(["mcp", "uninstall", "gemini"], work).code == 0
    assert not (work / ".gemini").exists() and (work / ".mcp.json").exists()  # only what was named
    assert nerve(["mcp", "uninstall"], work).code == 0
    assert not (work / ".mcp.json").exists() and not (work / "opencode.json").exists()


def test_project_scope_keeps_trusted_settings_trusted_and_untrusted_ones_untrusted(work):
    """What `mcp install --scope project` writes at the person's command does not untrust the CLI's project settings
    they trusted (the adapter would refuse every run until `git nerve trust`); settings the person has not trusted
    stay untrusted: the install does not trust what they have not seen."""
    def untrusted() -> set[str]:
        shown = json.loads(nerve(["trust", "--show", "--json"], work).out)["settings"]
        return {s["setting"] for s in shown if not s["trusted"]}

    (work / ".gemini").mkdir()
    (work / ".gemini" / "settings.json").write_text('{"hooks": {}}\n')  # someone's, never trusted here
    assert untrusted() == {"gemini project settings"}
    res = nerve(["mcp", "install", "claude", "gemini", "--scope", "project"], work)
    assert res.code == 0, res
    assert untrusted() == {"gemini project settings"}  # .mcp.json (new) trusted, .gemini/ still not
    assert nerve(["trust"], work).code == 0 and untrusted() == set()
    assert nerve(["mcp", "uninstall"], work).code == 0
    assert not (work / ".mcp.json").exists() and untrusted() == set()


def test_project_scope_is_refused_in_a_tasks_worktree(work):
    assert run([str(BIN / "git-worker"), "spawn", "t1", "-d", "x"], work).code == 0
    wt = Path(json.loads(run([str(BIN / "git-worker"), "status", "--json"], work).out)[0]["worktree"])
    res = nerve(["mcp", "install", "claude", "--scope", "project"], wt)
    assert res.code == 2 and "the worktree of task t1" in res.err and res.err.count("\n") == 1, res
    assert not (wt / ".mcp.json").exists()


def test_a_file_that_does_not_parse_or_would_be_reformatted_is_left_alone(work):
    claude = home() / ".claude.json"
    claude.write_text('{"mcpServers": {,}}')
    gemini = home() / ".gemini" / "settings.json"
    gemini.parent.mkdir()
    gemini.write_text('{\n  // a comment\n  "ui": {}\n}\n')
    opencode = home() / ".config" / "opencode" / "opencode.json"
    opencode.parent.mkdir(parents=True)
    opencode.write_text('{\n    "a": 1,\n  "b": 2\n}\n')  # mixed indentation: a rewrite would change other lines
    before = {p: p.read_bytes() for p in (claude, gemini, opencode)}
    res = nerve(["mcp", "install", "claude", "gemini", "opencode"], work)
    assert res.code == 2, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 3 and all(ln.startswith("warning: ") and "left alone" in ln for ln in lines), res.err
    assert "does not parse as JSON" in lines[0] and "add by hand" in lines[0]
    assert {p: p.read_bytes() for p in (claude, gemini, opencode)} == before
    assert not (work / ".git" / "nerve" / "mcp.json").exists()


def test_an_entry_changed_or_a_foreign_nerve_is_never_overwritten(work):
    gemini = home() / ".gemini" / "settings.json"
    gemini.parent.mkdir()
    gemini.write_text(json.dumps({"mcpServers": {"nerve": {"command": "someone-else"}}}, indent=2))
    res = nerve(["mcp", "install", "gemini", "claude"], work)
    assert res.code == 1 and "not this one" in res.err, res
    claude = home() / ".claude.json"
    data = json.loads(claude.read_text())
    data["mcpServers"]["nerve"]["args"] = ["mcp", "--task", "t9"]  # the user edited our entry
    claude.write_text(json.dumps(data, indent=2) + "\n")
    res = nerve(["mcp", "uninstall", "--json"], work)
    (r,) = json.loads(res.out)
    assert r["action"] == "refused" and "changed since install" in r["reason"]
    assert json.loads(claude.read_text())["mcpServers"]["nerve"]["args"] == ["mcp", "--task", "t9"]
    assert json.loads((work / ".git" / "nerve" / "mcp.json").read_text())["entries"][0]["cli"] == "claude"


def test_without_names_the_clis_on_path_and_unknown_names_are_refused(work, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("gemini", "opencode"):
        (bindir / name).write_text("#!/bin/sh\n")
        (bindir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{bindir}{os.pathsep}/usr/bin:/bin")
    res = run([EXE, "mcp", "install", "--json"], work, env=env)
    assert res.code == 0, res
    assert [r["cli"] for r in json.loads(res.out)] == ["gemini", "opencode"]
    bad = nerve(["mcp", "install", "vim"], work)
    assert bad.code == 2 and bad.err.strip() == "error: unknown CLI 'vim' (known: claude, codex, gemini, qwen, opencode)"


def test_help_and_outside_a_repository(tmp_path):
    assert "Register `git nerve mcp`" in nerve(["mcp", "install", "--help"], tmp_path).out
    assert "Tools: thread, post, heartbeat" in nerve(["mcp", "--help"], tmp_path).out
    res = nerve(["mcp", "install", "claude"], tmp_path)
    assert res.code == 2 and res.err.startswith("error: not a git repository")


def test_the_server_entry_is_an_absolute_executable(work):
    from git_nerve.mcptools.tools import server_entry

    entry = server_entry()
    assert os.path.isabs(entry["command"]) and os.access(entry["command"], os.X_OK) and entry["args"] == ["mcp"]
    assert Path(entry["command"]).parent == Path(sys.executable).parent
