"""A review or merge of another machine's task over the git remote (issue 36): what
:func:`git_nerve.shared.postgres_hold.hold` is on PostgreSQL, with the remote's compare-and-set for the row lock.

:func:`hold` reads the task's claim from the remote itself (git is the ground truth: never the mirror of the last
sync), judged as every claim is (:mod:`.vet`), and yields a :class:`Held` whose ``record`` says what the remote has.
Nothing is locked: every move is a push leased on the claim's tip this hold read (``--force-with-lease``), so of
two machines moving the claim at once exactly one lands and the other gets HeldElsewhere (exit 8) naming the
machine that moved it.

* :meth:`Held.move`: the claim moved alone (approve, request-changes, a merge's conflict, a merge found landed).
* :meth:`Held.ride`: the claim's move carried by the merge's own ``--atomic`` push of the integration branch, each
  ref leased on the value read (both land or neither); :meth:`Held.move` after the push landed records it,
  :meth:`Held.lost` after a rejected push reads the claim again (the caller judges whether another machine
  merged or sent it back meanwhile).

The holder keeps its row, worktree and thread: its next sync follows the claim (:mod:`git_nerve.bus.followed`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..bus.connection import Bus
from . import records


class Held:
    """A task's claim as the remote had it when read (``record``, at ``tip``), moved by compare-and-set."""

    def __init__(self, state, bus: Bus, task_id: str, tip: str | None, record: records.Record | None):
        self.state, self.bus, self.task_id, self.tip, self.record = state, bus, task_id, tip, record
        self.machine = state.machine
        self.moved = False
        self._riding = None

    def move(self, new: str, verb: str) -> records.Record:
        """The claim from its state as read to ``new`` by this machine, its holder unchanged. A move this hold's
        merge push carried (:meth:`ride`) is recorded (it landed with the push); any other is pushed alone,
        leased on the tip read: HeldElsewhere when another machine moved it first."""
        assert self.record is not None
        pending, self._riding = self._riding, None
        if pending is not None and (pending.record.state, pending.record.verb) == (new, verb):
            self.state.landed(self.bus, pending)
            self.tip, self.record, self.moved = pending.sha, pending.record, True
            return self.record
        self.state.claim(self.bus, self.task_id, self.record.state, new, verb, by_any=True)
        self._read()
        self.moved = True
        return self.record

    def ride(self, new: str, verb: str) -> tuple:
        """The claim's move to ``new`` as one more ref of the merge's atomic push (``also``); () when the claim
        records it already."""
        assert self.record is not None
        self._riding = self.state.prepare(self.task_id, self.record.state, new, verb, by_any=True)
        return (self._riding.update,) if self._riding is not None else ()

    def lost(self) -> bool:
        """The push carrying the claim was rejected: the claim read again; did it move meanwhile (another
        machine's merge or review; else only the integration branch moved: merge again on its new tip)?"""
        self._riding = None
        before = (self.tip, self.record)
        self._read()
        return (self.tip, self.record) != before

    def _read(self) -> None:
        ref = records.CLAIMS + self.task_id
        self.tip, _base, self.record = self.state._claim_now(ref, self.task_id, None, True)


@contextmanager
def hold(state, bus: Bus, task_id: str, verb: str) -> Iterator[Held]:
    """``task_id``'s claim as the remote has it now (see the module); the remote out of reach: GitError (exit 4),
    nothing moved. ``verb``: what the caller makes of it (the same signature as PostgreSQL's)."""
    held = Held(state, bus, task_id, None, None)
    held._read()
    yield held
