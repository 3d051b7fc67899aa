"""done's and merge's push and their claim as one step on PostgreSQL (:meth:`.postgres.PostgresState.prepare_with_push`,
``landed``, ``lost``, the hooks the lifecycle calls around its push).

Before the push, one transaction locks the task's claim row (``SELECT ... FOR UPDATE``, waiting at most the
session's ``lock_timeout``), judges it as every transition is judged, and stays open, the row locked, while
git pushes. The push landed: the transition is made in that same transaction and committed (its COMMIT losing
the connection says the outcome is unknown, a rerun safe). The push failed: the transaction is rolled back
(the connection closed), nothing changed. A takeover or any other transition of the task meanwhile waits for
the row, then sees the new state and is refused (or, after a failed push, goes on): the branch on the remote
and the claim never disagree. A command killed while it pushes leaves the claim as it was (the server rolls
back a transaction whose connection went); its rerun pushes (already there) and records the transition.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

from ..bus import shared as cache
from ..bus.connection import Bus
from . import postgres_move, postgres_schema, records
from . import postgres_sql as sql
from .judge import already, refusal


@dataclass
class Held:
    """The claim row of ``task`` locked by an open transaction on ``conn`` while the command pushes."""

    stack: ExitStack
    conn: object
    where: str
    task: str
    expected: str | None
    new: str
    verb: str
    current: records.Record

    def __del__(self):
        """A command that neither reported the push landed nor lost (an error raised between): the row is
        released with the object (the connection closed, the transaction rolled back), never held on."""
        try:
            self.stack.close()
        except Exception:
            pass


def hold(state, task_id: str, expected: str | None, new: str, verb: str) -> Held | None:
    """Lock and judge the claim (see the module); None when there is nothing to hold (no claim yet, or it
    records this transition already: the command's own claim runs as usual); HeldElsewhere when it forbids."""
    unchanged = f"nothing changed here ({task_id} is still {expected}; nothing pushed)"
    stack = ExitStack()
    try:
        conn = stack.enter_context(state.session(unchanged))
        where = postgres_schema.where(state.url())
        with postgres_schema.failing(where, unchanged):
            conn.execute("BEGIN")
            postgres_move.refuse_moved(conn)
            row = conn.execute(f"SELECT {sql.CLAIM_COLUMNS} FROM claims WHERE task_id = %s FOR UPDATE",
                               (task_id,)).fetchone()
        current = sql.record(row) if row else None
        if current is None or already(current, new, verb, state.machine):
            stack.close()
            return None
        refused = refusal(task_id, current, expected, False, state.machine)
        if refused is not None:
            raise refused
        return Held(stack, conn, where, task_id, expected, new, verb, current)
    except BaseException:
        stack.close()  # the connection closed: the server rolls the transaction back
        raise


def landed(state, bus: Bus, held: Held) -> None:
    """The push landed: the transition in the transaction that held the row, committed; the cache follows."""
    rerun = f"the push landed; run the command again to record {held.task}'s {held.verb}"
    try:
        with postgres_schema.failing(held.where, rerun):
            rec = sql.move(held.conn, held.task, held.current, held.expected, held.new, held.verb, state.machine, False)
            sql.seen(held.conn, state.machine)
            postgres_schema.commit(held.conn, held.where, f"{held.task}'s {held.verb}")
    finally:
        held.stack.close()
    with bus.write() as c:
        cache.ensure(c)
        cache.put_claim(c, sql.cached(rec))
        cache.set_meta(c, cache.MACHINE, state.machine)
    if state.config.background:  # publish this transition's messages (and what the hooks queued) soon
        from .background import spawn

        spawn(state.config.common_dir, state.cwd)


def lost(held: Held) -> None:
    """The push failed (for its own reason: the row was held meanwhile): rolled back, nothing changed."""
    held.stack.close()
