"""Telling the agents: a new conflict becomes a ``radar`` round in both tasks' threads and a
notice the next hook message prints on the agent's terminal (:mod:`.notice`)."""

from __future__ import annotations

from pathlib import Path

from .. import clock
from ..bus import messages, rounds
from ..bus import workers as bus_workers
from ..errors import GitError
from ..git import worktrees
from . import notice
from .cache import INTEGRATION
from .scan import Pair

def describe(pair: Pair, me: str, integration: str | None) -> str:
    other = pair.b if pair.a == me else pair.a
    who = f"the integration branch ({integration or 'integration'})" if other == INTEGRATION else f"task {other}"
    if pair.machine is not None and other == pair.b:
        who += f" (on machine {pair.machine})"
    parts = []
    for f in pair.files:
        lines = pair.conflicts.get(f)
        if f in pair.conflicts:
            where = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in lines) if lines and me == pair.a else ""
            parts.append(f"{f} (lines {where})" if where else f"{f} (conflict)")
    return f"your work conflicts with {who}: {', '.join(parts) or ', '.join(pair.files)}"


def tell(repo, pairs: list[Pair], integration: str | None) -> int:
    """Record each new conflict for the tasks it involves; the number of tasks told."""
    told = 0
    for pair in pairs:
        for me in (pair.a, pair.b):
            if me == INTEGRATION or (me == pair.b and pair.machine is not None):
                continue  # another machine's task: its holder's radar tells it
            text = describe(pair, me, integration)
            other = pair.b if pair.a == me else pair.a
            meta = {"radar": "conflict", "with": other, "files": pair.files}
            with repo.bus.write() as conn:
                rounds.append(conn, me, role="radar", content=text + "; see `git worker conflicts`", metadata=meta, ts=clock.now())
                messages.publish(conn, me, "radar", {"with": other, "files": pair.files}, clock.now())
            w = bus_workers.get(repo.bus.conn, me)
            if w is not None and w.worktree and Path(w.worktree).is_dir():
                try:
                    notice.add(worktrees.git_dir_of(Path(w.worktree)), f"git-nerve radar: {text}")
                except (OSError, GitError):
                    pass
            told += 1
    return told


__all__ = ["describe", "tell"]
