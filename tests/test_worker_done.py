"""`git worker done`: the in-memory rebase, the conflict flow with git's own rebase, and the push."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.bus import messages


def messages_of(work: Path, task_id: str, kind: str):
    with closing(sqlite3.connect(wk.bus_path(work))) as conn:
        return messages.for_task(conn, task_id, kinds=(kind,))


def test_conflict_flow_end_to_end(repo, gw, sh):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    build.commit_file(wt, wk.APP, wk.app_text("hi there"), "t1: greeting")
    build.commit_file(work, wk.APP, wk.app_text("good day"), "main: greeting")

    res = gw("done", wt)
    assert res.code == 6, res
    assert wk.state(work, "t1") == "CONFLICTED"
    assert "Conflicting files: src/app.py" in res.err
    for step in ("git add <files>", "git rebase --continue", "git worker done --skip-rebase"):
        assert step in res.err
    # git's own rebase state, which `git status` and `git rebase --continue` understand
    assert wk.rebase_in_progress(wt)
    assert "rebase in progress" in git(wt, "status")
    assert git(wt, "diff", "--name-only", "--diff-filter=U") == "src/app.py"
    assert "<<<<<<<" in (wt / wk.APP).read_text()
    assert messages_of(work, "t1", "rebase_conflict")[-1].payload["files"] == ["src/app.py"]

    # done again while the rebase is stopped: still a conflict, nothing changes
    again = gw("done", wt)
    assert again.code == 6 and "rebase is in progress" in again.err
    assert gw("done --skip-rebase", wt).code == 6
    assert wk.state(work, "t1") == "CONFLICTED" and wk.rebase_in_progress(wt)

    (wt / wk.APP).write_text(wk.app_text("good day and hi there"))
    git(wt, "add", wk.APP)
    env = dict(os.environ, GIT_EDITOR="true")
    cont = sh(["git", "rebase", "--continue"], wt, env=env)
    assert cont.code == 0, cont
    assert not wk.rebase_in_progress(wt)

    res = gw("done --skip-rebase", wt)
    assert res.code == 0, res
    assert wk.state(work, "t1") == "IN_REVIEW"
    assert git(work, "merge-base", "--is-ancestor", "main", "feat/t1", check=False) == ""
    assert gw("approve t1", work).code == 0
    assert gw("merge t1", work).code == 0
    assert (work / wk.APP).read_text() == wk.app_text("good day and hi there")


def test_done_json_on_a_conflict_names_the_files(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    build.commit_file(wt, wk.APP, wk.app_text("hi there"))
    build.commit_file(work, wk.APP, wk.app_text("good day"))
    res = gw("done --json", wt)
    assert res.code == 6
    obj = json.loads(res.out)
    assert obj["state"] == "CONFLICTED" and obj["conflicts"] == ["src/app.py"]


def test_clean_rebase_happens_in_memory_and_moves_branch_and_worktree(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    old1 = build.commit_file(wt, "one.txt", "1\n", "t1: one")
    old2 = build.commit_file(wt, "two.txt", "2\n", "t1: two")
    (wt / "scratch.txt").write_text("untracked notes\n")  # untracked files do not block and survive
    main_tip = build.commit_file(work, "docs/guide.md", "# Guide\n\nmoved on\n", "main: docs")

    res = gw("done", wt)
    assert res.code == 0, res
    assert "Rebased 2 commit(s)" in res.out
    new_tip = git(wt, "rev-parse", "HEAD")
    assert git(work, "rev-parse", "feat/t1") == new_tip
    assert git(wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"
    assert git(work, "rev-parse", "feat/t1~2") == main_tip
    assert git(work, "log", "--format=%s", "-2", "feat/t1").splitlines() == ["t1: two", "t1: one"]
    # the worktree is at the new tip: main's change is there, nothing is dirty, no rebase state is left
    assert (wt / "docs" / "guide.md").read_text() == "# Guide\n\nmoved on\n"
    assert git(wt, "status", "--porcelain", "--untracked-files=no") == ""
    assert (wt / "scratch.txt").read_text() == "untracked notes\n"
    assert not wk.rebase_in_progress(wt)
    # a rewrite is recorded (libgit2 runs no post-rewrite hook), old -> new
    rewrites = [m for m in messages_of(work, "t1", "rewrite") if m.payload.get("by") == "done"]
    assert len(rewrites) == 1
    pairs = rewrites[0].payload["pairs"]
    assert [p[0] for p in pairs] == [old1, old2] and pairs[-1][1] == new_tip
    assert wk.state(work, "t1") == "IN_REVIEW"
    review = messages_of(work, "t1", "review_request")[-1].payload
    assert review["sha"] == new_tip and review["onto"] == main_tip


def test_commits_already_upstream_are_dropped(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    build.commit_file(wt, "same.txt", "same\n", "t1: same")
    main_tip = build.commit_file(work, "same.txt", "same\n", "main: same")
    res = gw("done", wt)
    assert res.code == 0, res
    assert git(work, "rev-parse", "feat/t1") == main_tip
    assert gw("approve t1", work).code == 0
    res = gw("merge t1", work)
    assert res.code == 0, res
    assert git(work, "rev-parse", "main") == main_tip  # nothing to merge: no empty merge commit
    assert wk.state(work, "t1") == "COMPLETED"


def test_skip_rebase_refuses_a_branch_that_lacks_the_integration_tip(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    build.commit_file(wt, "a.txt", "a\n")
    build.commit_file(repo.work, "b.txt", "b\n")
    res = gw("done --skip-rebase", wt)
    assert res.code == 6 and "does not contain the latest main" in res.err
    assert wk.state(repo.work, "t1") == "WORKING"


def test_done_refuses_uncommitted_changes(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    build.write(wt, "README.md", "edited but not committed\n")
    res = gw("done", wt)
    assert res.code == 4 and "uncommitted changes (README.md)" in res.err
    assert wk.state(repo.work, "t1") == "WORKING"
    assert (wt / "README.md").read_text() == "edited but not committed\n"


def test_done_refuses_a_worktree_on_another_branch_or_missing(repo, gw):
    wt = wk.drive(repo.work, "t1", "WORKING")
    git(wt, "checkout", "-q", "-b", "elsewhere")
    res = gw("done", wt)
    assert res.code == 4 and "not on branch feat/t1" in res.err
    git(wt, "checkout", "-q", "feat/t1")
    git(repo.work, "worktree", "remove", str(wt))
    res = gw("done --task t1", repo.work)
    assert res.code == 4 and "worktree of t1 is missing" in res.err and "git worker spawn t1" in res.err
    assert wk.state(repo.work, "t1") == "WORKING"


def test_done_with_a_remote_fetches_rebases_and_pushes(remote_repo, gw, tmp_path):
    work = remote_repo.work
    wt = wk.drive(work, "t1", "WORKING")
    build.commit_file(wt, "feature.txt", "f\n", "t1: feature")
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    theirs = wk.push_from(other, "theirs.txt", "t\n")

    res = gw("done", wt)
    assert res.code == 0 and "Pushed" in res.out, res
    tip = git(work, "rev-parse", "feat/t1")
    assert git(work, "rev-parse", "feat/t1~1") == theirs  # rebased onto what the remote had
    assert git(remote_repo.origin, "rev-parse", "refs/heads/feat/t1") == tip

    # changes requested: the rebased branch is pushed again over the old one (with a lease)
    assert gw("request-changes t1", work).code == 0
    build.commit_file(wt, "feature.txt", "f2\n", "t1: review fix")
    wk.push_from(other, "theirs2.txt", "t2\n")
    res = gw("done", wt)
    assert res.code == 0, res
    assert git(remote_repo.origin, "rev-parse", "refs/heads/feat/t1") == git(work, "rev-parse", "feat/t1")


def test_done_push_that_someone_else_overwrote_is_refused(remote_repo, gw, tmp_path):
    work = remote_repo.work
    wt = wk.drive(work, "t1", "WORKING")
    build.commit_file(wt, "feature.txt", "f\n")
    assert gw("done", wt).code == 0
    assert gw("request-changes t1", work).code == 0
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    git(other, "fetch", "-q", "origin", "feat/t1")
    git(other, "checkout", "-q", "-b", "feat/t1", "FETCH_HEAD")
    foreign = build.commit_file(other, "foreign.txt", "not ours\n")
    git(other, "push", "-q", "origin", "feat/t1")
    build.commit_file(wt, "feature.txt", "f2\n")
    res = gw("done", wt)
    assert res.code == 4 and foreign[:12] in res.err and "--replace-remote" in res.err, res  # names their commit
    assert git(remote_repo.origin, "rev-parse", "refs/heads/feat/t1") == foreign  # their work is not overwritten
    assert wk.state(work, "t1") == "WORKING"


def test_conflict_on_the_diverging_fixture(diverging_repo, gw):
    """A worker spawned from `topic` (which edits the line `main` also edits) hits git's conflict on done."""
    work = diverging_repo.work
    assert gw("spawn t1 --from topic", work).code == 0
    wt = wk.worktree(work, "t1")
    assert gw("start", wt).code == 0
    res = gw("done", wt)
    assert res.code == 6 and "src/app.py" in res.err, res
    assert wk.state(work, "t1") == "CONFLICTED" and wk.rebase_in_progress(wt)
    assert git(wt, "diff", "--name-only", "--diff-filter=U") == "src/app.py"
