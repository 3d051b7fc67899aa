"""The contract every real agent CLI keeps through git-nerve, one parametrised suite for all of them.

Each test runs the REAL command `git nerve run develop --task t1 --adapter NAME` (or `validate`) on a repository
with an origin, after a plain `git nerve init`, against the scripted model on 127.0.0.1, with the CLI installed at
its pinned version (tests/agent_drivers.py says how, per CLI). What is asserted comes from git, the bus and the
model server's log of what the CLI sent back, never from what the agent said. What only one CLI does is tested
in its own module (tests/test_real_<cli>.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from fixtures.repos.build import git
from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.agent_drivers import DRIVERS, Driver, env_for
from tests.real_agents import (
    VENV_BIN, AgentRepo, _check, agent_env, agent_pids, assert_escape_refused, assert_happy_path, chat_params, home_files, stop_process,
    tell_stop,
)

pytestmark = pytest.mark.real

_bins: dict[str, Path] = {}
EVERY_CLI = sorted(DRIVERS)
#: CLIs whose credentials `git nerve validate` can see (an environment variable; the others keep theirs in their
#: own config files, which validate does not read)
KEYED_CLIS = sorted(name for name, d in DRIVERS.items() if d.key_var)


@pytest.fixture
def cli(request) -> tuple[Driver, Path]:
    """(driver, installed executable) for the test's CLI (``name``); installed once per session."""
    driver = DRIVERS[request.node.callspec.params["name"]]
    if driver.name not in _bins:
        _bins[driver.name] = driver.install()
    return driver, _bins[driver.name]


def wait_for(what: str, condition, seconds: float = 60, proc: subprocess.Popen | None = None) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``seconds`` (or when ``proc`` ended first)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the run ended before {what}: {proc.communicate()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {seconds:.0f}s")
        time.sleep(0.1)


@pytest.mark.parametrize("name", EVERY_CLI)
def test_develop_completes_with_one_commit_on_the_branch(tmp_path, name, cli):
    driver, bin_path = cli
    repo = AgentRepo.create(tmp_path, driver.name)
    with ScriptedModel(params=chat_params(repo)) as model:
        res = assert_happy_path(repo, model, env_for(driver, bin_path, model))
        for role in ("coder", "tester", "reviewer"):  # the adapter's rules let every step of the role through
            refused = [r for r in model.results(role) if "denied" in r or "requires approval" in r]
            assert not refused, (role, refused)
    commits = repo.new_commits()
    view = repo.view()
    assert {r.role: r for r in view.rounds}["coder"].metadata["commits"] == commits
    assert git(repo.worktree, "show", "--format=%an <%ae>", "-s", commits[0]) == "Nerve Test <nerve@example.invalid>"
    recorded = {m.payload["sha"]: m.payload for m in view.commits}
    if driver.hooks_run:  # the hooks ran in the CLI's shell: the post-commit hook recorded the commit
        assert recorded[commits[0]].get("source") != "workflow", recorded
        assert any(b.payload.get("source") == "post-commit" for b in view.heartbeats)
    assert agent_pids(repo.worktree) == []
    assert_usage_recorded(repo, model, driver)
    print(f"\n{driver.name} develop run: {res.seconds:.1f}s")


def assert_usage_recorded(repo: AgentRepo, model: ScriptedModel, driver: Driver) -> None:
    """The tokens recorded for the task are what the model server sent in its usage fields (issue 39)."""
    spent = json.loads(_check(["git", "worker", "show", "t1", "--json"], repo.work, agent_env(VENV_BIN / "git-nerve")))["usage"]
    if not driver.reports_usage:  # recorded as unknown, never estimated
        assert spent["total"]["input_tokens"] is None and all(not r["reported"] for r in spent["rounds"]), spent
        return
    sent = model.usage_total()
    got = spent["total"]
    assert (got["input_tokens"], got["cached_input_tokens"], got["output_tokens"]) == (
        sent["input_tokens"], sent["cached_input_tokens"], sent["output_tokens"]), (spent, sent)
    assert {r["role"] for r in spent["rounds"]} >= {"coder", "tester", "reviewer"}, spent


@pytest.mark.parametrize("name", EVERY_CLI)
def test_a_one_token_budget_stops_the_run_after_its_first_report(tmp_path, name, cli):
    driver, bin_path = cli
    if not driver.reports_usage:
        pytest.skip(f"{driver.name} reports no usage: no budget can be checked against it")
    repo = AgentRepo.create(tmp_path, driver.name, toml_extra="\n[budget]\ntask_tokens = 1\n")
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(driver, bin_path, model))
    assert res.code == 1 and res.result["outcome"] == "stopped", res
    assert "over budget task_tokens = 1" in res.result["reason"], res
    view = repo.view()
    assert [r.role for r in view.rounds] == ["coder", "budget"], [r.role for r in view.rounds]
    assert len(repo.new_commits()) == 1 and repo.status() == ""  # the coder's commit whole, nothing half-written
    assert "over budget task_tokens = 1" in view.worker.heartbeat_status


