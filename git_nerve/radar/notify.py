"""Telling the agents: a new conflict becomes a ``radar`` round in both tasks' threads and a
notice the next hook message prints on the agent's terminal (``<git-dir>/nerve/radar-notice``)."""

from __future__ import annotations

import os
from pathlib import Path

from .. import clock
from ..bus import messages, rounds
from ..bus import workers as bus_workers
from ..errors import GitError
from ..git import worktrees
from ..paths import create_file, make_dirs
from .cache import INTEGRATION
from .scan import Pair

NOTICE = "radar-notice"


def describe(pair: Pair, me: str, integration: str | None) -> str:
    other = pair.b if pair.a == me else pair.a
    who = f"the integration branch ({integration or 'integration'})" if other == INTEGRATION else f"task {other}"
    parts = []
    for f in pair.files:
        lines = pair.conflicts.get(f)
        if f in pair.conflicts:
            where = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in lines) if lines and me == pair.a else ""
            parts.append(f"{f} (lines {where})" if where else f"{f} (conflict)")
    return f"your work conflicts with {who}: {', '.join(parts) or ', '.join(pair.files)}"


def notice_path(worktree: Path) -> Path:
    return worktrees.git_dir_of(worktree) / "nerve" / NOTICE


def tell(repo, pairs: list[Pair], integration: str | None) -> int:
    """Record each new conflict for the tasks it involves; the number of tasks told."""
    told = 0
    for pair in pairs:
        for me in (pair.a, pair.b):
            if me == INTEGRATION:
                continue
            text = describe(pair, me, integration)
            other = pair.b if pair.a == me else pair.a
            meta = {"radar": "conflict", "with": other, "files": pair.files}
            with repo.bus.write() as conn:
                rounds.append(conn, me, role="radar", content=text + "; see `git worker conflicts`", metadata=meta, ts=clock.now())
                messages.publish(conn, me, "radar", {"with": other, "files": pair.files}, clock.now())
            w = bus_workers.get(repo.bus.conn, me)
            if w is not None and w.worktree and Path(w.worktree).is_dir():
                try:
                    path = notice_path(Path(w.worktree))
                    make_dirs(path.parent)
                    fd = create_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
                    with os.fdopen(fd, "a", encoding="utf-8") as fh:
                        fh.write(f"git-nerve radar: {text}\n")
                except (OSError, GitError):
                    pass
            told += 1
    return told


def take_notice(git_dir: str | os.PathLike[str]) -> str:
    """The pending notice for the worktree whose git dir is ``git_dir``, removed as it is read."""
    path = Path(git_dir) / "nerve" / NOTICE
    claimed = path.with_name(f"{NOTICE}.{os.getpid()}")
    try:
        os.replace(path, claimed)
    except FileNotFoundError:
        return ""
    try:
        return claimed.read_text(encoding="utf-8")
    finally:
        claimed.unlink(missing_ok=True)


__all__ = ["NOTICE", "describe", "take_notice", "tell"]
