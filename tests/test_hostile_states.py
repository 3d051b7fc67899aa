"""Hostile states (issue 17): work is never lost, what was removed is never republished, an
empty or foreign bus is never trusted, control codes are never printed raw, and every error
names git's real cause. Each case on a real repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos import worker as wk
from fixtures.repos.build import commit_file, write
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)


def reachable(cwd: Path, sha: str, ref: str) -> bool:
    return subprocess.run(["git", "merge-base", "--is-ancestor", sha, ref], cwd=cwd).returncode == 0


def tree_files(cwd: Path, rev: str) -> set[str]:
    return set(git(cwd, "ls-tree", "-r", "--name-only", rev).split())


# -- 1. a branch deleted by hand -------------------------------------------------------------


@pytest.fixture
def orphaned(repo):
    """Task t1 WORKING with two commits and uncommitted work, its branch deleted with update-ref -d."""
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    first = commit_file(wt, "one.txt", "one\n", "t1: one")
    second = commit_file(wt, "two.txt", "two\n", "t1: two")
    write(wt, "wip.txt", "not committed\n")
    git(work, "update-ref", "-d", "refs/heads/feat/t1")
    return repo, wt, [first, second]


@pytest.mark.parametrize("argv", [["cancel", "t1", "--cleanup"], ["done", "--task", "t1"]])
def test_a_branch_deleted_by_hand_is_named_not_blamed_on_uncommitted_changes(orphaned, gw, argv):
    repo, wt, (first, second) = orphaned
    res = gw(argv, repo.work)
    assert res.code == 4, res
    assert "feat/t1" in res.err and "is gone" in res.err, res.err
    assert f"git branch feat/t1 {second[:12]}" in res.err, res.err  # the way back: its last tip
    assert "uncommitted changes" not in res.err
    assert wt.is_dir() and wk.state(repo.work, "t1") == "WORKING"


def test_cancel_cleanup_force_archives_commits_and_files_of_a_deleted_branch(orphaned, gw):
    repo, wt, (first, second) = orphaned
    res = gw(["cancel", "t1", "--cleanup", "--force"], repo.work)
    assert res.code == 0, res
    assert not wt.exists()
    ref = "refs/nerve/archive/t1"
    assert reachable(repo.work, second, ref) and reachable(repo.work, first, ref)
    files = tree_files(repo.work, ref)
    assert {"one.txt", "two.txt", "wip.txt"} <= files, files  # the uncommitted file too
    # retry puts the branch back at its commits
    assert gw(["retry", "t1"], repo.work).code == 0
    assert git(repo.work, "rev-parse", "refs/heads/feat/t1") == second


def test_the_bus_keeps_the_tip_when_worktree_and_branch_are_both_gone(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    sha = commit_file(wt, "kept.txt", "kept\n", "t1: kept")  # the post-commit hook records it
    assert any(m == "commit" for m in wk.kinds(work, "t1"))
    shutil.rmtree(wt)
    git(work, "update-ref", "-d", "refs/heads/feat/t1")
    res = gw(["cancel", "t1", "--cleanup", "--force"], work)
    assert res.code == 0, res
    assert reachable(work, sha, "refs/nerve/archive/t1")
    assert "prunable" not in git(work, "worktree", "list", "--porcelain")


def test_an_archive_that_cannot_be_written_removes_nothing(orphaned, gw):
    repo, wt, _ = orphaned
    lock = Path(git(repo.work, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "refs" / "nerve" / "archive" / "t1.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    # a live holder: a lock nobody holds any more is a killed git's leftover, which the repair removes
    with open(lock) as held:
        holder = subprocess.Popen(["sleep", "60"], stdin=held)
    try:
        res = gw(["cancel", "t1", "--cleanup", "--force"], repo.work)
    finally:
        holder.kill()
        holder.wait()
    assert res.code == 4, res
    assert "nothing was removed" in res.err
    assert wt.is_dir() and (wt / "wip.txt").is_file()
    lock.unlink()


# -- 3. a bus that is not ours ---------------------------------------------------------------


def _bus(work: Path) -> Path:
    return wk.bus_path(work)


@pytest.mark.parametrize("kind", ["empty", "symlink-to-empty", "foreign-sqlite"])
def test_a_bus_that_is_not_ours_is_exit_5_and_left_byte_for_byte(repo, gw, gn, kind, tmp_path):
    work = repo.work
    wk.spawn(work, "t1")
    bus = _bus(work)
    for side in (Path(f"{bus}-wal"), Path(f"{bus}-shm")):
        side.unlink(missing_ok=True)
    bus.unlink()
    target = None
    if kind == "empty":
        bus.write_bytes(b"")
    elif kind == "symlink-to-empty":
        target = tmp_path / "elsewhere.db"
        target.write_bytes(b"")
        bus.symlink_to(target)
    else:
        import sqlite3

        conn = sqlite3.connect(bus)
        conn.execute("CREATE TABLE notes (x)")
        conn.commit()
        conn.close()
    before = bus.read_bytes() if not bus.is_symlink() else None
    for prog, argv in [("worker", ["status"]), ("worker", ["spawn", "t2"]), ("worker", ["show", "t1"]),
                       ("nerve", ["init"]), ("nerve", ["outbox"])]:
        res = (gw if prog == "worker" else gn)(argv, work)
        assert res.code == 5, (argv, res)
        assert "no workers yet" not in res.out
    if target is not None:
        assert bus.is_symlink() and target.read_bytes() == b""
    else:
        assert bus.read_bytes() == before
    assert not Path(f"{bus}-wal").exists() or kind == "foreign-sqlite"
    assert "feat/t2" not in git(work, "branch", "--list")


def test_a_new_bus_is_created_only_where_none_exists(repo, gw):
    work = repo.work
    assert gw(["spawn", "t1"], work).code == 0
    bus = _bus(work)
    assert bus.is_file() and not bus.is_symlink()
    assert not [p for p in bus.parent.iterdir() if p.name.endswith(".new")]  # no temporary left
    dangling = bus.parent / "bus.db"
    bus.unlink()
    dangling.symlink_to(bus.parent / "nowhere.db")  # a dangling symlink is not "no bus"
    assert gw(["status"], work).code == 5
    assert not (bus.parent / "nowhere.db").exists()


# -- 5. --check "" --------------------------------------------------------------------------


@pytest.mark.parametrize("check", ["", "   "])
def test_merge_with_an_empty_check_is_a_usage_error_and_merges_nothing(repo, gw, gn, check):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    main = git(work, "rev-parse", "main")
    res = gw(["merge", "t1", "--check", check], work)
    assert res.code == 2 and "--check" in res.err, res
    res = gw(["merge", "--all", "--check", check], work)
    assert res.code == 2 and "--check" in res.err, res
    assert git(work, "rev-parse", "main") == main
    assert wk.state(work, "t1") == "APPROVED"


# -- 10. control characters -------------------------------------------------------------------

EVIL = "title\x1b]0;pwned\x07 clear\x1b[2J link\x1b]8;;http://x\x1b\\hidden\x1b]8;;\x1b\\ bidi\u202eevil c1\x9b31m"
RAW = ("\x1b", "\x07", "\u202e", "\x9b")


def raw_codes(text: str) -> list[str]:
    return [repr(c) for c in RAW if c in text]


def test_control_codes_from_users_agents_and_commits_are_never_printed_raw(repo, gw, gn):
    work = repo.work
    wt = wk.spawn(work, "t1", description=f"desc {EVIL}")
    with wk.opened(work) as r:
        from git_nerve.worker import lifecycle

        lifecycle.start(r, "t1")
    commit_file(wt, "a.txt", "a\n", f"subject {EVIL}")
    assert gn(["tell", "--task", "t1", f"note {EVIL}"], work).code == 0
    assert gn(["post", "--task", "t1", "--role", "tester", f"round {EVIL}\nsecond line"], work).code == 0
    outputs = {
        "status": gw(["status"], work),
        "show": gw(["show", "t1"], work),
        "thread": gn(["thread", "t1"], work),
        "outbox": gn(["outbox"], work),
    }
    for name, res in outputs.items():
        assert res.code == 0, (name, res)
        assert not raw_codes(res.out + res.err), (name, raw_codes(res.out + res.err), res.out)
    assert "\\e]0;pwned" in outputs["show"].out  # shown escaped, not dropped
    assert "round title\\e]0;pwned" in outputs["thread"].out and "\nsecond line" in outputs["thread"].out  # newlines kept
    # --json: the same text, escaped as JSON does, and it reads back exactly
    res = gw(["show", "t1", "--json"], work)
    assert not raw_codes(res.out)
    assert json.loads(res.out)["worker"]["description"] == f"desc {EVIL}"


def test_clean_escapes_controls_and_keeps_layout():
    """The one sanitiser the CLI, the thread view, the outbox and the hooks' stderr share."""
    from git_nerve.text import clean, clean_styled, json_safe

    assert clean("a\x1b[2Jb\u202e\n\tc\r\x9b") == "a\\e[2Jb\\u202e\n\tc\\x0d\\x9b"
    assert clean("x\ny\tz", newlines=False, tabs=False) == "x\\x0ay\\x09z"
    # our own colours survive on a terminal; anything else with ESC does not
    assert clean_styled("\x1b[1mok\x1b[0m \x1b[2J\x1b[8m") == "\x1b[1mok\x1b[0m \\e[2J\\e[8m"
    assert json.loads(json_safe(json.dumps("\x9b\u202e", ensure_ascii=False))) == "\x9b\u202e"


