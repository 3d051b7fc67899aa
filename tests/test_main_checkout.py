"""One answer to "the main checkout of this common dir" (issue 42): `git_nerve.dotgit.main_checkout`, read from git's
own files, agrees with git: `git worktree list --porcelain`'s first entry on a normal clone and from a linked
worktree; where that entry is the git dir itself (a submodule, core.worktree, `--separate-git-dir`: git 2.39 here),
the work tree git works in there (`rev-parse --show-toplevel`). What the old five answers broke on a
`--separate-git-dir` repository is whole: the door keeps the main checkout, and nerve.toml's [shared] is read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixtures.repos import build
from fixtures.repos import worker as wfx
from git_nerve import dotgit, nerve_toml
from git_nerve.git import destroy, ownership
from git_nerve.paths import discover

SHARED = '[shared]\nbackend = "git"\n'


def _git_says(cwd: Path) -> Path:
    """The first entry of `git worktree list --porcelain`, as git names it."""
    first = build.git(cwd, "worktree", "list", "--porcelain").splitlines()[0]
    assert first.startswith("worktree ")
    return Path(first[len("worktree "):])


def _top(cwd: Path, *where: str) -> Path:
    """The work tree git works in from ``cwd`` (``where``: git's own options, --git-dir)."""
    return Path(build.git(cwd, *where, "rev-parse", "--show-toplevel"))


def _asked_from(where: Path) -> Path | None:
    """The main checkout as a command standing in ``where`` asks for it (its paths, as git discovers them)."""
    return discover(where).main_checkout


def _same(a: Path | None, b: Path) -> bool:
    return a is not None and os.path.realpath(a) == os.path.realpath(b)


def _separate(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A clone of an origin made with `--separate-git-dir`, its git dir one level deeper than its checkout
    (``store/gd``): (checkout, git dir, origin)."""
    seed = build.simple(tmp_path / "seed")
    origin = tmp_path / "origin.git"
    build.git(tmp_path, "clone", "-q", "--bare", str(seed.work), str(origin))
    (tmp_path / "store").mkdir()
    work, git_dir = tmp_path / "project", tmp_path / "store" / "gd"
    build.git(tmp_path, "clone", "-q", "--separate-git-dir", str(git_dir), str(origin), str(work))
    return work, git_dir, origin


def test_a_normal_clone_and_its_subdirectory(remote_repo):
    work = remote_repo.work
    assert dotgit.main_checkout(work / ".git") == work
    assert _same(_asked_from(work / "src"), _git_says(work))
    assert nerve_toml.home(work) == work


def test_a_linked_worktree_asked_from_inside_it(repo):
    linked = repo.work.parent / "linked"
    build.git(repo.work, "worktree", "add", "-q", str(linked))
    assert _same(_asked_from(linked), repo.work) and _same(_asked_from(linked / "src"), _git_says(linked))
    assert _same(nerve_toml.home(linked), repo.work)


def test_a_submodule_is_its_own_checkout(remote_repo, tmp_path):
    build.with_submodule(remote_repo, tmp_path)
    sub = remote_repo.work / "lib"
    common = Path(build.git(sub, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    assert common.parent.name == "modules", "git keeps the submodule's git dir inside the superproject's"
    assert _same(_git_says(sub), common), "git's list names the submodule's git dir: its work tree is the reference"
    assert _same(dotgit.main_checkout(common), sub) and _same(_asked_from(sub), _top(sub))
    assert _same(nerve_toml.home(sub), sub)


def test_core_worktree_names_the_checkout(tmp_path):
    work, git_dir = tmp_path / "elsewhere" / "checkout", tmp_path / "meta.git"
    work.mkdir(parents=True)
    build.git(tmp_path, "init", "-q", "-b", "main", "--bare", str(git_dir))
    build.git(git_dir, "config", "core.bare", "false")
    build.git(git_dir, "config", "core.worktree", "../elsewhere/checkout")
    assert _same(_top(tmp_path, f"--git-dir={git_dir}"), work)
    assert _same(dotgit.main_checkout(git_dir), work)


def test_a_bare_repository_has_none(remote_repo):
    assert dotgit.main_checkout(remote_repo.origin) is None


def test_a_separate_git_dir_names_its_checkout_where_git_names_the_git_dir(tmp_path):
    work, git_dir, _ = _separate(tmp_path)
    assert _same(_git_says(work), git_dir), "git's list names the git dir: the reason it is not asked"
    assert _same(dotgit.main_checkout(git_dir, work), work) and _same(_asked_from(work / "src"), _top(work / "src"))
    linked = tmp_path / "linked"
    build.git(work, "worktree", "add", "-q", str(linked))
    assert _asked_from(linked) is None, "nothing git keeps names the checkout from a linked worktree: not told"
    assert nerve_toml.home(linked) == linked and nerve_toml.home(work) == work


def test_the_door_keeps_the_main_checkout_of_a_separate_git_dir(tmp_path):
    """With the worktree root above the main checkout (nerve.worktreeDir) and a record naming it, only the door's
    "never the main checkout" stands between it and its removal: the old answer handed the door the git dir."""
    work, git_dir, _ = _separate(tmp_path)
    build.git(work, "config", "nerve.worktreeDir", str(tmp_path))
    wt1 = wfx.spawn(work, "t1")
    assert wt1.parent == tmp_path
    ownership.record(git_dir, "worktree", str(work), task="t1")  # a record the door must not take for proof
    with wfx.opened(work) as repo:
        from git_nerve.worker import lifecycle

        sc = lifecycle.door_scope(repo)
    for fn, args in ((destroy.remove_tree, (work, sc)), (destroy.remove_worktree, (wt1, work, sc))):
        with pytest.raises(destroy.Refused) as info:
            fn(*args, task="t1")
        assert "main checkout" in info.value.message and info.value.exit_code == 9, info.value.message
    assert (work / "src" / "app.py").is_file() and (work / ".git").is_file()
    assert build.git(work, "status", "--porcelain", "--untracked-files=no") == ""


@pytest.mark.parametrize("where", ["main", "linked"])
def test_shared_in_nerve_toml_is_read_on_a_separate_git_dir(tmp_path, gn, where):
    work, _, _ = _separate(tmp_path)
    build.commit_file(work, "nerve.toml", SHARED, "git-nerve config")
    cwd = work
    if where == "linked":  # its own copy (the main checkout cannot be told from there), as nerve_toml.locate reads
        cwd = tmp_path / "linked"
        build.git(work, "worktree", "add", "-q", str(cwd))
    res = gn("sync --json", cwd)
    assert res.code == 0, res
    report = json.loads(res.out)
    assert report["backend"] == "git" and report["remote"] == "origin", report


def test_a_relative_remote_url_is_resolved_against_the_separate_git_dirs_checkout(tmp_path, gn):
    work, _, origin = _separate(tmp_path)
    build.git(work, "remote", "set-url", "origin", "../origin.git")
    res = gn("init", work)
    assert res.code == 0, res
    assert f"git remote set-url origin {origin}" in res.err, res
