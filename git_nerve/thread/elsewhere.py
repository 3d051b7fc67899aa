"""The thread of a task another machine holds (shared mode, issue 24): read from the rounds its holder published,
as the last `git nerve sync` cached them (:mod:`git_nerve.bus.shared`), with the same selection, budget and pages
as the holder's own view. Posts to such a task travel the other way: see :func:`.service.post_anywhere`.
"""

from __future__ import annotations

from ..bus import rounds, workers
from ..bus import shared as shared_cache
from ..bus.driver import Connection
from .format import Briefing, ShownRound
from .select import Gap, select_before, select_default

_AFTER_ALL = 2**63 - 1


def elsewhere(conn: Connection, thread_id: str) -> str | None:
    """The machine holding ``thread_id`` when it is a task only another machine has (as the last sync saw it);
    None otherwise (a task of this machine, an unknown one, or no shared mode)."""
    if workers.get(conn, thread_id) is not None:
        return None
    c = shared_cache.claim(conn, thread_id)
    here = shared_cache.get_meta(conn, shared_cache.MACHINE)
    return c.owner if c is not None and here and c.owner != here else None


def held_view(conn: Connection, thread_id: str, machine: str, before: int | None,
              budget: int, spent: int = 0) -> tuple[tuple[ShownRound, ...], tuple[Gap, ...]]:
    """The rounds of ``thread_id`` that ``machine`` published, chosen as :func:`.service.view` chooses a local
    thread's: (the rounds shown, the gaps left). The holder's rounds of a thread are few enough to read whole."""
    known = shared_cache.foreign_rounds(conn, thread_id, machine)
    sizes = {n: rounds.round_size(r[3], r[2] or None) for n, r in known.items()}
    last = before if before is not None else _AFTER_ALL
    pairs = ((n, sizes[n]) for n in sorted(sizes, reverse=True) if n < last)
    if before is None:
        chosen = select_default(sizes.get(1), pairs, budget, spent)
    else:
        chosen = select_before(before, pairs, budget)
    shown = tuple(ShownRound(n, known[n][1], known[n][0], known[n][2], known[n][3]) for n in chosen.rounds)
    return shown, chosen.omitted


def held_briefing(conn: Connection, thread_id: str, machine: str, budget: int) -> Briefing | None:
    """The briefing of a task ``machine`` holds, as its holder shows it: what its spawn published (the last
    ``task_assign`` event: branch, base, worktree there, description), its claim's state; None when the cache has
    no such event (a spawn of an older git-nerve published no integration branch: shown without it)."""
    assign = None
    for e in shared_cache.events(conn, thread_id):
        if e[1] == machine and e[4] == "task_assign":
            assign = e[5]
    c = shared_cache.claim(conn, thread_id)
    if assign is None or c is None:
        return None
    return Briefing(thread_id, c.state, str(assign.get("description") or ""), assign.get("branch"), assign.get("base"),
                    assign.get("integration"), assign.get("worktree"), bool(assign.get("adopted"))).within(budget)
