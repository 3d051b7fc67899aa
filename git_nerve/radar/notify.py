"""Telling the agents: a new conflict becomes a ``radar`` round in both tasks' threads (which of the agent's own
lines, with which task) and a notice the next hook message prints on the agent's terminal (:mod:`.notice`); a
conflict that is gone becomes a short ``resolved`` round in the threads that were told of it, and its pending
notice is withdrawn. A task no longer live is never named as a live conflict."""

from __future__ import annotations

from pathlib import Path

from .. import clock
from ..bus import messages, rounds
from ..bus import workers as bus_workers
from ..errors import GitError, NerveError
from ..git import worktrees
from . import notice
from .cache import INTEGRATION
from .scan import LIVE, Pair


def _spans(ranges) -> str:
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)


def describe(pair: Pair, me: str, integration: str | None, mine: dict | None = None) -> str:
    """The round's text for ``me``; ``mine``: the conflicting line ranges in ``me``'s own files (default: the
    pair's, numbered in its first side's files)."""
    other = pair.b if pair.a == me else pair.a
    who = f"the integration branch ({integration or 'integration'})" if other == INTEGRATION else f"task {other}"
    if pair.machine is not None and other == pair.b:
        who += f" (on machine {pair.machine})"
    ranges = mine if mine is not None else (pair.conflicts if me == pair.a else {})
    parts = []
    for f in pair.files:
        if f in pair.conflicts:
            where = _spans(ranges.get(f) or [])
            parts.append(f"{f} (your lines {where})" if where else f"{f} (conflict)")
    return f"your work conflicts with {who}: {', '.join(parts) or ', '.join(pair.files)}"


def _mine(repo, me: str, other: str) -> dict | None:
    """``me``'s own conflicting line ranges against the task ``other`` (the pair's second side: its lines are
    numbered in the other task's files), from the radar's last result; None when they cannot be told."""
    from . import flags

    try:
        found = flags.for_task(repo.paths.common_dir, me)
    except (NerveError, OSError, ValueError, KeyError):
        return None
    out: dict[str, list[tuple[int, int]]] = {}
    for path, lines in found.items():
        for n in sorted(x["line"] for x in lines if x["task"] == other):
            spans = out.setdefault(path, [])
            if spans and spans[-1][1] + 1 >= n:
                spans[-1] = (spans[-1][0], n)
            else:
                spans.append((n, n))
    return out


def _live(repo, task: str) -> bool:
    w = bus_workers.get(repo.bus.conn, task)
    return w is not None and w.state in LIVE


def _notice_dir(repo, task: str) -> Path | None:
    w = bus_workers.get(repo.bus.conn, task)
    if w is None or not w.worktree or not Path(w.worktree).is_dir():
        return None
    try:
        return worktrees.git_dir_of(Path(w.worktree))
    except GitError:
        return None


def tell(repo, pairs: list[Pair], integration: str | None) -> int:
    """Record each new conflict for the tasks it involves; the number of tasks told. A pair one of whose tasks
    finished since it was computed is told to nobody."""
    told = 0
    for pair in pairs:
        if not all(t == INTEGRATION or (t == pair.b and pair.machine is not None) or _live(repo, t)
                   for t in (pair.a, pair.b)):
            continue
        for me in (pair.a, pair.b):
            if me == INTEGRATION or (me == pair.b and pair.machine is not None):
                continue  # another machine's task: its holder's radar tells it
            other = pair.b if pair.a == me else pair.a
            text = describe(pair, me, integration, None if me == pair.a else _mine(repo, me, other))
            meta = {"radar": "conflict", "with": other, "files": pair.files}
            with repo.bus.write() as conn:
                rounds.append(conn, me, role="radar", content=text + "; see `git worker conflicts`", metadata=meta, ts=clock.now())
                messages.publish(conn, me, "radar", {"with": other, "files": pair.files}, clock.now())
            where = _notice_dir(repo, me)
            if where is not None:
                try:
                    notice.add(where, f"git-nerve radar: {text}")
                except OSError:
                    pass
            told += 1
    return told


def resolved(repo, pairs: list[Pair], integration: str | None) -> int:
    """A ``resolved`` round for each live task of each conflict gone whose thread was told of it last (its latest
    radar round about the other side says conflict); its pending notice about the other side is withdrawn. The
    number of rounds written."""
    told = 0
    for pair in pairs:
        for me in (pair.a, pair.b):
            if me == INTEGRATION or (me == pair.b and pair.machine is not None) or not _live(repo, me):
                continue
            other = pair.b if pair.a == me else pair.a
            where = _notice_dir(repo, me)
            if where is not None:
                notice.withdraw(where, ("conflicts with the integration branch (",) if other == INTEGRATION
                                else (f"conflicts with task {other}:", f"conflicts with task {other} ("))
            about = [r for r in rounds.of_role(repo.bus.conn, me, "radar") if r.metadata.get("with") == other]
            if not about or about[-1].metadata.get("radar") != "conflict":
                continue
            w = bus_workers.get(repo.bus.conn, other)
            who = (f"the integration branch ({integration or 'integration'})" if other == INTEGRATION
                   else f"task {other}" + (f" (now {w.state})" if w is not None and w.state not in LIVE else ""))
            text = f"resolved: your work no longer conflicts with {who}"
            meta = {"radar": "resolved", "with": other, "files": pair.files}
            with repo.bus.write() as conn:
                rounds.append(conn, me, role="radar", content=text, metadata=meta, ts=clock.now())
            told += 1
    return told


def after(repo, result) -> int:
    """What a recompute (a :class:`~.scan.Scan`) has to tell: the conflicts it found gone, then its new ones."""
    return resolved(repo, result.resolved, result.integration) + tell(repo, result.new_conflicts, result.integration)


__all__ = ["after", "describe", "resolved", "tell"]
