"""The real Gemini CLI (npm @google/gemini-cli, pinned) through the shipped `gemini` adapter.

Every test runs the real command `git nerve run develop --task t1 --adapter gemini`
on a repository with an origin, after a plain `git nerve init`, against the
scripted model (git_nerve/scripted_model/gemini.py) on 127.0.0.1. What is asserted
comes from git, the bus and the model server's log of what the CLI sent back.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from fixtures.repos.build import git
from git_nerve.scripted_model.scenario import CODER_LINE, TEST_CMD
from git_nerve.scripted_model.server import API_KEY, MODEL, ScriptedModel
from tests.real_agents import AgentRepo, _check, agent_env, agent_pids, stop_process
from tests.realtools import npm_tool

pytestmark = pytest.mark.real

VERSION = "0.61.0"


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return npm_tool("@google/gemini-cli", VERSION, "gemini")


def gemini_env(bin_path: Path, model: ScriptedModel, key: str = API_KEY) -> dict[str, str]:
    """The user's own Gemini setup, in the test's temporary HOME: an API key and a base URL (a proxy)."""
    home = Path(agent_env(bin_path)["HOME"])
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "model": {"name": MODEL},
    }))
    return agent_env(bin_path, GEMINI_API_KEY=key, GOOGLE_GEMINI_BASE_URL=model.url)


def params(repo: AgentRepo) -> dict:
    return {"workdir": str(repo.worktree), "home": str(Path(agent_env("x")["HOME"])), "base": repo.base}


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")} if path.exists() else set()


def test_develop_completes_with_a_commit_on_the_branch(tmp_path, gemini_bin):
    repo = AgentRepo.create(tmp_path, "gemini")
    main_before = git(repo.work, "rev-parse", "HEAD")
    work_status_before = git(repo.work, "status", "--porcelain")
    with ScriptedModel(params=params(repo)) as model:
        res = repo.run_develop(gemini_env(gemini_bin, model))
        log = [(e.role, e.step, e.tool_calls, [r[:300] for r in e.results[-1:]]) for e in model.entries()]
    assert res.code == 0, (res, log)
    assert res.result["outcome"] == "completed", res

    # git: one new commit on the task branch, adding the coder's line to README.md; nothing left behind
    commits = repo.new_commits()
    assert len(commits) == 1, commits
    diff = git(repo.worktree, "show", "--format=", commits[0], "--", "README.md")
    assert f"+{CODER_LINE}" in diff
    assert git(repo.worktree, "show", "--format=%an <%ae>", "-s", commits[0]) == "Nerve Test <nerve@example.invalid>"
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

    # what the CLI itself sent back: the thread, the test run, the diff
    assert any("thread 't1' has no rounds yet" in r for r in model.results("coder")), model.results("coder")
    for role in ("tester", "reviewer"):
        assert any("[#1 coder]" in r for r in model.results(role)), (role, model.results(role))
    for role in ("coder", "tester"):
        assert any("OK" in r and "Ran 1 test" in r for r in model.results(role)), (role, model.results(role))
    assert any(f"+{CODER_LINE}" in r for r in model.results("reviewer")), model.results("reviewer")

    # the bus: the commit is recorded, and the hooks the adapter restored ran (heartbeat from post-commit)
    recorded = {m.payload["sha"]: m.payload for m in view.commits}
    assert commits[0] in recorded, recorded
    assert recorded[commits[0]].get("source") != "workflow", "the post-commit hook did not run in Gemini's shell"
    assert any(b.payload.get("source") == "post-commit" for b in view.heartbeats)
    assert any(b.payload.get("source") == "workflow" for b in view.heartbeats)
    assert view.worker.heartbeat_status == "develop: completed"
    print(f"\ngemini develop run: {res.seconds:.1f}s for {len(view.rounds)} rounds")


def test_commits_are_recorded_by_the_runner_when_gemini_bypasses_the_hooks(tmp_path, gemini_bin):
    """Without the adapter's hooks restoration (extra_args cannot undo it, a user's env can): the runner records."""
    repo = AgentRepo.create(tmp_path, "gemini")
    with ScriptedModel(params=params(repo)) as model:
        env = gemini_env(gemini_bin, model)
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


def test_escape_attempts_are_refused(tmp_path, gemini_bin):
    repo = AgentRepo.create(tmp_path, "gemini")
    home = Path(agent_env("x")["HOME"])
    home_before = files_under(home)
    with ScriptedModel(mode="escape", params=params(repo)) as model:
        res = repo.run_develop(gemini_env(gemini_bin, model))
        results = "\n".join(model.results("coder"))
        assert model.exfil == []
    assert res.result.get("outcome") != "completed", res
    assert res.code != 0
    new = files_under(home) - home_before
    assert not [p for p in new if "escaped" in p], new
    assert "denied by policy" in results, results
    assert "Reading package lists" not in results and "nerve-sandbox-probe" not in results.replace(
        "apt-get install -y nerve-sandbox-probe", "")
    assert repo.new_commits() == []


def test_a_wrong_key_fails_fast_with_one_line(tmp_path, gemini_bin):
    repo = AgentRepo.create(tmp_path, "gemini")
    with ScriptedModel(params=params(repo)) as model:
        res = repo.run_develop(gemini_env(gemini_bin, model, key="wrong-key"), timeout=120)
    assert res.code != 0, res
    assert res.seconds < 30, res
    assert res.result["outcome"] == "failed", res
    detail = res.result["rounds"][0]["detail"]
    assert "\n" not in detail and "API key not valid" in detail and "GEMINI_API_KEY" in detail, detail


def test_a_hanging_model_is_a_timeout_that_keeps_the_output(tmp_path, gemini_bin):
    repo = AgentRepo.create(tmp_path, "gemini", timeout=15)
    with ScriptedModel(params=params(repo)) as model:
        model.hang_seconds = 120
        res = repo.run_develop(gemini_env(gemini_bin, model), timeout=120)
    assert res.code != 0 and res.seconds < 60, res
    assert res.result["outcome"] == "failed", res
    coder = res.result["rounds"][0]
    text = json.dumps(coder)
    assert coder["status"] == "timeout" and "timed out after 15s" in coder["detail"], coder
    kept = coder["detail"].split("\n")[1:]  # the CLI's own last output, after the cause line
    assert kept and kept[0].startswith(("last stderr", "last stdout")) and any(line.strip() for line in kept[1:]), coder


def test_stop_via_tell_ends_the_run_promptly(tmp_path, gemini_bin):
    """`slow` mode's `sleep 30` is refused by the adapter's policy, so the coder is kept busy by a hanging model."""
    repo = AgentRepo.create(tmp_path, "gemini")
    git(repo.work, "config", "nerve.heartbeatInterval", "1")  # the runner looks at the inbox on every heartbeat
    with ScriptedModel(params=params(repo)) as model:
        model.hang_seconds = 120
        env = gemini_env(gemini_bin, model)
        proc = repo.start_develop(env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not agent_pids(repo.worktree, "gemini") and proc.poll() is None:
                time.sleep(0.2)
            assert proc.poll() is None, ("the run ended before the stop", proc.communicate())
            assert agent_pids(repo.worktree, "gemini"), "gemini never started"
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


def test_validate_checks_the_installed_cli_and_the_credentials(tmp_path, gemini_bin):
    repo = AgentRepo.create(tmp_path, "gemini")
    with ScriptedModel(params=params(repo)) as model:
        env = gemini_env(gemini_bin, model)
    argv = ["git", "nerve", "validate", "develop", "--adapter", "gemini", "--json"]
    ok = subprocess.run(argv, cwd=repo.work, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    del env["GEMINI_API_KEY"]
    bad = subprocess.run(argv, cwd=repo.work, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "GEMINI_API_KEY" in bad.stdout + bad.stderr, (bad.stdout, bad.stderr)
