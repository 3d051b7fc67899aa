"""`git nerve hooks install|uninstall|status`: where the hooks go, and never losing a user's hook."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from fixtures.repos.build import git
from fixtures.repos.hooks import (
    LOGGING_HOOK,
    commit,
    git_run,
    heartbeats,
    hooks_dir,
    messages,
    working_worker,
    write_hook,
)
from git_nerve.hooks import install as hooks
from git_nerve.paths import discover

HOOKS = hooks.HOOKS


def test_install_keeps_an_existing_hook_which_still_runs_first_with_its_output_and_exit_status(repo, gn):
    work = repo.work
    hdir = hooks_dir(work)
    before = write_hook(hdir, "post-commit", LOGGING_HOOK).read_bytes()

    res = gn("hooks install", work)

    assert res.code == 0, res
    assert "post-commit.nerve-chained" in res.out
    assert (hdir / "post-commit.nerve-chained").read_bytes() == before
    assert all(hooks.is_ours(hdir / name) for name in HOOKS)
    proc = commit(work, "a.txt", "a\n", "add a")
    assert "user hook post-commit ran" in proc.stderr  # git shows hook output on stderr
    assert (work / ".git" / "user-hook.log").read_text().count("args:") == 1
    # the chained hook's exit status is the hook's exit status
    ran = git_run(work, "hook", "run", "post-commit")
    assert ran.returncode == 3, ran
    assert "user hook post-commit ran" in ran.stdout + ran.stderr


def test_reinstall_changes_nothing(repo, gn):
    work = repo.work
    hdir = hooks_dir(work)
    write_hook(hdir, "post-commit", LOGGING_HOOK)
    assert gn("hooks install", work).code == 0
    listing = {p.name: p.read_bytes() for p in hdir.iterdir()}

    res = gn("hooks install --json", work)

    assert res.code == 0, res
    data = json.loads(res.out)
    assert [h["action"] for h in data["hooks"]] == ["unchanged"] * len(HOOKS)
    assert data["hooks"][0]["chained"] == "post-commit.nerve-chained"
    assert {p.name: p.read_bytes() for p in hdir.iterdir()} == listing


def test_uninstall_puts_kept_hooks_back_byte_for_byte_with_their_mode(repo, gn, tmp_path):
    work = repo.work
    hdir = hooks_dir(work)
    odd = b"#!/bin/sh\r\necho 'windows line ends, no final newline'\r\nexit 0"
    write_hook(hdir, "post-commit", odd, mode=0o700)
    write_hook(hdir, "post-rewrite", "#!/bin/sh\necho never run: not executable\n", mode=0o644)
    target = write_hook(tmp_path, "shared-pre-push", "#!/bin/sh\nexit 0\n")
    (hdir / "pre-push").symlink_to(target)
    before = {name: os.lstat(hdir / name) for name in ("post-commit", "post-rewrite", "pre-push")}

    assert gn("hooks install", work).code == 0
    res = gn("hooks uninstall", work)

    assert res.code == 0, res
    assert (hdir / "post-commit").read_bytes() == odd
    assert (hdir / "post-rewrite").read_bytes() == b"#!/bin/sh\necho never run: not executable\n"
    assert os.readlink(hdir / "pre-push") == str(target)
    assert not (hdir / "post-merge").exists()
    for name in before:
        after = os.lstat(hdir / name)
        assert (after.st_mode, after.st_ino, after.st_size) == (before[name].st_mode, before[name].st_ino, before[name].st_size)
    assert not list(hdir.glob("*.nerve-chained"))


def test_uninstall_without_kept_hooks_removes_only_ours(repo, gn):
    work = repo.work
    hdir = hooks_dir(work)
    other = write_hook(hdir, "commit-msg", "#!/bin/sh\nexit 0\n")
    assert gn("hooks install", work).code == 0

    res = gn("hooks uninstall --json", work)

    assert [h["action"] for h in json.loads(res.out)["hooks"]] == ["removed"] * len(HOOKS)
    assert sorted(p.name for p in hdir.iterdir()) == ["commit-msg"]
    assert other.read_text() == "#!/bin/sh\nexit 0\n"


def test_relative_core_hooks_path_is_resolved_like_git_from_each_worktree(repo, gn):
    work = repo.work
    git(work, "config", "core.hooksPath", ".githooks")
    write_hook(work / ".githooks", "post-commit", LOGGING_HOOK)

    res = gn("hooks install", work / "src")  # from a subdirectory

    assert res.code == 0, res
    assert "core.hooksPath is relative" in res.err
    assert hooks.is_ours(work / ".githooks" / "post-commit")
    assert (work / ".githooks" / "post-commit.nerve-chained").read_text() == LOGGING_HOOK
    assert not (work / ".git" / "hooks" / "post-commit").exists()
    proc = commit(work, "a.txt", "a\n", "add a")
    assert "user hook post-commit ran" in proc.stderr

    # a worker's worktree resolves .githooks inside itself: its hooks live in its git dir instead
    wt = working_worker(work)
    assert gn("hooks install", wt).code == 0
    assert not (wt / ".githooks").exists()
    assert hooks.is_ours(Path(git(wt, "rev-parse", "--absolute-git-dir")) / "nerve" / "hooks" / "post-commit")
    commit(wt, "w.txt", "w\n", "worker commit")
    assert git(wt, "status", "--porcelain", "--ignored") == ""
    assert [m.payload["subject"] for m in messages(work, "t1", "commit")] == ["worker commit"]


def test_install_from_a_linked_worktree_uses_the_shared_hooks_dir(repo, gn, tmp_path):
    work = repo.work
    linked = tmp_path / "linked"
    git(work, "worktree", "add", "-q", "-b", "side", str(linked))

    res = gn("hooks install", linked)

    assert res.code == 0, res
    common_hooks = work / ".git" / "hooks"
    assert all(hooks.is_ours(common_hooks / name) for name in HOOKS)
    assert not (work / ".git" / "worktrees" / "linked" / "hooks").exists()
    status = json.loads(gn("hooks status --json", work).out)
    assert status["installed"] is True
    assert Path(status["hooks_dir"]) == common_hooks


def test_status_and_installed(repo, gn):
    work = repo.work
    paths = discover(work)
    write_hook(hooks_dir(work), "pre-push", "#!/bin/sh\nexit 0\n")
    assert hooks.installed(paths) is False
    res = gn("hooks status", work)
    assert res.code == 0
    assert "pre-push      another tool's hook" in res.out
    assert "post-commit   not installed" in res.out

    hooks.install(paths)

    assert hooks.installed(paths) is True
    assert "pre-push      installed; runs pre-push.nerve-chained first" in gn("hooks status", work).out
    hooks.uninstall(paths)
    assert hooks.installed(paths) is False


def test_a_hook_written_over_ours_while_one_is_kept_is_chained_too_and_uninstall_puts_the_newest_back(repo, gn):
    work = repo.work
    hdir = hooks_dir(work)
    write_hook(hdir, "post-commit", LOGGING_HOOK)
    assert gn("hooks install", work).code == 0
    newer = write_hook(hdir, "post-commit", "#!/bin/sh\necho another tool >&2\n").read_bytes()
    assert "post-commit   another tool's hook" in gn("hooks status", work).out

    res = gn("hooks install", work)

    assert res.code == 0, res
    assert hooks.is_ours(hdir / "post-commit")
    assert (hdir / "post-commit.nerve-chained").read_text() == LOGGING_HOOK
    assert (hdir / "post-commit.nerve-chained-2").read_bytes() == newer
    ran = git_run(work, "hook", "run", "post-commit")
    assert "user hook post-commit ran" in ran.stdout + ran.stderr and "another tool" in ran.stderr
    assert ran.returncode == 3

    assert gn("hooks uninstall", work).code == 0
    assert (hdir / "post-commit").read_bytes() == newer
    assert (hdir / "post-commit.nerve-chained").read_text() == LOGGING_HOOK  # kept, named in the output


def test_a_kept_hook_that_runs_the_hook_again_does_not_loop(repo, gn):
    work = repo.work
    reentrant = """#!/bin/sh
