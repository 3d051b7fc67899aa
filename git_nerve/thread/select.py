"""Which rounds of a thread to show within a budget (pure: no I/O).

The input is ``(round, size)`` pairs, newest first, exactly as
:func:`git_nerve.bus.rounds.sizes_backwards` yields them from the index. The
pairs are consumed lazily and the walk stops as soon as the budget is met, so
the work done depends on the budget, never on the thread's length.

The budget is measured in characters: a round's ``size`` is
``len(content) + len(json.dumps(metadata))`` (see
:func:`git_nerve.bus.rounds.round_size`), an approximation of what the
round costs in the printed view that does not depend on the rendering.

As the spec says, rounds are accumulated *until* the total reaches the
budget: a round is taken while the total so far is below the budget, so a
page may overrun the budget by its last round, and every page holds at least
one round (a round bigger than the whole budget is still shown; paging never
stalls).

Two modes:

* default: round 1, then the newest rounds going back; round 1 counts
  against the budget, and round 1 and the newest round are shown whatever
  the budget. The rounds between them that did not fit form one gap. What
  the page shows before the rounds (a task's briefing) is ``spent`` already:
  it is cut last, so rounds give way to it.
* ``before=N``: the rounds before ``N``, going back from ``N - 1``; round 1
  is taken only if the walk reaches it. The older rounds left form one gap.

Round ids are contiguous from 1 (the bus numbers them ``max + 1`` inside the
write transaction and never deletes one), so a gap's size is arithmetic and
needs no read. Each gap carries the ``--before`` value that loads it: the
round just after the gap.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Iterator

#: Characters of rounds shown by default (round 1 and the newest are shown whatever the budget).
DEFAULT_BUDGET = 8000


class Gap(namedtuple("Gap", "first last")):
    """Rounds ``first..last`` (inclusive) left out; ``--before {before}`` loads them. (Named tuples here and in
    :mod:`.format`: `git nerve thread` is an agent's hot path, and dataclasses cost it ~10 ms of imports.)"""

    __slots__ = ()

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    @property
    def before(self) -> int:
        return self.last + 1

    def as_dict(self) -> dict[str, int]:
        return {"from": self.first, "to": self.last, "count": self.count, "before": self.before}


class Selection(namedtuple("Selection", "rounds omitted")):
    """``rounds``: the chosen round ids, ascending; ``omitted``: the ranges left out (:class:`Gap`), ascending."""

    __slots__ = ()


EMPTY = Selection((), ())


def _check_budget(budget: int) -> None:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive number of characters, got {budget!r}")


def select_default(first_size: int | None, newest_first: Iterable[tuple[int, int]], budget: int,
                   spent: int = 0) -> Selection:
    """Round 1 plus the newest rounds, going back until the budget is reached.

    ``first_size`` is round 1's size (None for an empty thread);
    ``newest_first`` yields ``(round, size)`` for the thread's rounds, newest
    first (round 1 may be among them; it is skipped); ``spent``: the characters
    the page spends before its rounds (the task's briefing).
    """
    _check_budget(budget)
    if first_size is None:
        return EMPTY
    total = first_size + max(0, spent)
    tail: list[int] = []
    it: Iterator[tuple[int, int]] = iter(newest_first)
    for number, size in it:
        if number <= 1:
            break
        if tail and total >= budget:  # the newest round is shown whatever the budget
            break
        tail.append(number)
        total += size
    if not tail:
        return Selection((1,), ())
    oldest = tail[-1]
    gaps = (Gap(2, oldest - 1),) if oldest > 2 else ()
    return Selection((1, *reversed(tail)), gaps)


def select_before(before: int, newest_first: Iterable[tuple[int, int]], budget: int) -> Selection:
    """The rounds before ``before``, going back from ``before - 1`` until the budget is reached.

    ``newest_first`` yields ``(round, size)`` for rounds older than
    ``before``, newest first (any newer pair is skipped). ``before`` beyond
    the end of the thread starts from its newest round.
    """
    _check_budget(budget)
    if isinstance(before, bool) or not isinstance(before, int) or before < 1:
        raise ValueError(f"before must be a round id (1 or more), got {before!r}")
    total = 0
    chosen: list[int] = []
    for number, size in newest_first:
        if number >= before:
            continue
        if total >= budget:
            break
        chosen.append(number)
        total += size
    if not chosen:
        return EMPTY
    oldest = chosen[-1]
    gaps = (Gap(1, oldest - 1),) if oldest > 1 else ()
    return Selection(tuple(reversed(chosen)), gaps)
