"""`cancel`, `cancel --cleanup`, `retry`, and the archive that keeps unmerged work."""

from __future__ import annotations

import json

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)

ARCHIVE = "refs/nerve/archive/t1"


def test_cancel_keeps_worktree_and_branch(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    res = gw("cancel t1 --reason 'scope changed'", repo.work)
    assert res.code == 0 and "WORKING -> FAILED" in res.out, res
    assert wt.is_dir() and "refs/heads/feat/t1" in wk.branches(repo.work)
    assert git(repo.work, "for-each-ref", "refs/nerve") == ""


def test_cancel_cleanup_archives_then_removes_worktree_and_branch(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "IN_REVIEW")
    tip = git(work, "rev-parse", "feat/t1")
    res = gw("cancel t1 --cleanup --json", work)
    assert res.code == 0, res
    out = json.loads(res.out)
    assert out["state"] == "FAILED" and out["archive_ref"] == ARCHIVE
    assert out["worktree_removed"] is True and out["branch_deleted"] is True
    assert not wt.exists() and "refs/heads/feat/t1" not in wk.branches(work)
    assert git(work, "rev-parse", ARCHIVE) == tip
    assert len(wk.worktree_paths(work)) == 1
    assert "cleanup" in wk.kinds(work, "t1")
    # twice: still fine, the archive untouched
    again = gw("cancel t1 --cleanup", work)
    assert again.code == 0 and "already FAILED" in again.out, again
    assert git(work, "rev-parse", ARCHIVE) == tip


def test_cancel_cleanup_text_output_names_the_archive(repo, gw):
    wk.drive(repo.work, "t1", "WORKING")
    res = gw("cancel t1 --cleanup", repo.work)
    assert res.code == 0
    assert "Archived tip: refs/nerve/archive/t1" in res.out and "Worktree removed" in res.out


def test_cancel_cleanup_refuses_uncommitted_work_without_force(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    build.commit_file(wt, "t1.txt", "work of t1\n")
    build.write(wt, "README.md", "modified\n")
    build.write(wt, "new/untracked.txt", "untracked\n")
    res = gw("cancel t1 --cleanup", work)
    assert res.code == 4 and "uncommitted changes" in res.err and "--force" in res.err, res
    assert wt.is_dir() and (wt / "new" / "untracked.txt").is_file()
    assert "refs/heads/feat/t1" in wk.branches(work)
    assert wk.state(work, "t1") == "WORKING"  # refused before anything changed
    assert git(work, "for-each-ref", "refs/nerve") == ""

    tip = git(work, "rev-parse", "feat/t1")
    res = gw("cancel t1 --cleanup --force", work)
    assert res.code == 0, res
    assert not wt.exists() and wk.state(work, "t1") == "FAILED"
    assert git(work, "log", "-1", "--format=%P", ARCHIVE) == tip
    assert git(work, "show", f"{ARCHIVE}:README.md") == "modified"
    assert git(work, "show", f"{ARCHIVE}:new/untracked.txt") == "untracked"
    assert git(work, "show", f"{ARCHIVE}:t1.txt") == "work of t1"


def test_cancel_cleanup_of_a_stopped_rebase_keeps_every_commit(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "CONFLICTED", greeting="hi")
    build.commit_file(work, "unrelated.txt", "u\n")  # (main moves on; irrelevant)
    tip = git(work, "rev-parse", "feat/t1")
    res = gw("cancel t1 --cleanup", work)
    assert res.code == 4 and "in progress" in res.err, res
    assert wk.state(work, "t1") == "CONFLICTED" and wk.rebase_in_progress(wt)

    res = gw("cancel t1 --cleanup --force", work)
    assert res.code == 0, res
    assert not wt.exists() and "refs/heads/feat/t1" not in wk.branches(work)
    # the branch's own commits stay reachable from the archive, not just the rebase's detached HEAD
    assert tip in git(work, "rev-list", ARCHIVE).split()
    assert "<<<<<<<" in git(work, "show", f"{ARCHIVE}:{wk.APP}")  # and the half-resolved files
    # retry brings the branch back at its own tip
    assert gw("retry t1", work).code == 0
    assert git(work, "rev-parse", "feat/t1") == tip


def test_cancel_cleanup_with_a_remote_deletes_the_pushed_branch(remote_repo, gw):
    work = remote_repo.work
    wk.drive(work, "t1", "IN_REVIEW")
    tip = git(remote_repo.origin, "rev-parse", "refs/heads/feat/t1")
    assert gw("cancel t1 --cleanup", work).code == 0
    assert git(remote_repo.origin, "for-each-ref", "refs/heads/feat") == ""
    assert git(work, "for-each-ref", "refs/remotes/origin/feat") == ""
    assert git(work, "rev-parse", ARCHIVE) == tip


def test_cancel_of_a_completed_task_is_refused(repo, gw):
    wk.drive(repo.work, "t1", "COMPLETED")
    res = gw("cancel t1 --cleanup", repo.work)
    assert res.code == 3 and "it is COMPLETED" in res.err


def test_retry_keeps_the_existing_worktree(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    build.write(wt, "wip.txt", "in progress\n")
    assert gw("cancel t1", repo.work).code == 0
    res = gw("retry t1", repo.work)
    assert res.code == 0 and "FAILED -> ASSIGNED" in res.out and str(wt) in res.out, res
    assert (wt / "wip.txt").read_text() == "in progress\n"
    assert wk.row(repo.work, "t1").last_heartbeat is None
    assert gw("start", wt).code == 0


def test_retry_after_cleanup_recreates_the_worktree_from_the_archive(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    tip = build.commit_file(wt, "progress.txt", "half done\n")
    assert gw("cancel t1 --cleanup", work).code == 0
    assert not wt.exists()
    res = gw("retry t1", work)
    assert res.code == 0, res
    assert wk.state(work, "t1") == "ASSIGNED"
    assert git(wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"
    assert git(work, "rev-parse", "feat/t1") == tip
    assert (wt / "progress.txt").read_text() == "half done\n"
    # and the task can be finished normally
    assert gw("start", wt).code == 0 and gw("done", wt).code == 0
    assert gw("approve t1", work).code == 0 and gw("merge t1", work).code == 0
    assert git(work, "show", "main:progress.txt") == "half done"


def test_retry_after_a_forced_cleanup_restores_the_committed_tip(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    tip = git(work, "rev-parse", "feat/t1")
    build.write(wt, "scratch.txt", "uncommitted\n")
    assert gw("cancel t1 --cleanup --force", work).code == 0
    snapshot = git(work, "rev-parse", ARCHIVE)
    assert gw("retry t1", work).code == 0
    assert git(work, "rev-parse", "feat/t1") == tip  # the branch is the commits, not the snapshot
    assert not (wt / "scratch.txt").exists()
    assert git(work, "rev-parse", ARCHIVE) == snapshot  # the uncommitted work is still kept


def test_retry_twice_is_a_no_op(repo, gw):
    wk.drive(repo.work, "t1", "FAILED")
    assert gw("retry t1", repo.work).code == 0
    res = gw("retry t1", repo.work)
    assert res.code == 0 and "already ASSIGNED" in res.out
    assert wk.kinds(repo.work, "t1").count("task_retry") == 1
