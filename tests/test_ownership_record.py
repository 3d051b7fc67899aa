"""Issue 42 (b): one ownership record says what git-nerve made (git/ownership.py, `<common>/nerve/owned/`): for a
task's branch, whether it existed before the task and the value git-nerve last pushed of it. The door reads that
record and nothing else: a bus row naming a branch proves nothing. Tasks spawned by an older git-nerve (the row
was the proof then) get their record from their row once (bus migration 7) and are cleaned up as before."""

from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from fixtures.repos import worker as wk
from fixtures.repos.build import git
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.git import destroy, ownership


def common(work: Path) -> Path:
    return Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))


def on_origin(origin: Path, branch: str) -> str | None:
    proc = subprocess.run(["git", "--git-dir", str(origin), "rev-parse", "-q", "--verify", f"refs/heads/{branch}"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or None


def from_an_older_bus(work: Path, *, adopted: int | None = 0, records: bool = False, **row) -> None:
    """Make every task of ``work`` look spawned by the git-nerve before the one record: its branch's record as
    that one wrote it (none before issue 21, ``records``: task and name only) and its row's columns ``row``; the
    bus at schema 6, so that the next command runs migration 7 as an upgrade would."""
    with closing(sqlite3.connect(wk.bus_path(work))) as conn, conn:
        tasks = conn.execute("SELECT task_id, branch FROM workers").fetchall()
        for task, _branch in tasks:
            conn.execute(f"UPDATE workers SET adopted = ?{''.join(f', {c} = ?' for c in row)} WHERE task_id = ?",
                         (adopted, *row.values(), task))
        conn.execute("DROP TABLE owned_legacy")
        conn.execute("PRAGMA user_version = 6")
    for task, branch in tasks:
        ownership.forget(common(work), "branch", branch)
        if records:
            path = ownership._record_path(common(work), "branch", branch)
            path.write_text(f'{{"kind": "branch", "name": "{branch}", "task": "{task}"}}', encoding="utf-8")


# -- the record is the proof ------------------------------------------------------------------------------------


def test_spawn_records_its_branch_before_making_it_and_an_adopted_one_as_adopted(repo, gw):
    work = repo.work
    git(work, "branch", "feat/mine")
    assert gw("spawn t1", work).code == 0
    assert gw("spawn mine --adopt", work).code == 0

    made, adopted = ownership.branch_owner(common(work), "feat/t1"), ownership.branch_owner(common(work), "feat/mine")
    assert (made["task"], made["adopted"]) == ("t1", False)
    assert (adopted["task"], adopted["adopted"]) == ("mine", True)
    assert not list((common(work) / "nerve").glob("spawn-*"))  # the spawn's own record went with its bus row


def test_a_branch_whose_row_names_it_but_no_record_is_kept(repo, gw):
    """The row alone used to prove the branch git-nerve's (`prove_branch(row_branch=...)`): now it is kept."""
    work = repo.work
    assert gw("spawn t1", work).code == 0
    ownership.forget(common(work), "branch", "feat/t1")

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert "kept branch feat/t1 (no record says git-nerve created it for t1)" in res.out
    assert "refs/heads/feat/t1" in wk.branches(work)
    with pytest.raises(destroy.Refused, match="no record says git-nerve created it for t1"):
        destroy.delete_branch(work, common(work), "feat/t1", owned_by_task="t1")
    assert "refs/heads/feat/t1" in wk.branches(work)


def test_a_record_saying_adopted_is_kept_whatever_the_row_says(repo, gw):
    work = repo.work
    assert gw("spawn t1", work).code == 0
    ownership.record(common(work), "branch", "feat/t1", task="t1", adopted=True)
    assert wk.row(work, "t1").adopted == 0  # the row says git-nerve made it: it decides nothing

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert "kept branch feat/t1 (adopted: it existed before the task)" in res.out
    assert "refs/heads/feat/t1" in wk.branches(work)


def test_the_remote_deletion_leases_the_recorded_push_not_the_row(remote_repo, gw):
    """What done pushed is in the record; a row column changed behind its back does not move the lease."""
    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "IN_REVIEW")
    tip = git(wt, "rev-parse", "HEAD")
    assert ownership.pushed_sha(ownership.branch_owner(common(work), "feat/t1")) == (True, tip)
    wk.set_columns(work, "t1", pushed=0, pushed_sha=None)

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0 and "kept" not in res.out, res
    assert on_origin(origin, "feat/t1") is None and "refs/heads/feat/t1" not in wk.branches(work)
    assert ownership.branch_owner(common(work), "feat/t1") is None  # gone here and there: the record goes too


# -- tasks spawned before the one record ------------------------------------------------------------------------


@pytest.mark.parametrize("records", [False, True], ids=["no-record", "record-without-facts"])
def test_a_task_an_older_git_nerve_spawned_is_cleaned_up_as_before(remote_repo, gw, records):
    """Its row proved the branch git-nerve's and held the value done pushed: migration 7 lists it, the first
    cleanup writes its record from the row, and deletes the branch here and on origin at that value."""
    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "IN_REVIEW")
    tip = git(wt, "rev-parse", "HEAD")
    from_an_older_bus(work, records=records, pushed=1, pushed_sha=tip)
    assert ownership.pushed_sha(ownership.branch_owner(common(work), "feat/t1")) == (False, None)

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0 and "kept" not in res.out, res
    assert "refs/heads/feat/t1" not in wk.branches(work) and on_origin(origin, "feat/t1") is None
    with closing(sqlite3.connect(wk.bus_path(work))) as conn:
        assert conn.execute("SELECT count(*) FROM owned_legacy").fetchone()[0] == 0  # read once


def test_an_older_task_whose_push_the_row_does_not_know_keeps_its_remote_branch(remote_repo, gw):
    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "IN_REVIEW")
    tip = git(wt, "rev-parse", "HEAD")
    from_an_older_bus(work, records=True, pushed=1, pushed_sha=None)

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert "refs/heads/feat/t1" not in wk.branches(work)  # git-nerve made it here
    assert "cannot tell whether someone pushed onto it" in res.out
    assert on_origin(origin, "feat/t1") == tip