calls="$(git rev-parse --absolute-git-dir)/calls"
echo x >> "$calls"
[ "$(wc -l < "$calls")" -gt 5 ] && exit 9   # stop a runaway chain if the guard fails
exec "$(git rev-parse --git-path hooks)/post-commit" "$@"
"""
    write_hook(hooks_dir(work), "post-commit", reentrant)
    assert gn("hooks install", work).code == 0

    commit(work, "a.txt", "a\n", "add a", timeout=30)

    assert (work / ".git" / "calls").read_text() == "x\n"


def test_a_hook_whose_interpreter_is_gone_says_what_to_do_and_falls_back_to_git_nerve(repo, tmp_path):
    work = repo.work
    wt = working_worker(work)  # installs the hooks
    origin = tmp_path / "origin.git"
    git(work, "init", "-q", "--bare", str(origin))
    git(work, "remote", "add", "backup", str(origin))
    hdir = hooks_dir(work)
    (hdir / "pre-push").write_bytes(hooks.render(str(tmp_path / "gone" / "python"), tmp_path / "gone", hook="pre-push"))
    assert [h.state for h in hooks.status(discover(work)).hooks if h.name == "pre-push"] == ["broken"]
    no_nerve = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not os.path.exists(os.path.join(p, "git-nerve")))
    commit(wt, "a.txt", "a\n", "first")

    lost = git_run(wt, "push", "-q", "backup", "HEAD:refs/heads/one", env={**os.environ, "PATH": no_nerve})
    lines = [ln for ln in lost.stderr.splitlines() if "git-nerve" in ln]
    assert len(lines) == 1 and "cannot find git-nerve" in lines[0] and "git nerve hooks install" in lines[0], lost.stderr
    assert heartbeats(work, "t1", "pre-push") == 0

    assert git_run(wt, "push", "-q", "backup", "HEAD:refs/heads/two").returncode == 0  # `git nerve hook-run`
    assert heartbeats(work, "t1", "pre-push") == 1


def test_hook_runner_entry_points(repo, sh):
    usage = sh(["python", "-m", "git_nerve.hooks.run"], repo.work)
    assert usage.code == 2 and "usage:" in usage.err
    unknown = sh(["git", "nerve", "hook-run", "commit-msg"], repo.work)
    assert unknown.code == 0 and "no hook named 'commit-msg'" in unknown.err
    outside = subprocess.run(["git", "nerve", "hook-run", "post-commit"], cwd=repo.work, capture_output=True, text=True, check=False)
    assert (outside.returncode, outside.stderr) == (0, "")


def test_a_kept_hook_in_another_language_runs_directly(repo, gn):
    work = repo.work
    write_hook(hooks_dir(work), "post-commit", "#!/usr/bin/env python3\nimport sys\nprint('python hook', sys.argv[1:])\nsys.exit(5)\n")
    assert gn("hooks install", work).code == 0

    ran = git_run(work, "hook", "run", "post-commit")

    assert ran.returncode == 5
    assert "python hook []" in ran.stdout + ran.stderr


def test_spawn_installs_the_hooks_in_the_new_worktree_under_a_relative_hooks_path(repo, gw):
    work = repo.work
    git(work, "config", "core.hooksPath", ".githooks")
    assert gw("spawn t1", work).code == 0
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    assert hooks.is_ours(work / ".githooks" / "post-commit")
    assert not (wt / ".githooks").exists()  # nothing of ours in the worker's work tree
    assert gw("start", wt).code == 0
    commit(wt, "w.txt", "w\n", "worker commit")
    assert git(wt, "status", "--porcelain", "--ignored") == ""
    assert [m.payload["subject"] for m in messages(work, "t1", "commit")] == ["worker commit"]
