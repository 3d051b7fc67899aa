"""Copied secrets stay out of git (issue 28): in a task's worktree, the pre-commit hook refuses a commit that
adds a copied file or a line holding a value of a copied .env file, naming the file, never the value; and
the value is written nowhere by git-nerve (bus, logs, output)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import git, trusting
from fixtures.repos.build import commit_file, write
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)

SECRET = "s3cr3t-Value-9f8e7d"
OTHER = "another-long-value"


@pytest.fixture
def gw(gw, gn):
    """The settings here are the person's own: trusted before each spawn and retry."""
    return trusting(gw, gn)


def commit(wt: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "commit", "-q", *args], cwd=wt, capture_output=True, text=True)


def setup_task(work: Path, gw, *, setup: str = "") -> tuple[Path, str]:
    commit_file(work, ".gitignore", ".env\n.env.local\nkeys/\n", "ignore")
    write(work, ".env", f"# dev settings\nAPI_KEY={SECRET}\nexport DB_URL=\"{OTHER}\"\nSHORT=abc\n")
    write(work, "keys/dev.pem", "-----BEGIN KEY-----\n")
    write(work, ".worktreeinclude", ".env\nkeys/\n")
    if setup:
        commit_file(work, "nerve.toml", f"[worktree]\nsetup = {setup!r}\n", "setup")
    res = gw("spawn t1 --no-fetch --wait", work)
    assert res.code == 0, res
    return work.parent / f"{work.name}.worktrees" / "t1", res.out + res.err


def test_a_commit_adding_a_copied_file_is_refused(repo, gw):
    wt, _ = setup_task(repo.work, gw)
    git(wt, "add", "-f", ".env")
    res = commit(wt, "-m", "add env")
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and ".env" in lines[0] and "refused" in lines[0]
    assert SECRET not in res.stderr + res.stdout
    git(wt, "reset", "-q")
    git(wt, "add", "-f", "keys/dev.pem")
    assert commit(wt, "-m", "add key").returncode != 0


def test_a_line_holding_a_copied_value_is_refused_naming_the_file(repo, gw):
    wt, _ = setup_task(repo.work, gw)
    write(wt, "src/config.py", f"API_KEY = '{SECRET}'  # oops\n")
    git(wt, "add", "src/config.py")
    res = commit(wt, "-m", "config")
    assert res.returncode != 0
    line = res.stderr.strip()
    assert "\n" not in line and "src/config.py" in line and ".env" in line
    assert SECRET not in res.stderr + res.stdout
    write(wt, "src/config.py", f"url = os.environ.get('DB', \"{OTHER}\")\n")
    git(wt, "add", "src/config.py")
    assert commit(wt, "-m", "config").returncode != 0
    # an ordinary change goes through, and so do short values (< 8 characters)
    write(wt, "src/config.py", "SHORT = 'abc'\nAPI_KEY = os.environ['API_KEY']\n")
    git(wt, "add", "src/config.py")
    ok = commit(wt, "-m", "config from the environment")
    assert ok.returncode == 0, ok.stderr


def test_the_value_is_written_nowhere(repo, gw):
    work = repo.work
    wt, out = setup_task(work, gw, setup="sh -c 'echo setting up; cat .env'")
    assert SECRET not in out and OTHER not in out
    common = Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    nerve = common / "nerve"
    for path in nerve.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and OTHER.encode() not in data, path
    log = (nerve / "setup" / "t1.log").read_text()
    assert "setting up" in log and "API_KEY=[value from .env hidden by git-nerve]" in log  # the setup printed it
    for args in ("status --json", "show t1 --json", "show t1", "status"):
        res = gw(args, work)
        assert SECRET not in res.out + res.err and OTHER not in res.out + res.err
    write(wt, "leak.txt", f"{SECRET}\n")
    git(wt, "add", "leak.txt")
    res = commit(wt, "-m", "leak")
    assert res.returncode != 0 and SECRET not in res.stderr
    for path in nerve.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_worktrees_without_copies_start_no_check(repo, gw):
    work = repo.work
    assert gw("spawn t1 --no-fetch", work).code == 0
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    git_dir = Path(git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))
    assert not (git_dir / "nerve" / "copied-files").exists()
    write(wt, "a.txt", "plain\n")
    git(wt, "add", "a.txt")
    assert commit(wt, "-m", "a").returncode == 0
    # the main checkout is no task's worktree: nothing is refused there either
    write(work, "b.txt", "x\n")
    git(work, "add", "b.txt")
    assert commit(work, "-m", "b").returncode == 0


def test_commit_all_is_checked_too(repo, gw):
    work = repo.work
    wt, _ = setup_task(work, gw)
    write(wt, "README.md", f"token: {SECRET}\n")
    res = commit(wt, "-am", "readme")
    assert res.returncode != 0 and "README.md" in res.stderr and SECRET not in res.stderr
    assert git(wt, "log", "-1", "--format=%s") != "readme"


def test_a_pre_commit_hook_that_cannot_start_python_fails_open_in_one_line(repo, gw, tmp_path):
    from git_nerve.hooks import install as hooks

    wt, _ = setup_task(repo.work, gw)
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'Fatal Python error' >&2\nexit 1\n")
    broken.chmod(0o755)
    hdir = Path(git(repo.work, "rev-parse", "--path-format=absolute", "--git-path", "hooks"))
    (hdir / "pre-commit").write_bytes(hooks.render(str(broken), hooks.package_root(), "pre-commit"))
    write(wt, "a.txt", "plain\n")
    git(wt, "add", "a.txt")
    res = commit(wt, "-m", "a")
    assert res.returncode == 0
    assert res.stderr.splitlines()[-1] == "warning: git-nerve pre-commit: the hook failed (exit 1); the commit goes ahead"
