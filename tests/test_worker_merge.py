"""`git worker merge`: the --no-ff merge built without a checkout, --check, conflicts, the
integration checkout, the remote (push, sync, the race), and the cleanup afterwards."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.bus import messages
from git_nerve.git import remote as gitremote


def parents(work: Path, rev: str) -> list[str]:
    return git(work, "log", "-1", "--format=%P", rev).split()


def test_merge_makes_a_no_ff_merge_and_fast_forwards_the_clean_checkout(repo, gw):
    work = repo.work
    main_before = git(work, "rev-parse", "main")
    wt = wk.drive(work, "t1", "APPROVED")
    tip = git(work, "rev-parse", "feat/t1")
    res = gw("merge t1 --json", work)
    assert res.code == 0, res
    out = json.loads(res.out)
    merge = git(work, "rev-parse", "main")
    assert out["state"] == "COMPLETED" and out["merge_commit"] == merge and out["pushed"] is False
    assert parents(work, merge) == [main_before, tip]
    assert git(work, "log", "-1", "--format=%s", merge) == "Merge feat/t1 (t1)"
    # the checkout of main followed, and is clean
    assert (work / "t1.txt").read_text() == "work of t1\n"
    assert git(work, "status", "--porcelain") == ""
    # COMPLETED cleanup: worktree gone, tip archived, branch kept
    assert out["worktree_removed"] is True and not wt.exists()
    assert out["archive_ref"] == "refs/nerve/archive/t1"
    assert git(work, "rev-parse", "refs/nerve/archive/t1") == tip
    assert git(work, "rev-parse", "feat/t1") == tip
    assert len(wk.worktree_paths(work)) == 1


def test_merge_when_the_integration_branch_is_not_checked_out(repo, gw):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    git(work, "checkout", "-q", "--detach")
    before = git(work, "rev-parse", "HEAD")
    assert gw("merge t1", work).code == 0
    assert git(work, "rev-parse", "HEAD") == before  # the detached checkout did not move
    assert git(work, "show", "main:t1.txt") == "work of t1"


def test_dirty_integration_checkout_refuses_and_moves_nothing(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "APPROVED")
    main_before = git(work, "rev-parse", "main")
    build.write(work, "README.md", "local edit\n")
    res = gw("merge t1", work)
    assert res.code == 4, res
    assert f"main is checked out at {work} with uncommitted changes" in res.err
    assert git(work, "rev-parse", "main") == main_before
    assert (work / "README.md").read_text() == "local edit\n"
    assert wk.state(work, "t1") == "APPROVED" and wt.is_dir()
    git(work, "checkout", "--", "README.md")
    assert gw("merge t1", work).code == 0  # once clean, it goes through


def test_check_failing_moves_nothing(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "APPROVED")
    main_before = git(work, "rev-parse", "main")
    res = gw(["merge", "t1", "--check", "sh -c 'echo checking; ls t1.txt; exit 3'"], work)
    assert res.code == 7, res
    assert "failed with exit 3; nothing was merged" in res.err and "checking" in res.err
    assert git(work, "rev-parse", "main") == main_before
    assert wk.state(work, "t1") == "APPROVED" and wt.is_dir()
    assert len(wk.worktree_paths(work)) == 2  # the temporary worktree is gone
    assert not (work / "t1.txt").exists()
    res = gw(["merge", "t1", "--check", "no-such-command-xyz"], work)
    assert res.code == 7 and "command not found" in res.err
    assert git(work, "rev-parse", "main") == main_before


def test_check_passing_runs_on_the_merge_result(repo, gw):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    build.commit_file(work, "main-only.txt", "m\n")
    res = gw(["merge", "t1", "--check", "sh -c 'test -f t1.txt && test -f main-only.txt && test ! -e .git/nerve'"], work)
    assert res.code == 0, res
    assert wk.state(work, "t1") == "COMPLETED"
    assert len(wk.worktree_paths(work)) == 1


def test_check_with_unbalanced_quotes_is_a_usage_error(repo, gw):
    wk.drive(repo.work, "t1", "APPROVED")
    res = gw(["merge", "t1", "--check", "sh -c 'oops"], repo.work)
    assert res.code == 2 and wk.state(repo.work, "t1") == "APPROVED"


def test_merge_conflict_sends_the_task_back_to_working(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "APPROVED", greeting="hi there")
    main_tip = build.commit_file(work, wk.APP, wk.app_text("good day"), "main: greeting")
    res = gw("merge t1", work)
    assert res.code == 6, res
    assert "back to WORKING" in res.err and "Conflicting files: src/app.py" in res.err
    assert wk.state(work, "t1") == "WORKING"
    assert git(work, "rev-parse", "main") == main_tip
    assert git(work, "status", "--porcelain") == "" and wt.is_dir()
    with closing(sqlite3.connect(wk.bus_path(work))) as conn:
        conflict = messages.for_task(conn, "t1", kinds=("merge_conflict",))[-1].payload
    assert conflict["files"] == ["src/app.py"] and conflict["onto"] == main_tip
    # the agent's way back: done rebases (and stops on the conflict), then the usual flow
    assert gw("done", wt).code == 6 and wk.state(work, "t1") == "CONFLICTED"


def test_merge_refuses_a_dirty_worker_worktree_without_force(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "APPROVED")
    main_before = git(work, "rev-parse", "main")
    build.write(wt, "t1.txt", "changed after approval\n")
    build.write(wt, "notes/untracked.txt", "not committed\n")
    res = gw("merge t1", work)
    assert res.code == 4 and "uncommitted changes" in res.err and "--force" in res.err, res
    assert git(work, "rev-parse", "main") == main_before and wk.state(work, "t1") == "APPROVED"
    assert (wt / "notes" / "untracked.txt").is_file()

    tip = git(work, "rev-parse", "feat/t1")
    res = gw("merge t1 --force", work)
    assert res.code == 0, res
    assert "Archived tip: refs/nerve/archive/t1" in res.out
    assert not wt.exists()
    assert git(work, "show", "main:t1.txt") == "work of t1"  # the approved commit was merged, not the edits
    snap = "refs/nerve/archive/t1"
    assert parents(work, snap) == [tip]
    assert git(work, "show", f"{snap}:t1.txt") == "changed after approval"
    assert git(work, "show", f"{snap}:notes/untracked.txt") == "not committed"


def test_merge_twice_is_a_no_op(repo, gw):
    wk.drive(repo.work, "t1", "APPROVED")
    assert gw("merge t1", repo.work).code == 0
    main = git(repo.work, "rev-parse", "main")
    res = gw("merge t1", repo.work)
    assert res.code == 0 and "already COMPLETED" in res.out
    assert git(repo.work, "rev-parse", "main") == main


def test_merge_delete_branch_keeps_the_tip_in_the_archive(repo, gw):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    tip = git(work, "rev-parse", "feat/t1")
    res = gw("merge t1 --delete-branch", work)
    assert res.code == 0 and "Branch deleted" in res.out, res
    assert "refs/heads/feat/t1" not in wk.branches(work)
    assert git(work, "rev-parse", "refs/nerve/archive/t1") == tip


def test_merge_run_from_inside_the_tasks_own_worktree(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "APPROVED")
    res = gw("merge t1 --delete-branch", wt / "src")
    assert res.code == 0, res
    assert wk.state(work, "t1") == "COMPLETED" and not wt.exists()
    assert "refs/heads/feat/t1" not in wk.branches(work)


def test_merge_from_another_worker_worktree(repo, gw):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    wt2 = wk.drive(work, "t2", "WORKING")
    assert gw("merge t1", wt2).code == 0
    assert git(work, "show", "main:t1.txt") == "work of t1"
    assert git(wt2, "symbolic-ref", "HEAD") == "refs/heads/feat/t2"
    assert (work / "t1.txt").is_file()  # main's checkout followed, wherever merge ran from


# -- with a remote ------------------------------------------------------------------------------


def test_merge_with_a_remote_pushes_and_syncs_local_main(remote_repo, gw):
    work = remote_repo.work
    wk.drive(work, "t1", "APPROVED")
    res = gw("merge t1 --delete-branch", work)
    assert res.code == 0 and "(pushed)" in res.out, res
    merged = git(remote_repo.origin, "rev-parse", "refs/heads/main")
    assert git(work, "rev-parse", "main") == merged
    assert git(work, "rev-parse", "origin/main") == merged
    assert (work / "t1.txt").is_file() and git(work, "status", "--porcelain") == ""
    # the branch is gone locally and on the remote; the tip stays archived
    assert git(remote_repo.origin, "for-each-ref", "refs/heads/feat") == ""
    assert git(work, "for-each-ref", "refs/remotes/origin/feat") == ""
    assert git(work, "cat-file", "-t", "refs/nerve/archive/t1") == "commit"


def test_merge_onto_a_remote_that_moved_since_done(remote_repo, gw, tmp_path):
    work = remote_repo.work
    wk.drive(work, "t1", "APPROVED")
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    theirs = wk.push_from(other, "theirs.txt", "t\n")
    res = gw("merge t1", work)
    assert res.code == 0, res
    merged = git(remote_repo.origin, "rev-parse", "main")
    assert parents(work, merged)[0] == theirs
    assert (work / "theirs.txt").is_file() and (work / "t1.txt").is_file()


def test_merge_retries_when_the_push_loses_a_race(remote_repo, gw, tmp_path, monkeypatch):
    work = remote_repo.work
    wk.drive(work, "t1", "APPROVED")
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    real_fetch = gitremote.fetch
    raced: list[str] = []

    def fetch_then_someone_pushes(cwd, remote, branches):
        real_fetch(cwd, remote, branches)
        if not raced:  # right after our first fetch, a second clone pushes to main
            raced.append(wk.push_from(other, "race.txt", "pushed during the merge\n"))

    monkeypatch.setattr(gitremote, "fetch", fetch_then_someone_pushes)
    res = gw("merge t1 --json", work)
    assert res.code == 0, res
    assert len(raced) == 1
    merged = git(remote_repo.origin, "rev-parse", "main")
    assert json.loads(res.out)["merge_commit"] == merged
    assert parents(work, merged)[0] == raced[0]  # merged again on top of the racing push
    assert git(remote_repo.origin, "show", "main:race.txt") == "pushed during the merge"
    assert git(remote_repo.origin, "show", "main:t1.txt") == "work of t1"
    assert git(work, "rev-parse", "main") == merged


def test_merge_gives_up_after_three_lost_races_and_moves_nothing(remote_repo, gw, tmp_path, monkeypatch):
    work = remote_repo.work
    wk.drive(work, "t1", "APPROVED")
    local_main = git(work, "rev-parse", "main")
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    real_fetch = gitremote.fetch
    pushes: list[str] = []

    def always_racing(cwd, remote, branches):
        real_fetch(cwd, remote, branches)
        pushes.append(wk.push_from(other, f"race{len(pushes)}.txt", "x\n"))

    # a context of its own: monkeypatch.undo() would also undo the hermetic environment (HOME, identity)
    with monkeypatch.context() as racing:
        racing.setattr(gitremote, "fetch", always_racing)
        res = gw("merge t1", work)
    assert res.code == 4 and "gave up after 3 attempts" in res.err, res
    assert len(pushes) == 3
    assert git(remote_repo.origin, "rev-parse", "main") == pushes[-1]  # theirs, not overwritten
    assert git(work, "rev-parse", "main") == local_main
    assert wk.state(work, "t1") == "APPROVED"
    assert gw("merge t1", work).code == 0  # and a later run goes through


@pytest.mark.slow
def test_merge_race_with_real_processes(remote_repo, sh, tmp_path):
    """Another clone's push lands on the remote while our push is in flight (from a pre-receive hook)."""
    work = remote_repo.work
    wk.drive(work, "t1", "APPROVED")
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    build.commit_file(other, "race.txt", "racing push\n")
    marker = tmp_path / "raced"
    hook = remote_repo.origin / "hooks" / "pre-receive"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(
        "#!/bin/sh\n"
        "# once, when main is pushed: another clone pushes to main first\n"
        f"grep -q ' refs/heads/main$' || exit 0\n"
        f"[ -e '{marker}' ] && exit 0\n"
        f"touch '{marker}'\n"
        "unset GIT_DIR GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_PUSH_OPTION_COUNT\n"
        f"git -C '{other}' push -q origin HEAD:refs/heads/main >/dev/null 2>&1\n"
        "exit 0\n"
    )
    hook.chmod(0o755)
    res = sh(["git", "worker", "merge", "t1", "--json"], work)
    assert res.code == 0, res
    assert marker.exists()
    assert json.loads(res.out)["state"] == "COMPLETED"
    assert git(remote_repo.origin, "show", "main:race.txt") == "racing push"
    assert git(remote_repo.origin, "show", "main:t1.txt") == "work of t1"
    assert git(work, "rev-parse", "main") == git(remote_repo.origin, "rev-parse", "main")


