"""The traps of daily use (issue 22): each gets the behaviour a careful user expects, on real repositories."""

from __future__ import annotations

from pathlib import Path

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk


# -- a relative origin URL --------------------------------------------------------------


def _relative_origin(tmp_path: Path) -> build.Repos:
    repos = build.simple(tmp_path)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(repos.work, "remote", "add", "origin", "../origin.git")
    git(repos.work, "push", "-q", "-u", "origin", "main")
    git(repos.work, "remote", "set-head", "origin", "main")
    return build.Repos(work=repos.work, origin=origin)


def test_relative_origin_url_works_from_worktrees_without_touching_config(tmp_path, gw, gn):
    repos = _relative_origin(tmp_path)
    work = repos.work
    config_before = git(work, "config", "--list", "--local")

    init = gn("init", work)
    assert init.code == 0, init
    assert "'../origin.git' is relative" in init.err and f"git remote set-url origin {repos.origin}" in init.err

    spawned = gw("spawn t1", work)
    assert spawned.code == 0, spawned
    assert spawned.err.count("is relative") == 1  # one line
    wt = wk.worktree(work, "t1")
    assert wt.parent.parent != work  # the worktree lives elsewhere: ../origin.git means nothing there

    assert gw("start", wt).code == 0
    build.commit_file(wt, "t1.txt", "t1\n", "t1: add t1.txt")
    tip = git(wt, "rev-parse", "HEAD")
    done = gw("done", wt)
    assert done.code == 0, done
    assert "Pushed" in done.out
    assert git(repos.origin, "rev-parse", "refs/heads/feat/t1") == tip
    assert git(work, "rev-parse", "refs/remotes/origin/feat/t1") == tip  # the remote-tracking ref is kept

    assert gw("approve t1", work).code == 0
    merged = gw("merge t1", wt)  # from inside the task's worktree: fetch and push find the remote too
    assert merged.code == 0, merged
    assert git(repos.origin, "merge-base", "--is-ancestor", tip, "main", check=False) == ""
    assert wk.state(work, "t1") == "COMPLETED"

    # the user's configuration is not rewritten: the URL stays relative, no url.*.insteadOf was added
    assert git(work, "config", "remote.origin.url") == "../origin.git"
    added = set(git(work, "config", "--list", "--local").splitlines()) - set(config_before.splitlines())
    assert not [line for line in added if line.startswith(("url.", "remote."))], added
