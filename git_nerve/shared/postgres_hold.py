"""A claim row of the PostgreSQL backend held locked across a merge (issue 29: review and merge across machines).

A merge moves two things that must not disagree: the integration branch on the git remote and the task's claim.
:func:`hold` locks the claim row (``SELECT ... FOR UPDATE``, waiting at most :data:`HOLD_WAIT` seconds: another
machine's merge of the task is either over by then or reported as under way) in a transaction that stays open
while the merge is built and pushed; the claim's move is made in that transaction and committed when the
``with`` ends, after the push landed. An error inside (a lost push, a refused hook) rolls it back: nothing
moved. A second machine merging the same task waits on the row, then finds it COMPLETED and changes nothing.

:func:`hold_next` is the merge queue across machines: the oldest APPROVED claim of any machine that no other
transaction holds (``FOR UPDATE SKIP LOCKED LIMIT 1``), so machines running `merge --all` at once each take a
different task and none waits behind another's.

While a hold is open, :meth:`PostgresState.claim` of that task in this process (the lifecycle's own transition
of a task of this machine) moves the row inside the hold's transaction (:func:`holding`), never in a second
connection that would wait on the first. Nothing here touches this machine's ``machines`` row: other processes
of the machine keep marking it seen meanwhile.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..bus import shared as cache
from ..bus.connection import Bus
from ..errors import DatabaseError, HeldElsewhere
from . import postgres_move
from . import postgres_sql as pgsql
from . import records
from .judge import already, refusal

#: seconds a hold waits for another machine's hold of the same claim row (a merge under way there)
HOLD_WAIT = 20.0

_HELD: dict[tuple[str, str], "Held"] = {}


class Held:
    """A claim row locked by this process: its record as locked, moved by :meth:`move` / :meth:`claim`."""

    def __init__(self, conn, task_id: str, record: records.Record | None, machine: str):
        self.conn, self.task_id, self.record, self.machine = conn, task_id, record, machine
        self.moved = False

    def move(self, new: str, verb: str) -> records.Record:
        """Move the locked row from its state to ``new`` by this machine, its holder unchanged (a review or merge
        of another machine's task); the row is locked, so the compare-and-set cannot lose."""
        assert self.record is not None
        rec = pgsql.move(self.conn, self.task_id, self.record, self.record.state, new, verb, self.machine, False)
        if rec is None:  # (cannot happen while the row is locked)
            raise DatabaseError(f"the claim of {self.task_id} moved while it was locked; nothing changed here")
        self.record, self.moved = rec, True
        return rec

    def ride(self, new: str, verb: str) -> tuple:
        """Nothing rides the merge's push here (the git remote's :meth:`.gitremote_hold.Held.ride`): the row stays
        locked across it, and :meth:`move` after the push landed is committed when the hold ends."""
        return ()

    def claim(self, bus: Bus, expected: str | None, new: str, verb: str) -> None:
        """:meth:`PostgresState.claim` of the held task: judged as every claim is, moved inside the hold."""
        current = self.record
        if current is not None and already(current, new, verb, self.machine):
            return
        refused = refusal(self.task_id, current, expected, False, self.machine)
        if refused is not None:
            raise refused
        self.move(new, verb)
        _put(bus, self.record, self.machine)  # the cache says it at once (the commit follows at the hold's end)


def holding(schema: str, task_id: str) -> Held | None:
    """The hold this process has open on ``task_id``'s claim, if any."""
    return _HELD.get((schema, task_id))


@contextmanager
def hold(state, bus: Bus, task_id: str, verb: str) -> Iterator[Held]:
    """``task_id``'s claim locked until the ``with`` ends (committed then; rolled back by an error that came
    before the claim moved). Re-entrant: a hold this process has open on the task already is that one."""
    existing = holding(state.schema, task_id)
    if existing is not None:
        yield existing
        return
    busy = HeldElsewhere(f"task {task_id} is being moved by another machine right now (a merge there held its "
                         f"claim for over {HOLD_WAIT:.0f} s); nothing changed here ({verb} {task_id} again to see "
                         "how it ended)")
    sql = f"SELECT {pgsql.CLAIM_COLUMNS} FROM claims WHERE task_id = %s FOR UPDATE"
    unchanged = (f"the claim of {task_id} did not move (run it again: a merge that was pushed is found on the remote "
                 "and recorded)")
    with _held(state, bus, sql, (task_id,), unchanged, busy) as held:
        yield held


@contextmanager
def hold_next(state, bus: Bus, skip: list[str]) -> Iterator[Held | None]:
    """The next APPROVED claim (approval order) no other transaction holds, locked; None when none is left."""
    sql = (f"SELECT {pgsql.CLAIM_COLUMNS} FROM claims WHERE state = 'APPROVED' AND NOT (task_id = ANY(%s)) "
           "ORDER BY at, task_id FOR UPDATE SKIP LOCKED LIMIT 1")
    with _held(state, bus, sql, (list(skip),), "nothing was merged", None) as held:
        yield held if held.record is not None else None


@contextmanager
def _held(state, bus: Bus, sql: str, args: tuple, unchanged: str, busy) -> Iterator[Held]:
    with state.session(unchanged, busy=busy) as conn:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = '{int(HOLD_WAIT * 1000)}ms'")
            postgres_move.refuse_moved(conn)  # a clone whose nerve.toml still names this store after a move
            row = conn.execute(sql, args).fetchone()
            held = Held(conn, row[0] if row else "", pgsql.record(row) if row else None, state.machine)
            key = (state.schema, held.task_id) if row else None
            if key is not None:
                _HELD[key] = held
            error = None
            try:
                yield held
            except BaseException as exc:  # a move made before the error stays (as an unheld claim would)
                if not held.moved:
                    raise
                error = exc
            finally:
                if key is not None:
                    _HELD.pop(key, None)
    if held.moved:  # committed: the cache says so, and the other machines hear of it
        _put(bus, held.record, state.machine)
        if state.config.background:
            from .background import spawn

            spawn(state.config.common_dir, state.cwd)
    if error is not None:
        raise error


def _put(bus: Bus, rec: records.Record | None, machine: str) -> None:
    if rec is None:
        return
    with bus.write() as c:
        cache.ensure(c)
        cache.put_claim(c, pgsql.cached(rec))
        cache.set_meta(c, cache.MACHINE, machine)
