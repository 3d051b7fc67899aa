"""git-nerve's own agent (git_nerve/agent): its confinement, and `git nerve run develop --adapter nerve_agent`
end to end against the scripted model (no CLI to install: it ships in the package)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.repos.build import git
from git_nerve.agent import tools
from git_nerve.demo.scripted_model.scenario import TEST_CMD
from git_nerve.demo.scripted_model.server import API_KEY, ScriptedModel
from tests.real_agents import AgentRepo, agent_env, assert_escape_refused, assert_happy_path, chat_params, home_files


@pytest.fixture
def ws(tmp_path) -> tools.Workspace:
    root = tmp_path / "wt"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.txt").write_text("hello\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return tools.Workspace(root, TEST_CMD)


def refused(ws, name, **args) -> str:
    out = tools.call(ws, name, args)
    assert out.startswith("refused:"), out
    return out


def test_files_inside_the_worktree_are_read_written_and_edited(ws):
    assert tools.call(ws, "read_file", {"path": "a.txt"}) == "hello\n"
    tools.call(ws, "write_file", {"path": "sub/b.txt", "content": "new\n"})
    assert (ws.root / "sub" / "b.txt").read_text() == "new\n"
    tools.call(ws, "edit_file", {"path": str(ws.root / "a.txt"), "old_string": "hello", "new_string": "bye"})
    assert (ws.root / "a.txt").read_text() == "bye\n"


def test_paths_outside_the_worktree_are_refused(ws, tmp_path):
    refused(ws, "read_file", path="../secret.txt")
    refused(ws, "read_file", path=str(tmp_path / "secret.txt"))
    refused(ws, "write_file", path="../escaped.txt", content="x")
    refused(ws, "write_file", path="/tmp/../" + str(tmp_path / "escaped2.txt"), content="x")
    refused(ws, "write_file", path=".git/hooks/pre-commit", content="#!/bin/sh\n")
    refused(ws, "edit_file", path="../secret.txt", old_string="outside", new_string="changed")
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path / "escaped2.txt").exists()
    assert (tmp_path / "secret.txt").read_text() == "outside\n"
    assert not (ws.root / ".git" / "hooks" / "pre-commit").exists()


def test_symlinks_out_of_the_worktree_are_not_followed(ws, tmp_path):
    (ws.root / "link.txt").symlink_to(tmp_path / "secret.txt")
    (ws.root / "dir").symlink_to(tmp_path)
    refused(ws, "read_file", path="link.txt")
    refused(ws, "write_file", path="link.txt", content="pwned")
    refused(ws, "write_file", path="dir/new.txt", content="pwned")
    assert (tmp_path / "secret.txt").read_text() == "outside\n"
    assert not (tmp_path / "new.txt").exists()


def test_commands_outside_the_allowlist_are_refused_and_never_run(ws, tmp_path):
    marker = tmp_path / "ran"
    for command in (f"touch {marker}", "sh -c true", f"git status; touch {marker}", f"git status | tee {marker}",
                    f"git status > {marker}", f"echo $(touch {marker})", f"git -c alias.x=!touch x {marker}",
                    "git config core.hooksPath /tmp", "git push origin main", f"git diff --output={marker}",
                    "git nerve tell --task t1 stop", f"python3 -c open('{marker}','w')"):
        refused(ws, "run_command", command=command)
    assert not marker.exists()


def test_allowed_commands_run_as_argv_and_report_their_exit(ws):
    out = tools.call(ws, "run_command", {"command": "git add a.txt && git status --short"})
    assert "A  a.txt" in out and "(exit code 0)" in out
    out = tools.call(ws, "run_command", {"command": TEST_CMD})
    assert "(exit code" in out  # the test command exactly as nerve.toml spells it


@pytest.fixture
def agent_bin_env():
    return agent_env(Path(sys.executable))


def _toml(model: ScriptedModel) -> str:
    return ('\n[adapters.nerve_agent]\nextra_args = ["--base-url", "' + model.url + '/v1", '
            '"--api-key-env", "NERVE_TEST_KEY"]\n')


def test_develop_completes_with_the_built_in_agent(tmp_path, agent_bin_env):
    with ScriptedModel() as model:
        repo = AgentRepo.create(tmp_path, "nerve_agent", toml_extra=_toml(model))
        model.params.update(chat_params(repo))
        assert_happy_path(repo, model, {**agent_bin_env, "NERVE_TEST_KEY": API_KEY}, timeout=120)


def test_escape_attempts_are_refused_end_to_end(tmp_path, agent_bin_env):
    with ScriptedModel(mode="escape") as model:
        repo = AgentRepo.create(tmp_path, "nerve_agent", toml_extra=_toml(model))
        model.params.update(chat_params(repo))
        before = home_files()
        res = repo.run_develop({**agent_bin_env, "NERVE_TEST_KEY": API_KEY}, timeout=120)
        assert_escape_refused(repo, model, res, before)
        assert all(r.startswith("refused:") for r in model.results("coder")), model.results("coder")


def test_a_wrong_key_fails_fast_with_the_cause(tmp_path, agent_bin_env):
    with ScriptedModel() as model:
        repo = AgentRepo.create(tmp_path, "nerve_agent", toml_extra=_toml(model))
        res = repo.run_develop({**agent_bin_env, "NERVE_TEST_KEY": "wrong"}, timeout=60)
    assert res.code != 0 and res.result.get("outcome") != "completed", res
    assert res.seconds < 30
    assert "401" in res.out + res.err, res
    assert repo.new_commits() == []
