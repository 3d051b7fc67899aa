"""What only Codex CLI does, through the shipped `codex` adapter (the contract every CLI keeps is
tests/test_real_agents.py; its driver, with the pinned version, is in tests/agent_drivers.py).

Codex runs its tools inside its own OS sandbox (bubblewrap): here, the sandbox's own evidence for each escape.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from git_nerve.demo.scripted_model import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from git_nerve.workflow.adapters.codex import hook_overrides
from tests.real_agents import AgentRepo, agent_env, chat_params

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


def _codex_hooks(codex_bin: Path, cwd: Path, overrides: list[str]) -> list[dict]:
    """The hooks Codex itself would run in ``cwd`` with these ``-c`` values, and their trust (its app-server's
    ``hooks/list``: what its own /hooks review screen shows)."""
    argv = [str(codex_bin), "app-server", *(x for o in overrides for x in ("-c", o))]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=agent_env(codex_bin), cwd=cwd)
    try:
        for msg in ({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "nerve", "version": "1"}}},
                    {"method": "initialized"}, {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}}):
            proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:  # its answers come in order; notifications between them are skipped
            answer = json.loads(line)
            if answer.get("id") == 2:
                return [h for entry in answer["result"]["data"] for h in entry["hooks"]]
        raise AssertionError(f"codex app-server ended without answering: {proc.stderr.read()[-2000:]}")
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_the_notes_hooks_are_trusted_by_their_hash_and_no_other_hook_is(codex_bin, repo):
    """The adapter trusts its own two hooks for the run (the hash Codex computes for them), never every hook:
    a hook of the person's own config it has not reviewed stays untrusted, so Codex does not run it."""
    codex_home = Path(os.environ["HOME"]) / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "hooks.json").write_text(json.dumps({"hooks": {"PostToolUse": [
        {"matcher": "*", "hooks": [{"type": "command", "command": "echo unreviewed", "timeout": 5}]}]}}))
    command = "/bin/sh '/path with space/notes-hook.sh' m s '/opt/nerve/bin/git-nerve' notes --hook codex"
    hooks = _codex_hooks(codex_bin, repo.worktree, hook_overrides(command))
    trust = {(h["source"], h["eventName"], h["command"]): h["trustStatus"] for h in hooks}
    assert trust == {("sessionFlags", "postToolUse", command): "trusted",
                     ("sessionFlags", "preToolUse", command): "trusted",
                     ("user", "postToolUse", "echo unreviewed"): "untrusted"}, hooks
