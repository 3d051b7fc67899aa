"""The leftover check every command runs, with each admin dir listed once and the live tokens' markers listed
once (issue 27): what it finds and keeps is what it found before, among many worktrees and live commands."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import reliability_support as rs

from fixtures.repos import build

GW = "git-worker"


def _admin(wt: Path) -> Path:
    return Path(build.git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))


def test_among_many_worktrees_the_leftovers_of_one_are_still_named_and_the_others_untouched(remote_repo):
    """Twelve worktrees; in one a `git worktree add` stopped before it wrote its ``gitdir`` file, in another a
    person's git holds ``index.lock``: the next command names both (kept: no token of ours made them) and
    removes nothing."""
    work = remote_repo.work
    rs.run(["git-nerve", "init"], work)
    wts = []
    for i in range(12):
        wt = work.parent / "others" / f"wt{i}"
        build.git(work, "worktree", "add", "-q", "--detach", str(wt), "HEAD")
        wts.append(wt)
    unfinished = _admin(wts[3])
    (unfinished / "gitdir").unlink()  # killed before git wrote it (no `locked` either)
    persons_lock = _admin(wts[7]) / "index.lock"
    persons_lock.write_text("", encoding="utf-8")
    res = rs.run([GW, "spawn", "t1"], work)
    assert f"kept: {unfinished}: an unfinished `git worktree add`" in res.err, res.err
    assert f"kept: {os.path.realpath(persons_lock)}: a git lock file of another process" in res.err, res.err
    assert "repaired:" not in res.err, res.err
    assert unfinished.is_dir() and persons_lock.exists() and all(wt.is_dir() for wt in wts)


def test_every_live_commands_git_is_seen_and_a_dead_ones_is_judged_dead(repo):
    """Five live commands (their tokens held) each running a git child, and one dead one: the scan sees every
    live one's marker, so none of their locks could be taken for a leftover; the dead one is dead."""
    from git_nerve import liveness

    common = repo.work / ".git"
    alive = Path(liveness.alive_dir(common))
    alive.mkdir(parents=True, exist_ok=True)
    fds = []
    try:
        for i in range(6):
            ident = f"{990000 + i}-{i:x}"
            fd = os.open(alive / ident, os.O_RDWR | os.O_CREAT, 0o664)
            if i < 5:
                fcntl.flock(fd, fcntl.LOCK_EX)  # another open file: its lock is not ours to take
                fds.append(fd)
            else:
                os.close(fd)
            (alive / f"{ident}.1").write_text(json.dumps({"kind": "git", "git_dir": f"/wt/{i}", "add": None}))
        with liveness.scan(common) as sc:
            assert sorted(r["git_dir"] for r in sc.alive_records("git")) == [f"/wt/{i}" for i in range(5)]
            assert [r["git_dir"] for d in sc.dead for r, _ in d.records("git")] == ["/wt/5"]
    finally:
        for fd in fds:
            os.close(fd)