def test_merge_names_a_branch_deleted_by_hand(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "APPROVED")
    tip = git(work, "rev-parse", "feat/t1")
    git(work, "update-ref", "-d", "refs/heads/feat/t1")
    res = gw(["merge", "t1"], work)
    assert res.code == 4 and "is gone" in res.err and tip[:12] in res.err, res
    assert "uncommitted changes" not in res.err
    assert wt.is_dir() and wk.state(work, "t1") == "APPROVED"


# -- 11. messages that mislead -------------------------------------------------------------------


def test_dubious_ownership_names_safe_directory(repo, sh, tmp_path):
    work = repo.work
    subprocess.run(["chown", "-R", "12345:12345", str(work)], check=True)
    try:
        res = sh(["git", "worker", "status"], work)
    finally:
        subprocess.run(["chown", "-R", f"{os.getuid()}:{os.getgid()}", str(work)], check=True)
    assert res.code == 4, res
    assert "safe.directory" in res.err and "not a git repository" not in res.err, res.err


def test_a_corrupt_worker_context_names_a_fix_that_repairs_it(repo, gw):
    work = repo.work
    wt = wk.spawn(work, "t1")
    ctx = Path(git(wt, "rev-parse", "--path-format=absolute", "--git-dir")) / "nerve" / ".worker-ctx.json"
    ctx.write_text("{not json")
    res = gw(["start"], wt)
    assert res.code == 2 and "git worker spawn t1" in res.err, res
    assert gw(["spawn", "t1"], work).code == 0  # the suggested fix
    assert gw(["start"], wt).code == 0
    assert wk.state(work, "t1") == "WORKING"


