"""What the conflict radar's tests share: commits that skip git-nerve's hooks (these tests drive the radar
themselves, or through the commands under test; the hook path has its own tests), spawned tasks, and the radar's
rounds in a task's thread."""

from __future__ import annotations

from pathlib import Path

from fixtures.repos.build import git, write
from git_nerve.bus import rounds
from git_nerve.bus.connection import Bus


def commit_file(root: Path, rel: str, text: str, message: str) -> None:
    """``rel`` written with ``text`` and committed in ``root``, without our hooks."""
    write(root, rel, text)
    git(root, "add", "--", rel)
    git(root, "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", message)


def spawn(gw, work: Path, task: str, *, describe: bool = True) -> Path:
    """``task`` spawned (described "work on TASK" when ``describe``); its worktree."""
    assert gw(["spawn", task, *(["-d", f"work on {task}"] if describe else [])], work).code == 0
    return work.parent / "project.worktrees" / task


def radar_rounds(work: Path, task: str) -> list[rounds.Round]:
    """The radar's rounds in ``task``'s thread, oldest first."""
    with Bus(work / ".git" / "nerve" / "bus.db") as bus:
        return rounds.of_role(bus.conn, task, "radar")
