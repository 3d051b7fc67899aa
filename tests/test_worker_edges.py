"""Lifecycle edge cases on real repositories: each works, or is refused up front with one line and its exit code.

Submodules in a worker's worktree, `git worktree move`, SHA-256 repositories,
a clone without refs/remotes/origin/HEAD, and pushes to a remote other than
the one git-nerve merges into. Every command stays idempotent and no cleanup
deletes a branch some worktree has checked out.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fixtures.repos import build
from fixtures.repos import worker as wfx
from fixtures.repos.build import commit_file, git
from fixtures.repos.hooks import git_run


def one_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("repaired:")]
    assert len(lines) == 1, err
    return lines[0]


def with_submodule(remote_repo, tmp_path) -> Path:
    """`lib` (its own origin) as a submodule of the project, pushed."""
    return build.with_submodule(remote_repo, tmp_path)


def init_submodule(wt: Path) -> None:
    git(wt, "submodule", "update", "--init", "-q")
    assert (wt / "lib" / "lib.txt").is_file()


def test_a_worktree_with_a_submodule_merges_and_cancels_with_cleanup(remote_repo, tmp_path, gw):
    with_submodule(remote_repo, tmp_path)
    work, origin = remote_repo.work, remote_repo.origin
    wt = wfx.spawn(work, "t1")
    init_submodule(wt)
    wfx.drive(work, "t1", "APPROVED")  # adopts the worktree: a commit, done, approve

    res = gw("merge t1", work)

    assert res.code == 0, res
    assert wfx.state(work, "t1") == "COMPLETED" and not wt.exists()
    assert git(origin, "rev-parse", "main") == git(work, "rev-parse", "main")
    assert gw("merge t1", work).code == 0  # the rerun: nothing left to do

    wt2 = wfx.drive(work, "t2", "WORKING")
    init_submodule(wt2)
    commit_file(wt2 / "lib", "local.txt", "only here\n", "a submodule commit on no remote")
    git(wt2, "commit", "-q", "-am", "bump lib")
    res = gw("cancel t2 --cleanup", work)

    assert res.code == 4, res
    assert "submodules with unsaved work (lib (commits on no remote))" in one_line(res.err)
    assert wfx.state(work, "t2") == "WORKING" and wt2.is_dir()  # refused up front: nothing changed

    git(wt2, "reset", "-q", "--hard", "HEAD~1")
    git(wt2, "submodule", "update", "-q")
    res = gw("cancel t2 --cleanup", work)

    assert res.code == 0, res
    assert wfx.state(work, "t2") == "FAILED" and not wt2.exists()
    assert "refs/heads/feat/t2" not in wfx.branches(work)
    assert gw("cancel t2 --cleanup", work).code == 0


def test_a_moved_worktree_is_found_by_done_merge_and_cancel(remote_repo, gw):
    work = remote_repo.work
    wt = wfx.drive(work, "t1", "WORKING")
    commit_file(wt, "a.txt", "a\n", "work")
    moved = work.parent / "elsewhere" / "t1"
    moved.parent.mkdir()
    git(work, "worktree", "move", str(wt), str(moved))

    res = gw("done", moved)

    assert res.code == 0, res
    assert f"the worktree of t1 was moved to {moved}" in res.err
    assert wfx.row(work, "t1").worktree == str(moved)
    assert json.loads((Path(git(moved, "rev-parse", "--absolute-git-dir")) / "nerve" / ".worker-ctx.json")
                      .read_text())["worktree"] == str(moved)
    assert gw("approve t1", work).code == 0
    res = gw("merge t1", work)
    assert res.code == 0, res
    assert wfx.state(work, "t1") == "COMPLETED"
    # moved out of the worktree root, it is no longer provably git-nerve's to delete: kept, and said how to remove it
    assert moved.is_dir() and f"git worktree remove {moved}" in res.err, res
    assert "refs/nerve/archive/t1" in res.err

    # cancel --cleanup of a moved worktree likewise: archived, kept where it is now, its branch (checked out there) too
    wt2 = wfx.drive(work, "t2", "WORKING")
    commit_file(wt2, "b.txt", "b\n", "work 2")
    tip = git(wt2, "rev-parse", "HEAD")
    moved2 = work.parent / "elsewhere" / "t2"
    git(work, "worktree", "move", str(wt2), str(moved2))
    res = gw("cancel t2 --cleanup", work)
    assert res.code == 0, res
    assert moved2.is_dir() and f"git worktree remove {moved2}" in res.err, res
    assert "refs/heads/feat/t2" in wfx.branches(work) and "feat/t2 was not deleted" in res.err
    git(work, "merge-base", "--is-ancestor", tip, "refs/nerve/archive/t2")  # raises unless archived


def test_cancel_cleanup_never_deletes_a_branch_checked_out_somewhere(repo, gw):
    work = repo.work
    wt = wfx.drive(work, "t1", "WORKING")
    git(work, "worktree", "remove", "--force", str(wt))
    git(work, "checkout", "-q", "feat/t1")  # the user took the branch into the main checkout

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert "feat/t1 was not deleted: it is checked out at" in res.err
    assert git(work, "symbolic-ref", "HEAD") == "refs/heads/feat/t1" and "refs/heads/feat/t1" in wfx.branches(work)
    assert wfx.state(work, "t1") == "FAILED"
    assert gw("cancel t1 --cleanup", work).code == 0


def test_a_sha256_repository_is_refused_up_front_by_init_and_spawn(tmp_path, gn, gw):
    work = tmp_path / "s256"
    git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(work))
    commit_file(work, "a.txt", "a\n", "first")

    res = gn("init", work)

    assert res.code == 2, res
    assert "uses sha256 object names, which git-nerve does not support yet" in one_line(res.err)
    assert not (work / ".git" / "nerve" / "bus.db").exists()
    res = gw("spawn t1 --no-fetch", work)
    assert res.code == 2, res
    assert "sha256" in one_line(res.err)
    assert wfx.branches(work) == {"refs/heads/main"} and len(git(work, "worktree", "list").splitlines()) == 1


def test_init_asks_the_remote_for_its_default_branch_when_origin_head_is_missing(remote_repo, gn):
    work = remote_repo.work
    git(work, "remote", "set-head", "origin", "--delete")
    git(work, "checkout", "-q", "-b", "feature")

    res = gn("init --json", work)

    assert res.code == 0, res
    assert json.loads(res.out)["integration"] == "main"
    assert git(work, "config", "nerve.integration") == "main"


def test_init_says_which_branch_it_pinned_when_the_remote_cannot_be_asked(remote_repo, gn):
    work = remote_repo.work
    git(work, "remote", "set-head", "origin", "--delete")
    git(work, "remote", "set-url", "origin", str(work.parent / "gone.git"))
    git(work, "checkout", "-q", "-b", "feature")

    res = gn("init", work)

    assert res.code == 0, res
    assert "could not ask origin for its default branch" in res.err and "'feature'" in res.err
    assert git(work, "config", "nerve.integration") == "feature"


def test_pushing_the_integration_branch_to_a_backup_mirror_is_not_refused(remote_repo, gn, tmp_path):
    work = remote_repo.work
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "init", "-q", "--bare", str(mirror))
    git(work, "remote", "add", "backup", str(mirror))
    assert gn("init", work).code == 0
    wt = wfx.drive(work, "t1", "WORKING")
    commit_file(wt, "a.txt", "a\n", "work")

    to_origin = git_run(wt, "push", "origin", "HEAD:refs/heads/main")
    to_mirror = git_run(wt, "push", "backup", "HEAD:refs/heads/main")
    to_mirror_url = git_run(wt, "push", str(mirror), "HEAD:refs/heads/main")

    assert to_origin.returncode != 0 and "updates main, the integration branch" in to_origin.stderr
    assert to_mirror.returncode == 0, to_mirror.stderr
    assert to_mirror_url.returncode == 0, to_mirror_url.stderr
    assert git(mirror, "rev-parse", "main") == git(wt, "rev-parse", "HEAD")
    assert subprocess.run(["git", "rev-parse", "main"], cwd=remote_repo.origin, capture_output=True,
                          text=True).stdout.strip() != git(wt, "rev-parse", "HEAD")