def test_local_main_ahead_of_the_remote_is_left_alone_with_a_warning(remote_repo, gw):
    work = remote_repo.work
    wk.drive(work, "t1", "APPROVED")
    local_only = build.commit_file(work, "local.txt", "not pushed\n")
    res = gw("merge t1", work)
    assert res.code == 0, res
    assert "commits that are not on the remote" in res.err
    assert git(work, "rev-parse", "main") == local_only
    assert git(remote_repo.origin, "show", "main:t1.txt") == "work of t1"


def test_an_integration_branch_the_remote_lacks_is_merged_locally(remote_repo, gw):
    work = remote_repo.work
    git(work, "branch", "agents")
    git(work, "config", "nerve.integration", "agents")
    wt = wk.drive(work, "t1", "APPROVED")
    assert wk.row(work, "t1").base == "refs/heads/agents"
    assert git(remote_repo.origin, "rev-parse", "refs/heads/feat/t1") == git(work, "rev-parse", "feat/t1")
    res = gw("merge t1", work)
    assert res.code == 0 and "(pushed)" not in res.out, res
    assert git(work, "show", "agents:t1.txt") == "work of t1"
    assert git(remote_repo.origin, "for-each-ref", "refs/heads/agents") == ""
    assert not wt.exists()


def test_an_untracked_file_in_the_way_in_the_integration_checkout_moves_nothing(repo, gw):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    main_before = git(work, "rev-parse", "main")
    build.write(work, "t1.txt", "my own untracked file\n")
    res = gw("merge t1", work)
    assert res.code == 4 and "could not fast-forward main" in res.err, res
    assert git(work, "rev-parse", "main") == main_before
    assert (work / "t1.txt").read_text() == "my own untracked file\n"
    assert wk.state(work, "t1") == "APPROVED"
