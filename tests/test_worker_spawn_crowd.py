"""Many workers at once (issue 27): a spawn in flight, held in the middle of its `git worktree add`, blocks no
other command, and what it is making is never touched by the leftover check of another command."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)

#: generous: alone each of these takes well under 0.5 s; behind a held spawn it would wait for ever
BOUND_S = 2.0


def _hold_checkouts(work: Path, tmp: Path) -> tuple[Path, Path]:
    """A smudge filter that stops every checkout of a file of the current main in the middle of its `git worktree
    add` (the admin dir still ``locked: initializing``) until ``release`` exists; ``held`` appears once it waits."""
    held, release = tmp / "held", tmp / "release"
    build.write(work, ".gitattributes", "*.py filter=hold\n")
    git(work, "add", ".gitattributes")
    git(work, "commit", "-q", "-m", "attributes")
    script = (f"touch {shlex.quote(str(held))}; while [ ! -e {shlex.quote(str(release))} ]; do sleep 0.05; done; cat")
    git(work, "config", "filter.hold.smudge", f"sh -c {shlex.quote(script)}")
    return held, release


def _timed(argv: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, env=dict(os.environ))
    return time.monotonic() - t0, proc


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_a_held_spawn_blocks_no_other_command(repo, tmp_path):
    work = repo.work
    before = git(work, "rev-parse", "HEAD")  # a base without the filter: spawns from it are never held
    for task in ("t1", "t2"):
        assert subprocess.run(["git", "worker", "spawn", task], cwd=work, capture_output=True).returncode == 0
    held, release = _hold_checkouts(work, tmp_path)
    spawn = subprocess.Popen(["git", "worker", "spawn", "slow"], cwd=work, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=dict(os.environ))
    try:
        _wait_for(held)
        admins = [a for a in (work / ".git" / "worktrees").iterdir()
                  if (a / "locked").is_file() and (a / "locked").read_text().strip() == "initializing"]
        assert len(admins) == 1, "the spawn is held in the middle of its `git worktree add`"
        wt1 = work.parent / f"{work.name}.worktrees" / "t1"
        for argv, cwd in ((["git", "worker", "start", "--task", "t1"], work), (["git", "worker", "heartbeat"], wt1),
                          (["git", "worker", "status", "--json"], work), (["git", "worker", "start", "--task", "t2"], work),
                          (["git", "worker", "spawn", "quick", "--from", before], work)):
            took, proc = _timed(argv, cwd)
            assert proc.returncode == 0, (argv, proc.stderr)
            assert took < BOUND_S, f"{' '.join(argv)} took {took:.2f} s behind a held spawn"
            assert "repaired" not in proc.stderr and "kept" not in proc.stderr, proc.stderr
        assert spawn.poll() is None, "the held spawn is still running"
        assert admins[0].is_dir() and (admins[0] / "locked").read_text().strip() == "initializing"
    finally:
        release.touch()
    out, err = spawn.communicate(timeout=60)
    assert spawn.returncode == 0, err
    slow = work.parent / f"{work.name}.worktrees" / "slow"
    # the held spawn's worktree was left alone: complete, clean, on its branch, with its row
    assert (slow / "src" / "app.py").read_text() == (work / "src" / "app.py").read_text()
    assert git(slow, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(slow, "symbolic-ref", "HEAD") == "refs/heads/feat/slow"
    assert wk.row(work, "slow").state == "ASSIGNED" and wk.row(work, "t1").state == "WORKING"
    assert wk.row(work, "quick").state == "ASSIGNED"
