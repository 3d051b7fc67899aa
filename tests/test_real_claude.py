"""The real Claude Code (npm @anthropic-ai/claude-code, pinned) through the shipped `claude` adapter.

Every test runs the real command `git nerve run develop --task t1 --adapter claude`
on a repository with an origin, after a plain `git nerve init`, against the
scripted model (git_nerve/scripted_model/anthropic.py: the Messages API with SSE)
on 127.0.0.1. What is asserted comes from git, the bus and the model server's log
of the tool results Claude Code sent back (its own evidence of what ran or was refused).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from fixtures.repos.build import git
from git_nerve.scripted_model.scenario import CODER_LINE
from git_nerve.scripted_model.server import API_KEY, ScriptedModel
from tests.real_agents import AgentRepo, _check, agent_env, agent_pids, stop_process
from tests.realtools import npm_tool

pytestmark = pytest.mark.real

VERSION = "2.1.330"


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return npm_tool("@anthropic-ai/claude-code", VERSION, "claude")


def claude_env(bin_path: Path, model: ScriptedModel, key: str = API_KEY) -> dict[str, str]:
    """The user's own Claude Code setup: an API key and a base URL (a gateway), in the test's temporary HOME."""
    return agent_env(bin_path, ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=model.url)


def params(repo: AgentRepo) -> dict:
    return {"workdir": str(repo.worktree), "home": str(Path(agent_env("x")["HOME"])), "base": repo.base}


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")} if path.exists() else set()


def test_develop_completes_with_a_commit_on_the_branch(tmp_path, claude_bin):
    repo = AgentRepo.create(tmp_path, "claude")
    main_before = git(repo.work, "rev-parse", "HEAD")
    work_status_before = git(repo.work, "status", "--porcelain")
    with ScriptedModel(params=params(repo)) as model:
        res = repo.run_develop(claude_env(claude_bin, model))
        log = [(e.role, e.step, e.tool_calls, [r[:300] for r in e.results[-1:]]) for e in model.entries()]
    assert res.code == 0, (res, log)
    assert res.result["outcome"] == "completed", res

    # git: one new commit on the task branch, adding the coder's line to README.md; nothing left behind
    commits = repo.new_commits()
    assert len(commits) == 1, commits
    diff = git(repo.worktree, "show", "--format=", commits[0], "--", "README.md")
    assert f"+{CODER_LINE}" in diff
    assert git(repo.worktree, "show", "--name-only", "--format=", commits[0]).split() == ["README.md"]
    assert repo.status() == ""
    assert git(repo.work, "rev-parse", "HEAD") == main_before
    assert git(repo.work, "status", "--porcelain") == work_status_before

    # the thread: a typed round per role
    view = repo.view()
    by_role = {r.role: r for r in view.rounds}
    assert {"coder", "tester", "reviewer"} <= set(by_role), [r.role for r in view.rounds]
    assert by_role["coder"].metadata["files_changed"] == ["README.md"]
    assert by_role["coder"].metadata["commits"] == commits
    assert by_role["tester"].metadata["passed"] is True
    assert by_role["reviewer"].metadata["approved"] is True

    # what Claude Code itself sent back: the thread, the test run, the commit, the diff; nothing refused
    assert any("thread 't1' has no rounds yet" in r for r in model.results("coder")), model.results("coder")
    for role in ("tester", "reviewer"):
        assert any("[#1 coder]" in r for r in model.results(role)), (role, model.results(role))
    for role in ("coder", "tester"):
        assert any("OK" in r and "Ran 1 test" in r for r in model.results(role)), (role, model.results(role))
    assert any("README: scripted change" in r for r in model.results("coder")), model.results("coder")
    assert any(f"+{CODER_LINE}" in r for r in model.results("reviewer")), model.results("reviewer")
    for role in ("coder", "tester", "reviewer"):
        assert not [r for r in model.results(role) if "denied" in r or "requires approval" in r], (role, log)

    # the bus: the commit is recorded (by the post-commit hook) and the heartbeats say how it ended
    recorded = {m.payload["sha"]: m.payload for m in view.commits}
    assert commits[0] in recorded, recorded
    assert any(b.payload.get("source") == "post-commit" for b in view.heartbeats)
    assert view.worker.heartbeat_status == "develop: completed"
    times = ", ".join(f"{r['role']} {r.get('duration_s', 0):.1f}s" for r in res.result.get("rounds", []))
    print(f"\nclaude develop run: {res.seconds:.1f}s ({times})")


def test_escape_attempts_are_refused(tmp_path, claude_bin):
    repo = AgentRepo.create(tmp_path, "claude")
    home = Path(agent_env("x")["HOME"])
    home_before = files_under(home)
    with ScriptedModel(mode="escape", params=params(repo)) as model:
        res = repo.run_develop(claude_env(claude_bin, model))
        results = model.results("coder")
        assert model.exfil == []
    assert res.result.get("outcome") != "completed", res
    assert res.code != 0
    new = files_under(home) - home_before
    assert not [p for p in new if "escaped" in p], new
    # each of the four attempts came back refused by Claude Code's permission rules
    refused = [r for r in results if "denied" in r]
    assert len(refused) >= 4, results
    joined = "\n".join(results)
    assert "Reading package lists" not in joined and "Unable to locate package" not in joined, joined
    assert repo.new_commits() == []
    assert repo.status() == ""


def test_a_wrong_key_fails_fast_with_one_line(tmp_path, claude_bin):
    repo = AgentRepo.create(tmp_path, "claude")
    with ScriptedModel(params=params(repo)) as model:
        res = repo.run_develop(claude_env(claude_bin, model, key="sk-wrong"), timeout=120)
    assert res.code != 0, res
    assert res.seconds < 30, res
    assert res.result["outcome"] == "failed", res
    detail = res.result["rounds"][0]["detail"]
    assert "\n" not in detail and "Invalid API key" in detail and "ANTHROPIC_API_KEY" in detail, detail
    assert len(res.result["rounds"]) == 1, res  # not re-run blindly


def test_a_hanging_model_is_a_timeout_that_keeps_the_output(tmp_path, claude_bin):
    repo = AgentRepo.create(tmp_path, "claude", timeout=15)
    with ScriptedModel(params=params(repo)) as model:
        model.hang_seconds = 120
        res = repo.run_develop(claude_env(claude_bin, model), timeout=120)
    assert res.code != 0 and res.seconds < 60, res
    assert res.result["outcome"] == "failed", res
    coder = res.result["rounds"][0]
    text = json.dumps(coder)
    assert "timed out" in text or "timeout" in text, coder
    assert agent_pids(repo.worktree, "claude") == []


def test_stop_via_tell_ends_the_run_promptly(tmp_path, claude_bin):
    """`slow` mode's `sleep 30` is refused by the rules, so the coder is kept busy by a hanging model."""
    repo = AgentRepo.create(tmp_path, "claude")
    git(repo.work, "config", "nerve.heartbeatInterval", "1")  # the runner looks at the inbox on every heartbeat
    with ScriptedModel(params=params(repo)) as model:
        model.hang_seconds = 120
        env = claude_env(claude_bin, model)
        proc = repo.start_develop(env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not agent_pids(repo.worktree, "claude") and proc.poll() is None:
                time.sleep(0.2)
            assert proc.poll() is None, ("the run ended before the stop", proc.communicate())
            assert agent_pids(repo.worktree, "claude"), "claude never started"
            time.sleep(3)  # it reads the prompt and asks the model, which hangs
            assert proc.poll() is None
            told = time.monotonic()
            _check(["git", "nerve", "tell", "--task", "t1", "stop"], repo.work, env)
            out, err = proc.communicate(timeout=60)
            took = time.monotonic() - told
        finally:
            stop_process(proc)
    result = json.loads(out)
    assert result["outcome"] == "stopped", (out, err)
    assert took < 15, took
    assert agent_pids(repo.worktree) == []
    assert repo.view().worker.heartbeat_status.startswith("develop: stopped")


def test_validate_checks_the_installed_cli_and_the_credentials(tmp_path, claude_bin):
    repo = AgentRepo.create(tmp_path, "claude")
    with ScriptedModel(params=params(repo)) as model:
        env = claude_env(claude_bin, model)
    argv = ["git", "nerve", "validate", "develop", "--adapter", "claude", "--json"]
    ok = subprocess.run(argv, cwd=repo.work, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    del env["ANTHROPIC_API_KEY"]
    bad = subprocess.run(argv, cwd=repo.work, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "ANTHROPIC_API_KEY" in bad.stdout + bad.stderr, (bad.stdout, bad.stderr)