@pytest.mark.parametrize("name", EVERY_CLI)
def test_escape_attempts_are_refused(tmp_path, name, cli):
    driver, bin_path = cli
    repo = AgentRepo.create(tmp_path, driver.name)
    before = home_files()
    with ScriptedModel(mode="escape", params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(driver, bin_path, model))
        results = model.results("coder")
        assert_escape_refused(repo, model, res, before, apt_confined=driver.apt_confined)
    if driver.refused is not None:
        assert driver.refused(results), results  # the CLI's own refusal, sent back to the model
    assert repo.status() == ""


@pytest.mark.parametrize("name", EVERY_CLI)
def test_a_wrong_key_fails_fast_with_one_line(tmp_path, name, cli):
    driver, bin_path = cli
    repo = AgentRepo.create(tmp_path, driver.name)
    with ScriptedModel(params=chat_params(repo)) as model:
        res = repo.run_develop(env_for(driver, bin_path, model, key="sk-wrong-key"), timeout=120)
    assert res.code == 1, res
    assert res.seconds < 30, res
    assert res.result["outcome"] == "failed", res
    (first,) = res.result["rounds"]  # not re-run blindly
    assert first["status"] == "agent_failed", first
    detail = first["detail"]
    assert "\n" not in detail and all(w in detail for w in driver.key_words), detail


@pytest.mark.parametrize("name", EVERY_CLI)
def test_a_hanging_model_is_a_timeout_that_keeps_the_output(tmp_path, name, cli):
    driver, bin_path = cli
    repo = AgentRepo.create(tmp_path, driver.name, timeout=driver.timeout)
    with ScriptedModel(params=chat_params(repo)) as model:
        model.hang_seconds = 120
        res = repo.run_develop(env_for(driver, bin_path, model), timeout=driver.timeout_limit + 60)
    assert res.code == 1 and res.seconds < driver.timeout_limit, res
    assert res.result["outcome"] == "failed", res
    (first,) = res.result["rounds"]
    assert first["status"] == "timeout" and f"timed out after {driver.timeout}s" in first["detail"], first
    kept = first["detail"].split("\n")[1:]  # the CLI's own last output, after the cause line
    assert not kept or kept[0].startswith(("last stderr", "last stdout")), first
    if driver.keeps_output:
        assert kept and any(line.strip() for line in kept[1:]), first
    assert agent_pids(repo.worktree) == []
    assert repo.view().worker.heartbeat_status.startswith("develop: failed")


@pytest.mark.parametrize("name", EVERY_CLI)
def test_a_stop_via_tell_ends_the_run_promptly(tmp_path, name, cli):
    driver, bin_path = cli
    repo = AgentRepo.create(tmp_path, driver.name)
    git(repo.work, "config", "nerve.heartbeatInterval", "1")  # the runner looks at the inbox on every heartbeat
    mode = "slow" if driver.stop_mode == "slow" else "develop"
    with ScriptedModel(mode=mode, params=chat_params(repo)) as model:
        if driver.stop_mode == "hang":
            model.hang_seconds = 120
        env = env_for(driver, bin_path, model)
        proc = repo.start_develop(env)
        try:
            if driver.stop_mode == "hang":  # the CLI is up and its request to the model is being held
                wait_for(f"{driver.name} asking the model", lambda: model.waiting > 0, 90, proc)
            else:  # the coder's `sleep 30` is running
                wait_for(f"{driver.name} running the coder's first command", lambda: model.calls("coder"), 90, proc)
            assert agent_pids(repo.worktree, driver.marker), f"{driver.name} is not running"
            out, err, took = tell_stop(repo.work, proc, env, 90)
        finally:
            stop_process(proc)
    result = json.loads(out)
    assert result["outcome"] == "stopped", (out, err)
    assert result["rounds"][0]["status"] == "stopped", result  # a round a stop ended is "stopped", not a failure
    assert took < driver.stop_limit, took
    assert agent_pids(repo.worktree) == []
    assert repo.view().worker.heartbeat_status.startswith("develop: stopped")


@pytest.mark.parametrize("name", KEYED_CLIS)
def test_validate_checks_the_installed_cli_and_the_credentials(tmp_path, name, cli):
    driver, bin_path = cli
    repo = AgentRepo.create(tmp_path, driver.name)
    with ScriptedModel(params=chat_params(repo)) as model:
        env = env_for(driver, bin_path, model)
    argv = ["git", "nerve", "validate", "develop", "--adapter", driver.name, "--json"]
    ok = subprocess.run(argv, cwd=repo.work, env=env, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    del env[driver.key_var]
    bad = subprocess.run(argv, cwd=repo.work, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and driver.key_var in bad.stdout + bad.stderr, (bad.stdout, bad.stderr)
