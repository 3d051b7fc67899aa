"""The real Codex CLI (npm @openai/codex, pinned) through the shipped adapter, unchanged, on the scripted model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.repos.build import git
from fixtures.scripted_model import API_KEY, CODER_LINE, MODEL, ScriptedModel
from fixtures.scripted_model.repo import agent_repo
from fixtures.scripted_model.scenario import TEST_CMD
from tests.realtools import REAL_ENV, npm_tool

pytestmark = [pytest.mark.real, pytest.mark.timeout(1200)]

VERSION = "0.169.0"
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def codex_bin() -> Path:
    return npm_tool("@openai/codex", VERSION, "codex")


def env_for(codex_bin: Path, model: ScriptedModel, home: Path, key: str = API_KEY) -> dict[str, str]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        f'model = "{MODEL}"\nmodel_provider = "nerve"\n\n[model_providers.nerve]\nname = "nerve"\n'
        f'base_url = "{model.url}/v1"\nenv_key = "NERVE_TEST_OPENAI_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n"
    )
    env = dict(os.environ)
    node = shutil.which("node", path=REAL_ENV.get("PATH"))
    dirs = [str(VENV_BIN), str(codex_bin.parent)] + ([str(Path(node).parent)] if node else [])
    env["PATH"] = os.pathsep.join([*dirs, env.get("PATH", "")])
    env.update(CODEX_HOME=str(codex_home), NERVE_TEST_OPENAI_KEY=key, NO_COLOR="1")
    return env


def sh(argv, cwd, env, timeout=300):
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def task(tmp_path):
    repos = agent_repo(tmp_path)
    env = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    assert sh(["git", "nerve", "init"], repos.work, env).returncode == 0
    (repos.work / "nerve.toml").write_text(
        (repos.work / "nerve.toml").read_text() + f'\n[run]\ntest_command = "{TEST_CMD}"\n'
    )
    res = sh(["git", "worker", "spawn", "t1", "-d", "Add a line to README.md"], repos.work, env)
    assert res.returncode == 0, res.stderr
    worktree = repos.work.parent / "project.worktrees" / "t1"
    return repos, worktree, git(worktree, "rev-parse", "HEAD")


def bus_view(work: Path):
    from git_nerve.bus import messages, rounds, workers
    from git_nerve.bus.connection import Bus

    with Bus(work / ".git" / "nerve" / "bus.db") as bus:
        last = rounds.last_round(bus.conn, "t1")
        got = rounds.load(bus.conn, "t1", list(range(1, last + 1))) if last else []
        return got, messages.for_task(bus.conn, "t1", kinds=("commit",)), workers.get(bus.conn, "t1")


def run_develop(work: Path, env, timeout=600):
    t0 = time.monotonic()
    res = sh(["git", "nerve", "run", "develop", "--task", "t1", "--adapter", "codex", "--json"], work, env, timeout)
    return res, time.monotonic() - t0


def test_develop_completes_with_a_commit_on_the_branch(codex_bin, task, tmp_path):
    repos, worktree, base = task
    home = Path(os.environ["HOME"])
    with ScriptedModel(params={"workdir": str(worktree), "home": str(home), "base": base}) as model:
        env = env_for(codex_bin, model, home)
        res, _ = run_develop(repos.work, env)
        data = json.loads(res.stdout)
        assert res.returncode == 0 and data["outcome"] == "completed", (res.stdout[-3000:], res.stderr[-3000:])
        # git, not the agent: one new commit on the branch that adds the line, a clean worktree
        commits = git(worktree, "rev-list", f"{base}..HEAD").split()
        assert len(commits) == 1
        assert f"+{CODER_LINE}" in git(worktree, "show", commits[0], "--", "README.md")
        assert git(worktree, "status", "--porcelain") == ""
        assert git(repos.work, "status", "--porcelain") == "?? nerve.toml"  # nothing else in the main checkout
        got, recorded, w = bus_view(repos.work)
        assert [r.role for r in got] == ["coder", "tester", "reviewer"]
        assert got[1].metadata["passed"] is True and got[2].metadata["approved"] is True
        assert commits[0] in {c.payload["sha"] for c in recorded}
        assert w.heartbeat_status == "develop: completed"
        # the CLI's own evidence: the thread was read and the tests ran, in every role that must
        thread = model.results("coder")[0]
        assert "exited with code 0" in thread and "thread 't1'" in thread  # `git nerve thread` ran (first round: none yet)
        assert any("OK" in r for r in model.results("tester"))
        assert any(CODER_LINE in r for r in model.results("reviewer"))


def test_the_sandbox_refuses_what_is_outside_the_worktree(codex_bin, task):
    repos, worktree, base = task
    home = Path(os.environ["HOME"])
    with ScriptedModel(mode="escape", params={"workdir": str(worktree), "home": str(home), "base": base}) as model:
        env = env_for(codex_bin, model, home)
        res, _ = run_develop(repos.work, env)
        data = json.loads(res.stdout)
        assert res.returncode == 1 and data["outcome"] == "failed"
        assert not (home / "escaped-by-agent").exists() and not (home / "escaped-write.txt").exists()
        assert model.exfil == []  # curl never reached the server: no network in the sandbox
        results = model.results("coder")
        # the CLI's own evidence that its sandbox refused each attempt
        assert "Read-only file system" in results[0]  # touch under $HOME
        assert "read only lock file" in results[1]  # apt-get ran confined: dpkg's state is read-only, nothing installed
        assert "exited with code 0" not in results[2]  # curl: no network in the sandbox
        assert "rejected" in results[3] and "outside of the project" in results[3]  # apply_patch outside the worktree
        assert git(worktree, "rev-list", f"{base}..HEAD") == ""


def test_a_rejected_key_is_one_line_within_30_seconds(codex_bin, task):
    repos, worktree, base = task
    home = Path(os.environ["HOME"])
    with ScriptedModel(params={"workdir": str(worktree)}) as model:
        env = env_for(codex_bin, model, home, key="sk-wrong")
        res, seconds = run_develop(repos.work, env)
        data = json.loads(res.stdout)
        assert res.returncode == 1 and seconds < 30, (seconds, res.stderr[-2000:])
        (first,) = data["rounds"]
        assert first["status"] == "agent_failed" and "the API key was rejected" in first["detail"]


def test_a_hanging_model_is_a_timeout_that_keeps_the_output(codex_bin, task):
    repos, worktree, base = task
    home = Path(os.environ["HOME"])
    toml = repos.work / "nerve.toml"
    toml.write_text(toml.read_text().replace("[adapters.codex]\ntimeout = 300", "[adapters.codex]\ntimeout = 15"))
    with ScriptedModel(params={"workdir": str(worktree)}) as model:
        model.hang_seconds = 120
        env = env_for(codex_bin, model, home)
        res, seconds = run_develop(repos.work, env)
        data = json.loads(res.stdout)
        (first,) = data["rounds"]
        assert first["status"] == "timeout" and seconds < 60
        got, _, w = bus_view(repos.work)
        assert "last stderr" in got[0].content or "last stdout" in got[0].content
        assert w.heartbeat_status.startswith("develop: failed")


def test_a_stop_ends_the_running_agent(codex_bin, task):
    repos, worktree, base = task
    home = Path(os.environ["HOME"])
    with ScriptedModel(mode="slow", params={"workdir": str(worktree)}) as model:
        env = env_for(codex_bin, model, home)
        proc = subprocess.Popen(["git", "nerve", "run", "develop", "--task", "t1", "--adapter", "codex", "--json"],
                                cwd=repos.work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not model.calls("coder"):
            time.sleep(0.2)
        assert sh(["git", "nerve", "tell", "--task", "t1", "stop"], repos.work, env).returncode == 0
        told = time.monotonic()
        out, err = proc.communicate(timeout=90)
        data = json.loads(out)
        assert data["outcome"] == "stopped", err[-2000:]
        # the coder was running `sleep 30`: the stop ended it at the next heartbeat, not after the sleep
        assert time.monotonic() - told < 25
        assert data["rounds"][0]["status"] == "aborted"