def test_a_full_disk_error_keeps_gits_cause():
    from git_nerve.git.cli import message

    stderr = ("Preparing worktree (new branch 'feat/t1')\n"
              "error: unable to create file src/app.py: No space left on device\n"
              "fatal: Could not reset index file to revision 'HEAD'.\n")
    text = message(stderr)
    assert "No space left on device" in text and "Could not reset index file" in text


def test_spawn_on_a_full_disk_reports_no_space_left(repo, gw, tmp_path):
    """A real ENOSPC: the worktree root is a tiny tmpfs (skipped where mounting is not allowed)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        work = repo.work
        write(work, "big.bin", "x" * 200_000)
        git(work, "add", "big.bin")
        git(work, "commit", "-qm", "big")
        git(work, "config", "nerve.worktreeDir", str(mnt))
        res = gw(["spawn", "t1"], work)
        assert res.code == 4, res
        assert "No space left on device" in res.err, res.err
        assert "feat/t1" not in git(work, "branch", "--list")
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_merge_prunes_the_entry_of_a_worktree_deleted_by_hand(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "APPROVED")
    shutil.rmtree(wt)
    res = gw(["merge", "t1"], work)
    assert res.code == 0, res
    assert str(wt) not in git(work, "worktree", "list", "--porcelain")
    assert reachable(work, git(work, "rev-parse", "feat/t1"), "main")


# -- 2. a merge whose push landed but was never recorded -------------------------------------------


@pytest.fixture
def pushed_unrecorded(remote_repo, sh):
    """t1 APPROVED; `git worker merge t1` killed just after its push reached origin."""
    work = remote_repo.work
    wk.drive(work, "t1", "APPROVED")
    tip = git(work, "rev-parse", "feat/t1")
    res = sh(["git", "worker", "merge", "t1"], work, env={**os.environ, "NERVE_FAULT": "merge.after-push"})
    assert res.code != 0, res  # killed
    assert reachable(work, tip, "refs/remotes/origin/main")
    assert wk.state(work, "t1") == "APPROVED"
    return remote_repo, tip


@pytest.mark.parametrize("argv", [["cancel", "t1"], ["request-changes", "t1", "--comment", "redo"],
                                  ["cancel", "t1", "--cleanup"]])
def test_a_merge_that_reached_origin_is_recorded_not_cancelled(pushed_unrecorded, gw, argv):
    repo, tip = pushed_unrecorded
    res = gw(argv, repo.work)
    assert res.code == 3, res
    assert "already reached the remote" in res.err, res.err
    assert wk.state(repo.work, "t1") == "COMPLETED"
    merged = [m for m in wk.kinds(repo.work, "t1") if m == "merged"]
    assert merged
    # merge now finishes the job (cleanup) instead of refusing
    res = gw(["merge", "t1"], repo.work)
    assert res.code == 0, res
    assert not wk.worktree(repo.work, "t1").exists()


def test_status_records_a_merge_that_reached_origin(pushed_unrecorded, gw):
    repo, tip = pushed_unrecorded
    res = gw(["status", "--json"], repo.work)
    assert res.code == 0, res
    assert [r["state"] for r in json.loads(res.out) if r["task_id"] == "t1"] == ["COMPLETED"]
    assert "recorded it as COMPLETED" in res.err


def test_an_approved_task_without_commits_is_not_mistaken_for_merged(remote_repo, gw):
    """Its tip is on origin/main from the start; only a merge commit with it as a parent counts."""
    work = remote_repo.work
    wk.spawn(work, "t1")
    with wk.opened(work) as r:
        from git_nerve.worker import lifecycle

        lifecycle.start(r, "t1")
        lifecycle.done(r, "t1", allow_empty=True)  # the rare deliberate empty task
        lifecycle.approve(r, "t1", by="me")
    res = gw(["cancel", "t1"], work)
    assert res.code == 0, res
    assert wk.state(work, "t1") == "FAILED"


# -- 4. the integration branch force-pushed backwards ----------------------------------------------------


def test_merge_refuses_to_republish_a_commit_the_remote_dropped(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    other = wk.second_clone(origin, tmp_path / "other")
    before_secret = git(other, "rev-parse", "HEAD")
    wt = wk.spawn(work, "t1")
    secret = wk.push_from(other, "secret.txt", "password=hunter2\n")
    with wk.opened(work) as r:
        from git_nerve.worker import lifecycle

        lifecycle.start(r, "t1")
        own = commit_file(wt, "t1.txt", "work\n", "t1: work")
        lifecycle.done(r, "t1")  # rebased onto origin/main, secret included
        lifecycle.approve(r, "t1", by="me")
    # the secret is removed from origin's history
    git(other, "reset", "-q", "--hard", before_secret)
    git(other, "push", "-q", "--force", "origin", "HEAD:refs/heads/main")
    res = gw(["merge", "t1"], work)
    assert res.code == 4, res
    assert secret[:12] in res.err and "no longer contains" in res.err, res.err
    assert git(origin, "rev-parse", "main") == before_secret  # nothing published
    assert wk.state(work, "t1") == "APPROVED"
    # the way forward it names works: the task's own commit only
    assert gw(["request-changes", "t1"], work).code == 0
    git(wt, "rebase", "-q", "--onto", "origin/main", secret[:12])
    assert gw(["done"], wt).code == 0
    assert gw(["approve", "t1"], work).code == 0
    res = gw(["merge", "t1"], work)
    assert res.code == 0, res
    published = git(origin, "rev-list", "main").split()
    assert secret not in published
    assert "t1.txt" in tree_files(origin, "main") and "secret.txt" not in tree_files(origin, "main")
    assert own  # (its content, rebased, is what was merged)


def test_done_refuses_to_rebase_a_dropped_commit_back_in(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    other = wk.second_clone(origin, tmp_path / "other")
    before_secret = git(other, "rev-parse", "HEAD")
    secret = wk.push_from(other, "secret.txt", "password=hunter2\n")
    wt = wk.spawn(work, "t1")  # based on origin/main with the secret
    assert gw(["start"], wt).code == 0
    commit_file(wt, "t1.txt", "work\n", "t1: work")
    git(other, "reset", "-q", "--hard", before_secret)
    commit_file(other, "later.txt", "after the rewind\n", "later")
    git(other, "push", "-q", "--force", "origin", "HEAD:refs/heads/main")
    res = gw(["done"], wt)
    assert res.code == 4 and secret[:12] in res.err, res
    assert f"git rebase --onto origin/main {secret[:12]}" in res.err
    assert "refs/heads/feat/t1" not in git(origin, "for-each-ref", "--format=%(refname)")  # not pushed
    git(wt, "rebase", "-q", "--onto", "origin/main", secret[:12])
    assert gw(["done"], wt).code == 0
    assert secret not in git(origin, "rev-list", "feat/t1").split()
