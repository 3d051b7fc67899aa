"""paths.find_by_files: the repository found by reading .git files (heartbeat's path, no git started) agrees with
git's own answer (paths.discover) wherever it answers, and leaves every unusual case to git (None)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fixtures.repos import build
from fixtures.repos import worker as wk
from git_nerve.paths import discover, find_by_files

BIN = Path(sys.executable).parent


def same(a, b) -> bool:
    return all(os.path.samefile(x, y) for x, y in zip(a, b)) and (a.toplevel is None) == (b.toplevel is None)


def test_it_agrees_with_git_in_a_checkout_a_linked_worktree_their_subdirectories_and_a_submodule(remote_repo, tmp_path):
    repo = remote_repo
    wt = wk.spawn(repo.work, "t1")
    build.with_submodule(repo, tmp_path)
    (wt / "deep" / "er").mkdir(parents=True)
    (repo.work / "deep").mkdir()
    for where in (repo.work, repo.work / "deep", wt, wt / "deep" / "er", repo.work / "lib"):
        found = find_by_files(where)
        assert found is not None and same(found, discover(where)), where


def test_unusual_places_are_left_to_git(repo, tmp_path, monkeypatch):
    assert find_by_files(repo.work / ".git") is None  # inside the git dir: no work tree
    assert find_by_files(repo.work / ".git" / "refs") is None
    (tmp_path / "elsewhere").mkdir()
    assert find_by_files(tmp_path / "elsewhere") is None  # no repository (the temporary directory has no .git above)
    monkeypatch.setenv("GIT_DIR", str(repo.work / ".git"))
    assert find_by_files(repo.work) is None  # git's location variables: git decides
    monkeypatch.delenv("GIT_DIR")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / ".git").write_text("not a gitdir line\n")
    assert find_by_files(tmp_path / "odd") is None


def test_heartbeat_in_a_worktree_starts_no_git(repo, tmp_path):
    wt = wk.spawn(repo.work, "t1")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\necho 'git must not run' >&2\nexit 97\n")
    (fake / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    res = subprocess.run([str(BIN / "git-worker"), "heartbeat", "--status", "probe"], cwd=wt, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.startswith("heartbeat: t1 at "), res
    assert wk.row(repo.work, "t1").heartbeat_status == "probe"
