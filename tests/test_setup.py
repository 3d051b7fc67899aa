"""`git nerve init`, `git nerve demo`, the man pages behind `git worker --help`,
and the README's two commands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, git


def test_init_creates_the_bus_pins_integration_and_is_idempotent(repo, gn):
    res = gn("init --json", repo.work)
    assert res.code == 0, res
    report = json.loads(res.out)
    common = repo.work / ".git"
    assert (common / "nerve" / "bus.db").is_file()
    assert report["integration"] == "main" and report["integration_pinned"] is True
    assert git(repo.work, "config", "--get", "nerve.integration") == "main"

    again = json.loads(gn("init --json", repo.work).out)
    assert again["integration_pinned"] is False  # already pinned: left alone
    assert git(repo.work, "config", "--get", "nerve.integration") == "main"


def test_init_from_a_subdirectory_finds_the_common_dir(repo, gn):
    sub = repo.work / "src"
    res = gn("init", sub)
    assert res.code == 0, res
    assert (repo.work / ".git" / "nerve" / "bus.db").is_file()
    assert not (sub / ".git").exists()


def test_init_outside_a_repository_is_one_clear_error(tmp_path, gn):
    res = gn("init", tmp_path)
    assert res.code == 2
    assert res.err.strip().startswith("error: not a git repository")
    assert len(res.err.strip().splitlines()) == 1


@pytest.mark.slow
def test_demo_runs_the_whole_lifecycle_with_a_real_conflict(tmp_path, sh):
    target = tmp_path / "demo"
    res = sh(["git", "nerve", "demo", "--fast", "--dir", str(target)], tmp_path, timeout=300)
    assert res.code == 0, res.out + res.err
    assert "CONFLICTED" in res.out and "git rebase --continue" in res.out
    log = git(target / "shop", "log", "--format=%s", "origin/main")
    assert "Merge feat/tax-rate (tax-rate)" in log
    assert "Merge feat/tax-label (tax-label)" in log
    prices = git(target / "shop", "show", "origin/main:prices.py")
    assert "TAX_RATE = 0.21  # VAT, standard rate" in prices
    status = json.loads(sh(["git", "worker", "status", "--json"], target / "shop").out)
    assert {w["task_id"]: w["state"] for w in status} == {"tax-rate": "COMPLETED", "tax-label": "COMPLETED"}


def test_demo_refuses_a_non_empty_directory(tmp_path, gn):
    (tmp_path / "keep.txt").write_text("mine")
    res = gn(["demo", "--dir", str(tmp_path)], tmp_path)
    assert res.code == 1
    assert "not empty" in res.err
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_man_pages_back_git_worker_help(tmp_path, repo, sh):
    if shutil.which("man") is None:
        pytest.skip("man is not installed on this machine")
    man1 = tmp_path / "man" / "man1"
    res = sh([sys.executable, "-m", "git_nerve.manpages", str(man1)], tmp_path)
    assert res.code == 0, res
    for page in ("git-worker.1", "git-nerve.1", "git-worker-spawn.1", "git-worker-merge.1"):
        assert (man1 / page).is_file(), page
    env = {**os.environ, "MANPATH": str(tmp_path / "man"), "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "100"}
    proc = subprocess.run(["git", "worker", "--help"], cwd=repo.work, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "git-worker" in proc.stdout and "spawn" in proc.stdout


@pytest.mark.parametrize("argv", [["git", "worker", "-h"], ["git", "worker", "help"], ["git", "nerve", "-h"]])
def test_short_help_and_help_command_print_usage(repo, sh, argv):
    res = sh(argv, repo.work)
    assert res.code == 0, res
    assert res.out.startswith("Usage: git ")
    assert "spawn" in res.out or "thread" in res.out or "init" in res.out


def test_help_for_one_command(repo, sh):
    res = sh(["git", "worker", "help", "merge"], repo.work)
    assert res.code == 0, res
    assert "Usage: git worker merge" in res.out and "--check" in res.out


def test_readme_starts_with_the_two_commands_and_ci_runs_the_second_verbatim():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    assert blocks[0] == "./install.sh --demo"  # installs, then shows the demo from what it installed (issue 43)
    test_command = blocks[1]
    assert "pytest" in test_command and "\n" not in test_command
    extracted = subprocess.run(
        ["sed", "-n", "/<!-- test-command -->/{n;n;p;}", "README.md"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    assert extracted == test_command
    assert "test-command" in (ROOT / ".ci" / "run").read_text()
