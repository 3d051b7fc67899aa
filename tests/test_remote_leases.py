"""Issue 35 (1, 2): every write of a task's branch on the shared remote names the exact value it replaces.

Two clones of one bare origin: the person's (where git-nerve runs) and a teammate's, who pushes onto the task's
branch after `done` pushed it. A branch that moved since git-nerve pushed it is never deleted (merge
--delete-branch, cancel --cleanup: what was pushed onto it is archived, the branch kept, the commits named), and
`done` never overwrites it (exit 4 naming the commits) unless told to with --replace-remote, which archives them
first. Origin's refs are read from origin itself (`git --git-dir=origin rev-parse`, `git ls-remote`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fixtures.repos import worker as wk
from fixtures.repos.build import commit_file, git
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)


def on_origin(origin: Path, branch: str) -> str | None:
    """``refs/heads/<branch>`` as origin itself has it (None: no such branch)."""
    proc = subprocess.run(["git", "--git-dir", str(origin), "rev-parse", "-q", "--verify", f"refs/heads/{branch}"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or None


def ls_remote(work: Path, branch: str) -> str | None:
    out = git(work, "ls-remote", "origin", f"refs/heads/{branch}")
    return out.split("\t")[0] if out else None


def kept_by_archive(work: Path, sha: str, task: str = "t1") -> bool:
    proc = subprocess.run(["git", "merge-base", "--is-ancestor", sha, f"refs/nerve/archive/{task}"], cwd=work)
    return proc.returncode == 0


def teammate_pushes(origin: Path, root: Path, branch: str = "feat/t1") -> str:
    """A teammate's clone fetches the task's branch, commits B on it and pushes it: B."""
    other = wk.second_clone(origin, root / "teammate")
    git(other, "checkout", "-q", "-b", branch, f"origin/{branch}")
    b = commit_file(other, "teammate.txt", "the teammate's fix\n", "teammate: fix on top")
    git(other, "push", "-q", "origin", branch)
    assert on_origin(origin, branch) == b
    return b


def worker(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """`git worker ...` as a real process (plain arguments: `done` takes its click-free path)."""
    return subprocess.run(["git", "worker", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))


# -- (1) a branch someone pushed onto is never deleted --------------------------------------------------------


def test_merge_delete_branch_keeps_a_branch_a_teammate_pushed_onto_and_archives_their_commit(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "IN_REVIEW")
    a = git(wt, "rev-parse", "HEAD")
    assert on_origin(origin, "feat/t1") == a
    b = teammate_pushes(origin, tmp_path)
    assert gw("approve t1", work).code == 0

    res = gw("merge t1 --delete-branch", work)

    assert res.code == 0, res
    assert on_origin(origin, "feat/t1") == b  # kept on origin, at the teammate's commit
    assert kept_by_archive(work, b)  # and their commit archived here too
    assert git(work, "merge-base", "--is-ancestor", a, "origin/main") == ""  # the reviewed tip was merged
    line = [ln for ln in res.out.splitlines() if "kept branch feat/t1 on origin" in ln]
    assert len(line) == 1 and b[:12] in line[0] and "teammate: fix on top" in line[0], res.out
    assert "refs/nerve/archive/t1" in line[0] and a[:12] in line[0], res.out
    assert "refs/heads/feat/t1" not in wk.branches(work)  # its own local branch goes, as before


def test_cancel_cleanup_keeps_a_branch_a_teammate_pushed_onto_and_archives_their_commit(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    wk.drive(work, "t1", "IN_REVIEW")
    b = teammate_pushes(origin, tmp_path)

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert on_origin(origin, "feat/t1") == b and ls_remote(work, "feat/t1") == b
    assert kept_by_archive(work, b)
    line = [ln for ln in res.out.splitlines() if "kept branch feat/t1 on origin" in ln]
    assert len(line) == 1 and b[:12] in line[0] and "teammate: fix on top" in line[0], res.out
    assert wk.state(work, "t1") == "FAILED"
    # the archive still restores the task's own tip first: retry brings back its branch at A, not at B
    assert gw("retry t1", work).code == 0
    assert git(wk.worktree(work, "t1"), "rev-parse", "HEAD") == wk.row(work, "t1").pushed_sha


def test_a_branch_deleted_on_origin_by_someone_is_no_error(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    wk.drive(work, "t1", "APPROVED")
    git(origin, "update-ref", "-d", "refs/heads/feat/t1")

    res = gw("merge t1 --delete-branch", work)

    assert res.code == 0, res
    assert "kept" not in res.out and on_origin(origin, "feat/t1") is None
    assert not git(work, "for-each-ref", "refs/remotes/origin/feat/t1")


# -- (2) done never overwrites what someone pushed -------------------------------------------------------------


def _changes_requested_after_a_teammates_push(work: Path, origin: Path, root: Path, gw) -> tuple[Path, str, str, str]:
    """IN_REVIEW at A, the teammate pushes B, request-changes, a plain `git fetch` in the main checkout (an
    editor's background fetch: the remote-tracking ref says B), the agent commits C: (worktree, A, B, C)."""
    wt = wk.drive(work, "t1", "IN_REVIEW")
    a = git(wt, "rev-parse", "HEAD")
    b = teammate_pushes(origin, root)
    assert gw("request-changes t1 --comment 'one more thing'", work).code == 0
    git(work, "fetch", "-q", "origin")
    assert git(work, "rev-parse", "refs/remotes/origin/feat/t1") == b  # a bare lease would now overwrite B
    assert gw("start", wt).code == 0
    c = commit_file(wt, "more.txt", "the agent's second round\n", "t1: second round")
    return wt, a, b, c


def test_done_refuses_to_overwrite_a_teammates_push_then_replace_remote_archives_it_first(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    wt, a, b, c = _changes_requested_after_a_teammates_push(work, origin, tmp_path, gw)

    refused = worker(wt, "done")  # the click-free path

    assert refused.returncode == 4, refused
    assert on_origin(origin, "feat/t1") == b  # origin unchanged
    assert refused.stderr.count("\n") == 1 and b[:12] in refused.stderr and "teammate: fix on top" in refused.stderr
    assert "--replace-remote" in refused.stderr and "git rebase origin/feat/t1" in refused.stderr, refused.stderr
    assert refused.stdout == ""
    assert wk.state(work, "t1") == "WORKING" and git(wt, "rev-parse", "HEAD") == c  # nothing moved here either
    assert wk.row(work, "t1").pushed_sha == a
    clicked = gw("done", wt)  # click's path says the same
    assert clicked.code == 4 and b[:12] in clicked.err, clicked

    replaced = worker(wt, "done", "--replace-remote")

    assert replaced.returncode == 0, replaced
    assert on_origin(origin, "feat/t1") == c == ls_remote(work, "feat/t1")
    assert kept_by_archive(work, b)
    assert wk.state(work, "t1") == "IN_REVIEW" and wk.row(work, "t1").pushed_sha == c
    # the next deletion leases the value done pushed: the ordinary cleanup deletes it
    assert gw("approve t1", work).code == 0
    merged = gw("merge t1 --delete-branch", work)
    assert merged.code == 0 and "kept" not in merged.out, merged
    assert on_origin(origin, "feat/t1") is None


def test_done_after_rebasing_onto_the_teammates_push_pushes_without_replacing_it(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    wt, a, b, c = _changes_requested_after_a_teammates_push(work, origin, tmp_path, gw)
    git(wt, "rebase", "-q", "origin/feat/t1")  # what the refusal says to do
    tip = git(wt, "rev-parse", "HEAD")

    res = gw("done", wt)

    assert res.code == 0, res
    assert on_origin(origin, "feat/t1") == tip
    assert git(work, "merge-base", "--is-ancestor", b, tip) == ""  # the teammate's commit is on it


def test_done_rebased_by_git_nerve_still_sees_the_teammates_commit_as_held(remote_repo, gw, tmp_path):
    """After the agent rebased onto B, main moves: done rebases A-B-C onto the new main (new shas); B's change is
    still there (a rebased copy), so done pushes; nothing is refused."""
    work, origin = remote_repo.work, remote_repo.origin
    wt, a, b, c = _changes_requested_after_a_teammates_push(work, origin, tmp_path, gw)
    git(wt, "rebase", "-q", "origin/feat/t1")
    wk.push_from(wk.second_clone(origin, tmp_path / "mainline"), "mainline.txt", "main moved\n")

    res = gw("done", wt)

    assert res.code == 0, res
    assert "Rebased" in res.out
    tip = on_origin(origin, "feat/t1")
    assert tip == git(wt, "rev-parse", "HEAD") and git(wt, "show", f"{tip}:teammate.txt") == "the teammate's fix"


def test_the_fast_path_reads_replace_remote():
    from git_nerve.cli import verbs

    assert verbs.plain_args("done", ["--replace-remote"]) == {
        "task": None, "as_json": False, "skip_rebase": False, "allow_empty": False, "replace_remote": True}
    assert verbs.plain_args("done", ["--replace-remote", "--replace-remote"]) is None  # repeated: click's


# -- (3) the ordinary flows ----------------------------------------------------------------------------------


def test_done_twice_then_merge_delete_branch_deletes_the_branch_it_pushed(remote_repo, gw):
    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "IN_REVIEW")
    assert gw("request-changes t1 --comment again", work).code == 0
    assert gw("start", wt).code == 0
    wk.push_from(wk.second_clone(origin, work.parent / "mainline"), "mainline.txt", "main moved\n")
    c = commit_file(wt, "more.txt", "second round\n", "t1: second round")

    again = gw("done", wt)  # rebased onto the new main: it replaces its own earlier push (A), nobody else's

    assert again.code == 0, again
    tip = git(wt, "rev-parse", "HEAD")
    assert tip != c and on_origin(origin, "feat/t1") == tip == wk.row(work, "t1").pushed_sha
    assert gw("approve t1", work).code == 0

    res = gw("merge t1 --delete-branch", work)

    assert res.code == 0, res
    assert "Branch deleted" in res.out and "kept" not in res.out, res.out
    assert on_origin(origin, "feat/t1") is None and ls_remote(work, "feat/t1") is None
    assert "refs/heads/feat/t1" not in wk.branches(work)


def test_done_of_a_branch_never_pushed_creates_it(remote_repo, gw):
    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "WORKING")
    commit_file(wt, "t1.txt", "work\n", "t1: work")
    assert on_origin(origin, "feat/t1") is None

    res = gw("done", wt)

    assert res.code == 0 and "Pushed" in res.out, res
    assert on_origin(origin, "feat/t1") == git(wt, "rev-parse", "HEAD") == wk.row(work, "t1").pushed_sha


def test_a_bus_from_before_the_pushed_sha_learns_it_from_the_last_pushed_review_request(remote_repo, gw):
    """A bus of schema 4 (no pushed_sha): the migration takes the value done pushed from its review request, so
    the cleanup can lease the deletion on it; a task whose push no message records keeps its remote branch."""
    import sqlite3
    from contextlib import closing

    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "APPROVED")
    a = git(wt, "rev-parse", "HEAD")
    wk.drive(work, "t2", "APPROVED")
    with closing(sqlite3.connect(wk.bus_path(work))) as conn, conn:
        conn.execute("ALTER TABLE workers DROP COLUMN pushed_sha")
        conn.execute("DROP INDEX IF EXISTS messages_usage")  # schema 6's (issue 39): a bus of schema 4 has none
        conn.execute("DROP INDEX IF EXISTS messages_usage_ts")
        conn.execute("DELETE FROM messages WHERE task_id = 't2' AND kind IN ('review_request', 'branch_pushed')")
        conn.execute("PRAGMA user_version = 4")

    assert wk.row(work, "t1").pushed_sha == a and wk.row(work, "t2").pushed_sha is None

    res = gw("merge t1 --delete-branch", work)
    assert res.code == 0 and "kept" not in res.out, res
    assert on_origin(origin, "feat/t1") is None
    t2 = on_origin(origin, "feat/t2")
    kept = gw("merge t2 --delete-branch", work)
    assert kept.code == 0, kept
    assert on_origin(origin, "feat/t2") == t2 and "cannot tell whether someone pushed onto it" in kept.out, kept


