"""The `git worker` command surface: help everywhere, NO_COLOR, JSON, and running from any
subdirectory, any worktree, or with a hook's GIT_* variables set."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.cli.worker import worker

COMMANDS = [name for name in worker.commands if name != "help"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(repo, gw, command):
    long = gw([command, "--help"], repo.work)
    assert long.code == 0 and long.out.startswith(f"Usage: git worker {command}"), long
    short = gw([command, "-h"], repo.work)
    assert short.out == long.out
    via_help = gw(["help", command], repo.work)
    assert via_help.code == 0 and via_help.out.strip() == long.out.strip()
    assert "--json" in long.out or command in ("help", "run")


def test_group_help_lists_the_commands_and_exit_codes(repo, gw):
    res = gw("-h", repo.work)
    assert res.code == 0
    for name in ("spawn", "status", "approve", "request-changes", "merge", "cancel", "retry", "show",
                 "start", "done", "heartbeat", "fail"):
        assert f"  {name}" in res.out
    assert "Exit codes" in res.out and "3 invalid transition" in res.out
    assert gw("help", repo.work).out.strip() == res.out.strip()


def test_help_needs_no_repository(tmp_path, gw):
    assert gw("spawn --help", tmp_path).code == 0
    assert gw("help merge", tmp_path).code == 0


def test_usage_errors_exit_2(repo, gw):
    assert gw("nope", repo.work).code == 2
    assert gw("spawn", repo.work).code == 2  # missing TASK_ID
    assert gw("merge t1 --bogus", repo.work).code == 2
    assert gw("status --interval 0", repo.work).code == 2


def test_heartbeat_console_script_usage_errors(repo, sh):
    wt = wk.spawn(repo.work, "t1")
    res = sh(["git", "worker", "heartbeat", "--bogus"], wt)
    assert res.code == 2 and res.err.startswith("error: unexpected argument")
    res = sh(["git", "worker", "heartbeat", "--progress", "x"], wt)
    assert res.code == 2
    res = sh(["git", "worker", "heartbeat", "--help"], wt)
    assert res.code == 0 and "Usage: git worker heartbeat" in res.out


def test_json_outputs_parse(repo, gw):
    wt = wk.spawn(repo.work, "t1")
    for args, cwd, state in ((["start", "--json"], wt, "WORKING"),
                             (["heartbeat", "--json"], wt, None),
                             (["done", "--allow-empty", "--json"], wt, "IN_REVIEW"),
                             (["approve", "t1", "--json"], repo.work, "APPROVED"),
                             (["request-changes", "t1", "--comment", "again", "--json"], repo.work, "WORKING"),
                             (["fail", "why", "--json"], wt, "FAILED"),
                             (["retry", "t1", "--json"], repo.work, "ASSIGNED"),
                             (["cancel", "t1", "--json"], repo.work, "FAILED")):
        res = gw(args, cwd)
        assert res.code == 0, (args, res)
        obj = json.loads(res.out)
        assert obj["task_id"] == "t1"
        if state:
            assert obj["state"] == state


# -- colour ------------------------------------------------------------------------------------


def run_in_pty(argv: list[str], cwd: Path, env: dict) -> bytes:
    """Run ``argv`` with stdout and stderr on a terminal; return everything it printed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=30)
    os.close(master)
    return b"".join(chunks)


def test_colour_only_on_a_terminal_and_never_with_no_color(repo):
    wk.drive(repo.work, "t1", "WORKING")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    coloured = run_in_pty(["git", "worker", "status"], repo.work, env)
    assert b"\x1b[" in coloured and b"t1" in coloured
    error = run_in_pty(["git", "worker", "approve", "nope"], repo.work, env)
    assert b"\x1b[" in error and b"error:" in error
    plain = run_in_pty(["git", "worker", "status"], repo.work, dict(env, NO_COLOR="1"))
    assert b"\x1b[" not in plain and b"t1" in plain and b"WORKING" in plain
    plain_err = run_in_pty(["git", "worker", "approve", "nope"], repo.work, dict(env, NO_COLOR="1"))
    assert b"\x1b[" not in plain_err and b"error: unknown task" in plain_err


def test_no_colour_when_piped(repo, sh):
    wk.spawn(repo.work, "t1")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    res = sh(["git", "worker", "status"], repo.work, env=env)
    assert res.code == 0 and "\x1b[" not in res.out


# -- where commands run from ------------------------------------------------------------------


def test_the_whole_lifecycle_from_subdirectories_and_other_worktrees(repo, gw):
    work = repo.work
    deep = work / "docs" / "deep"
    deep.mkdir()
    assert gw("spawn t1", deep).code == 0
    wt1 = wk.worktree(work, "t1")
    wt2 = wk.drive(work, "t2", "WORKING")
    (wt1 / "src" / "pkg").mkdir()
    assert gw("start", wt1 / "src" / "pkg").code == 0
    build.commit_file(wt1, "src/pkg/new.py", "x = 1\n")
    assert gw("heartbeat", wt1 / "src" / "pkg").code == 0
    assert gw("done", wt1 / "src" / "pkg").code == 0
    assert gw("approve t1", wt2 / "docs").code == 0  # an orchestrator command from another task's worktree
    assert gw("merge t1", wt2).code == 0
    assert wk.state(work, "t1") == "COMPLETED" and wk.state(work, "t2") == "WORKING"
    assert (work / "src" / "pkg" / "new.py").is_file()


def test_commands_ignore_a_hooks_git_variables_aimed_at_another_worktree(repo, sh, tmp_path):
    """A hook in the main checkout runs `git worker ...` with GIT_DIR/GIT_INDEX_FILE set for the main checkout."""
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    build.commit_file(wt, "feature.txt", "f\n")
    build.commit_file(work, "docs/guide.md", "# Guide\n\nchanged on main\n")
    env = dict(os.environ, GIT_DIR=str(work / ".git"), GIT_WORK_TREE=str(work),
               GIT_INDEX_FILE=str(work / ".git" / "index"), GIT_PREFIX="")
    main_index = (work / ".git" / "index").read_bytes()
    res = sh(["git", "worker", "done", "--task", "t1"], tmp_path, env=env)
    assert res.code == 0, res
    assert wk.state(work, "t1") == "IN_REVIEW"
    assert git(work, "rev-parse", "feat/t1~1") == git(work, "rev-parse", "main")  # the worktree was rebased
    assert (wt / "docs" / "guide.md").read_text().endswith("changed on main\n")
    assert git(wt, "status", "--porcelain") == ""
    assert (work / ".git" / "index").read_bytes() == main_index  # the main checkout's index was not touched
    assert git(work, "status", "--porcelain") == ""
    res = sh(["git", "worker", "approve", "t1"], tmp_path, env=env)
    assert res.code == 0
    res = sh(["git", "worker", "merge", "t1"], tmp_path, env=env)
    assert res.code == 0, res
    assert git(work, "status", "--porcelain") == "" and (work / "feature.txt").is_file()


def test_version(repo, gw):
    res = gw("--version", repo.work)
    assert res.code == 0 and res.out.startswith("git worker, version ")
