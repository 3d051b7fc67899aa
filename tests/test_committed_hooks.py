"""Committed files are the team's (issue 35, point 7): git-nerve never writes into a hooks directory git tracks.

A team commits `.githooks/` and points core.hooksPath at it: `git nerve init` refuses with one line naming the
setting and the way forward, writes nothing, and `git status` stays clean; once the team's hooks chain git-nerve
with the documented line, init, spawn, done and merge leave the main checkout's `git status` clean and the
worker's commits are recorded."""

from __future__ import annotations

from pathlib import Path

from fixtures.repos import worker as wk
from fixtures.repos.build import git
from fixtures.repos.hooks import commit, messages, write_hook
from git_nerve.hooks.where import CHAIN_LINE
from git_nerve.hooks.shim import HOOKS

TEAM_HOOK = "#!/bin/sh\n# the team's own pre-commit\nexit 0\n"


def _commit_team_hooks(work: Path, hooks: dict[str, str]) -> None:
    for name, text in hooks.items():
        write_hook(work / ".githooks", name, text)
    git(work, "add", ".githooks")
    git(work, "commit", "-q", "-m", "team hooks")
    git(work, "config", "core.hooksPath", ".githooks")


def test_init_refuses_a_committed_hooks_dir_and_writes_nothing(repo, sh):
    work = repo.work
    _commit_team_hooks(work, {"pre-commit": TEAM_HOOK})
    before = sorted(p.name for p in (work / ".githooks").iterdir())

    res = sh(["git", "nerve", "init"], work / "src")  # from a subdirectory

    assert res.code == 2, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res
    assert "core.hooksPath=.githooks" in lines[0] and "git tracks .githooks/pre-commit" in lines[0], res
    assert 'git nerve hook-run <hook> "$@"' in lines[0] and "git config --local core.hooksPath" in lines[0], res
    assert (work / ".githooks" / "pre-commit").read_text() == TEAM_HOOK
    assert sorted(p.name for p in (work / ".githooks").iterdir()) == before
    assert git(work, "status", "--porcelain", "--ignored", "--", ".githooks") == ""
    assert git(work, "status", "--porcelain") == ""
    assert not (work / ".git" / "nerve" / "bus.db").exists()  # nothing set up
    assert git(work, "config", "--get-all", "nerve.integration", check=False) == ""

    res = sh(["git", "nerve", "hooks", "install"], work)
    assert res.code == 2 and "git tracks .githooks/pre-commit" in res.err, res
    assert (work / ".githooks" / "pre-commit").read_text() == TEAM_HOOK
    assert git(work, "status", "--porcelain") == ""

    # spawn says so in a warning and writes nothing there either (its worktree's hooks live in its git dir)
    res = sh(["git", "worker", "spawn", "t1", "--no-fetch"], work)
    assert res.code == 0 and "git tracks .githooks/pre-commit" in res.err, res
    assert sorted(p.name for p in (work / ".githooks").iterdir()) == before
    assert (work / ".githooks" / "pre-commit").read_text() == TEAM_HOOK
    assert git(work, "status", "--porcelain") == ""
    assert git(wk.worktree(work, "t1"), "status", "--porcelain") == ""


def test_team_hooks_that_chain_git_nerve_keep_status_clean_through_init_spawn_done_merge(repo, gw, sh):
    work = repo.work
    chained = {name: f"#!/bin/sh\n# team {name}\n{CHAIN_LINE.format(hook=name)}\n" for name in HOOKS}
    _commit_team_hooks(work, chained)

    res = sh(["git", "nerve", "init"], work)
    assert res.code == 0, res
    assert git(work, "status", "--porcelain") == "?? nerve.toml"  # the one file init writes, for the team to commit
    git(work, "add", "nerve.toml")
    git(work, "commit", "-q", "-m", "nerve.toml")
    status = sh(["git", "nerve", "hooks", "status", "--json"], work)
    assert status.code == 0 and '"installed": true' in status.out, status

    assert gw("spawn t1", work).code == 0  # installs the worker's hooks in its git dir, forwarding to .githooks
    wt = wk.worktree(work, "t1")
    assert gw("start", wt).code == 0
    assert git(work, "status", "--porcelain") == ""
    commit(wt, "w.txt", "w\n", "worker commit")
    assert git(wt, "status", "--porcelain") == ""
    assert [m.payload["subject"] for m in messages(work, "t1", "commit")] == ["worker commit"]  # recorded once
    assert gw("done", wt).code == 0
    assert gw("approve t1", work).code == 0
    res = gw("merge t1", work)
    assert res.code == 0, res
    assert git(work, "status", "--porcelain") == ""
    for name, text in chained.items():
        assert (work / ".githooks" / name).read_text() == text
