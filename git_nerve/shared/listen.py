"""Listening to the database (PostgreSQL backend, issue 29): a sync within a moment of another machine's change.

Every transition and every batch of published events rings the repository's channel (``pg_notify`` inside its
transaction, so at its commit; the payload only says which machine rang). :func:`serve` LISTENs on it, syncs
once, then blocks on the connection's socket until a ring: a burst of rings is one sync, a ring of this
machine's own wakes it without a sync. While nothing rings it wakes only every third of the lease, to note this
machine seen by the database's clock (its leases hold while it listens). A lost database is tried again after
1, 2, 4 ... up to 15 seconds; the first sync after the reconnect catches up on what it missed (the tables are
the log: nothing rung while away is lost).

Two callers: `git nerve sync --watch` (until interrupted) and each clone's listener (``git_nerve/listener.py``,
started by the commands themselves), which stops once :class:`Idle` says nothing here needs it: no live task
of this clone and no console open (:func:`console_open`) for ``[shared] listen_idle`` seconds. ``[shared]
listen = false`` turns the listener off (:func:`wanted`). Its files: ``<common>/nerve/locks/listen.lock`` (one
listener a clone; held while it runs), ``<common>/nerve/listen.log`` (its output), and the consoles' shared
lock ``<common>/nerve/locks/console-open.lock``.

No polling loop: nothing here looks at anything on a timer but the lease's beat and the idle deadline.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from collections.abc import Callable, Iterator

from .. import locks
from ..bus import workers
from ..errors import BusError, DatabaseError, NerveError, StoreMoved
from ..fs import file_id

LOG = "listen.log"
#: the local states of a task this clone works on (the listener stays while one is here)
LIVE = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")
#: seconds between reconnects to a lost database: the first, and the most (doubling in between)
BACKOFF = (1.0, 15.0)
#: a burst of rings within this many seconds of the first is one sync
BURST = 0.05


def lock_path(common_dir) -> Path:
    """The listener's lock: held by the one running for this clone."""
    return Path(common_dir) / "nerve" / "locks" / "listen.lock"


def console_lock(common_dir) -> Path:
    """Held (shared) by every `git nerve console` of this clone while it serves."""
    return Path(common_dir) / "nerve" / "locks" / "console-open.lock"


def wanted(common_dir) -> bool:
    """Should this clone have a listener: nerve.toml's [shared] says PostgreSQL and not ``listen = false``.
    Cheap (nerve.toml only, no git config); a broken nerve.toml is False (the command itself says why)."""
    from .config import table_of

    try:
        table = table_of(Path(common_dir))
    except NerveError:
        return False
    return table.get("backend") == "postgres" and table.get("listen", True) is True


def running(common_dir) -> bool:
    return locks.is_held(lock_path(common_dir))


@contextlib.contextmanager
def console_open(common_dir) -> Iterator[None]:
    """Mark a console of this clone open for the ``with`` block (the listener stays meanwhile)."""
    with locks.hold(console_lock(common_dir), timeout=5, what="the console mark", shared=True):
        yield


class Always:
    """`git nerve sync --watch`: listen until interrupted; wake every ``beat`` seconds to note this machine seen."""

    def __init__(self, beat: float):
        self.beat = beat

    def keep(self) -> bool:
        return True

    def wait(self) -> float:
        return self.beat


#: how often (seconds) the listener reads again which store this clone's configuration names
STORE_EVERY = 5.0


class Idle:
    """The listener's life: it goes on while this clone has a live task or an open console, and for ``idle``
    seconds (this machine's monotonic clock) after the last time it saw one; it ends at once when the clone is
    removed, or when its configuration names another store than the one it listens to (``store``: what names
    it now, read every :data:`STORE_EVERY` s; the next command starts a listener on the new one)."""

    def __init__(self, bus, common_dir, idle: float, beat: float, store: Callable[[], object] | None = None):
        self.bus, self.common_dir, self.idle, self.beat = bus, common_dir, idle, beat
        self.bus_id = file_id(bus.path)
        self.since = time.monotonic()
        self.store, self.store_at_start = store, store() if store is not None else None
        self.store_due = self.since + STORE_EVERY
        self.moved = False

    def busy(self) -> bool:
        if locks.is_held(console_lock(self.common_dir)):
            return True
        try:
            return bool(workers.all_workers(self.bus.conn, states=LIVE))
        except NerveError:
            return True  # cannot tell: stay

    def gone(self) -> bool:
        """The clone this listener serves was removed (its bus is no longer the file this listener opened, or
        not there at all: a process of the removed clone may have made its directories again): nothing is left
        to keep fresh (an open connection would otherwise keep reading the removed bus for good)."""
        return file_id(self.bus.path) != self.bus_id

    def keep(self) -> bool:
        if self.gone():
            return False
        now = time.monotonic()
        if self.store is not None and now >= self.store_due:
            self.store_due = now + STORE_EVERY
            if self.store() != self.store_at_start:
                self.moved = True
                return False
        if self.busy():
            self.since = now
        return now - self.since < self.idle

    def wait(self) -> float:
        left = self.idle - (time.monotonic() - self.since)
        every = STORE_EVERY if self.store is not None else self.beat
        return max(0.01, min(self.beat, every, left + 0.01))


def serve(state, bus, report: Callable[[dict], None], *, life=None) -> None:
    """LISTEN on the repository's channel and sync (``state.sync``) now and after each ring of another machine;
    ``report`` gets each sync's report or ``{"error": ...}``. Returns once ``life.keep()`` says so (never for
    :class:`Always`, the default)."""
    life = life or Always(state.config.lease / 3)
    delay = BACKOFF[0]
    while life.keep():
        try:
            with state.session("the view stays the cached one") as conn:
                conn.execute(f'LISTEN "{state.schema}"')  # (a schema name config.valid_schema allowed)
                report(state.sync(bus))
                delay = BACKOFF[0]
                _rings(state, conn, bus, report, life)
                return
        except StoreMoved as exc:  # the shared state moved to another store: nothing to listen to until a pull
            report({"error": exc.message})
            return
        except NerveError as exc:  # the database lost (DatabaseError), the bus or the sync lock busy: again soon
            if isinstance(exc, DatabaseError) and not isinstance(exc, BusError):  # `status` says its view is stale
                from .sync import note_failure

                note_failure(bus, exc.message, getattr(exc, "kind", None))
            report({"error": exc.message})
        time.sleep(min(delay, life.wait()))  # only while the database is lost
        delay = min(delay * 2, BACKOFF[1])


def _rings(state, conn, bus, report, life) -> None:
    """Block on the connection until a ring (or the next beat, or the idle deadline); a sync per burst of rings
    another machine rang. Returns when ``life`` is over."""
    beat_due = time.monotonic() + state.config.lease / 3
    while life.keep():
        rang = list(conn.notifies(timeout=max(0.01, min(life.wait(), beat_due - time.monotonic())), stop_after=1))
        if rang:
            rang += list(conn.notifies(timeout=BURST))  # a burst is one sync
            if any(_rung_by(n.payload) != state.machine for n in rang):
                report(state.sync(bus))
        if time.monotonic() >= beat_due:
            state.beat(conn)  # this machine is there, by the database's clock
            beat_due = time.monotonic() + state.config.lease / 3


def _rung_by(payload: str) -> str | None:
    import json

    try:
        d = json.loads(payload)
    except ValueError:
        return None
    return d.get("machine") if isinstance(d, dict) else None
