"""The bus as `git worker` sees it: one WAL database in the common dir, and a clear exit 5,
with the file left byte for byte, when it is corrupt, unreadable or from a newer git-nerve."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.bus.connection import Bus
from git_nerve.bus.schema import SCHEMA_VERSION
from git_nerve.paths import filesystem_type


def bus_file(work: Path) -> Path:
    return work / ".git" / "nerve" / "bus.db"


def test_one_bus_in_the_common_dir_in_wal_mode(repo, gw):
    wt = wk.spawn(repo.work, "t1")
    assert gw("start", wt).code == 0  # written from the linked worktree
    path = bus_file(repo.work)
    assert path.is_file()
    assert not (Path(git(wt, "rev-parse", "--path-format=absolute", "--git-dir")) / "nerve" / "bus.db").exists()
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT state FROM workers WHERE task_id = 't1'").fetchone() == ("WORKING",)
    with closing(Bus(path)) as bus:
        assert bus.conn.isolation_level is None  # autocommit: every write is an explicit BEGIN IMMEDIATE
        assert bus.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert bus.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
        with bus.write() as conn:
            assert conn.in_transaction
        assert not bus.conn.in_transaction


def test_a_zero_byte_bus_is_refused_not_reinitialised(repo, gw):
    """An empty bus.db is what a crash or a full disk leaves of a real bus: reusing it would make
    every task vanish and orphan their branches (issue 17), so it is refused and left as it is."""
    path = bus_file(repo.work)
    path.parent.mkdir(parents=True)
    path.touch()
    res = gw("spawn t1", repo.work)
    assert res.code == 5 and "empty" in res.err, res
    assert path.read_bytes() == b""
    assert git(repo.work, "branch", "--list", "feat/*") == ""


def snapshot_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir()) if p.is_file() and p.name.startswith("bus.db")}


COMMANDS = [["status"], ["status", "--json"], ["spawn", "t2"], ["show", "t1"], ["approve", "t1"], ["merge", "t1"],
            ["start", "--task", "t1"], ["cancel", "t1"]]


def assert_refused_untouched(gw, work: Path, path: Path, needle: str) -> None:
    before = snapshot_files(path)
    for args in COMMANDS:
        res = gw(args, work)
        assert res.code == 5, (args, res)
        lines = res.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], (args, res)
        assert "Traceback" not in res.err
    assert snapshot_files(path) == before
    assert not (work.parent / "project.worktrees" / "t2").exists()
    assert "refs/heads/feat/t2" not in wk.branches(work)


def test_a_garbage_bus_is_exit_5_and_left_byte_for_byte(repo, gw, sh):
    wk.spawn(repo.work, "t1")
    path = bus_file(repo.work)
    for extra in path.parent.glob("bus.db-*"):
        extra.unlink()
    garbage = os.urandom(64) + b"this is not an sqlite database" * 200
    path.write_bytes(garbage)
    assert_refused_untouched(gw, repo.work, path, str(path))
    # the heartbeat fast path (no click) says the same
    res = sh(["git", "worker", "heartbeat"], wk.worktree_paths(repo.work).difference({str(repo.work)}).pop())
    assert res.code == 5 and res.err.startswith("error: ") and "Traceback" not in res.err, res
    assert path.read_bytes() == garbage


def test_a_damaged_bus_is_exit_5_and_left_byte_for_byte(repo, gw):
    wk.drive(repo.work, "t1", "WORKING")
    path = bus_file(repo.work)
    with closing(sqlite3.connect(path)) as conn:  # fold the WAL in so every page is in the main file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    assert len(data) > 4096 * 2
    page = 4096
    for offset in range(page, len(data), page):  # scribble over every page but the header page
        data[offset:offset + 64] = b"\xde\xad\xbe\xef" * 16
    path.write_bytes(bytes(data))
    assert_refused_untouched(gw, repo.work, path, "bus")


def test_a_bus_from_a_newer_git_nerve_is_refused(repo, gw):
    wk.spawn(repo.work, "t1")
    path = bus_file(repo.work)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert_refused_untouched(gw, repo.work, path, "newer than this git-nerve understands")


def test_a_bus_that_is_a_directory_is_exit_5(repo, gw):
    path = bus_file(repo.work)
    path.mkdir(parents=True)
    for args in (["status"], ["spawn", "t1"]):
        res = gw(args, repo.work)
        assert res.code == 5 and res.err.startswith("error: ") and len(res.err.strip().splitlines()) == 1, res
    assert path.is_dir() and not any(path.iterdir())
    assert wk.branches(repo.work) == {"refs/heads/main"}


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_bus_is_exit_5(repo, gw):
    wk.spawn(repo.work, "t1")
    path = bus_file(repo.work)
    before = path.read_bytes()
    path.chmod(0)
    try:
        res = gw("status", repo.work)
        assert res.code == 5 and "permission denied" in res.err, res
    finally:
        path.chmod(0o644)
    assert path.read_bytes() == before


def test_the_bus_on_a_network_filesystem_is_refused(repo, gw, monkeypatch, tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {repo.work} nfs4 rw 0 0\n")
    assert filesystem_type(repo.work / ".git", str(mounts)) == "nfs4"
    assert filesystem_type(tmp_path / "elsewhere", str(mounts)) == "ext4"
    from git_nerve import fs

    real = fs.filesystem_type
    monkeypatch.setattr(fs, "filesystem_type", lambda p, mounts_file=str(mounts): real(p, mounts_file))
    res = gw("spawn t1", repo.work)
    assert res.code == 5 and "network filesystem (nfs4)" in res.err, res
    assert not bus_file(repo.work).exists()
    assert wk.branches(repo.work) == {"refs/heads/main"}


def test_each_state_change_and_its_message_are_one_transaction(repo, gw, monkeypatch):
    """A failure while publishing the message rolls the state change back too."""
    wk.spawn(repo.work, "t1")
    from git_nerve.bus import messages

    real = messages.publish

    def failing(conn, task_id, kind, payload, ts):
        if kind == "heartbeat":
            raise sqlite3.OperationalError("disk I/O error")
        return real(conn, task_id, kind, payload, ts)

    monkeypatch.setattr(messages, "publish", failing)
    res = gw("start --task t1", repo.work)
    assert res.code == 5 and "disk I/O error" in res.err
    assert wk.state(repo.work, "t1") == "ASSIGNED"
    assert wk.kinds(repo.work, "t1") == ["task_assign"]