def test_no_push_or_deletion_without_the_exact_value_it_replaces(remote_repo):
    """The git floor itself takes no bare lease and no ref name a fetch can move: a sha, or "" (must not exist)."""
    import pytest

    from git_nerve.git import destroy
    from git_nerve.git import remote as gitremote

    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "IN_REVIEW")
    a = git(wt, "rev-parse", "HEAD")
    common = Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    for lease in ("origin/feat/t1", "refs/remotes/origin/feat/t1", a[:12], None):
        with pytest.raises(ValueError):
            gitremote.push(wt, "origin", "HEAD", "feat/t1", expect=lease)
    with pytest.raises(destroy.Refused, match="no value git-nerve pushed"):
        destroy.delete_remote_branch(work, common, "origin", "feat/t1", owned_by_task="t1")
    stale = gitremote.push(wt, "origin", "HEAD~1", "feat/t1", expect="")  # "must not exist": it exists
    assert not stale.ok and stale.rejected
    # only at the value the ownership record says git-nerve pushed there, never one a caller hands in
    with pytest.raises(destroy.Refused, match=f"is not {a[:12]}, the one it recorded"):
        destroy.delete_remote_branch(work, common, "origin", "feat/t1", owned_by_task="t1",
                                     expected=git(wt, "rev-parse", "HEAD~1"))
    assert on_origin(origin, "feat/t1") == a
