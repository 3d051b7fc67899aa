"""The bus's database driver (the standard library's sqlite3), wrapped so that its errors never leave ``bus/``.

Every bus connection is a :class:`Connection`: ``execute`` / ``executemany`` / ``executescript`` and its cursors'
``fetch*`` and iteration turn a ``sqlite3.Error`` into :class:`..errors.BusError` (:class:`..errors.BusBusy` when
the database is locked), with the driver's error kept as ``driver`` and ``__cause__``. The message is
``bus error: <the driver's words>``, what the commands printed before (exit 5).
"""

from __future__ import annotations

import sqlite3

from ..errors import BusBusy, BusError

#: what the features name in their annotations (they never import sqlite3)
Row = tuple


def is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return "locked" in msg or "busy" in msg


def translate(exc: sqlite3.Error) -> BusError:
    cls = BusBusy if isinstance(exc, sqlite3.OperationalError) and is_busy(exc) else BusError
    return cls(f"bus error: {exc}", driver=exc)


def as_nerve_error(exc: BaseException) -> BusError | None:
    """A driver error that reached a command from outside a bus connection (the knowledge index's own
    database), translated; None for anything else."""
    return translate(exc) if isinstance(exc, sqlite3.Error) else None


class Cursor(sqlite3.Cursor):
    def _failed(self, exc: sqlite3.Error) -> BusError:
        """The translated error, this cursor closed first: the traceback keeps the cursor, and a cursor that still
        held its statement would keep the connection open after ``close()`` (and its WAL files on disk)."""
        try:
            self.close()
        except sqlite3.Error:
            pass
        return translate(exc)

    def _call(self, method, *args, **kw):
        try:
            return method(*args, **kw)
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc

    def execute(self, *args):
        return self._call(super().execute, *args)

    def executemany(self, *args):
        return self._call(super().executemany, *args)

    def executescript(self, *args):
        return self._call(super().executescript, *args)

    def fetchone(self):
        return self._call(super().fetchone)

    def fetchmany(self, *args, **kw):
        return self._call(super().fetchmany, *args, **kw)

    def fetchall(self):
        return self._call(super().fetchall)

    def __next__(self):
        return self._call(super().__next__)


class Connection(sqlite3.Connection):
    def cursor(self, factory=Cursor):
        return super().cursor(factory)

    # through a Cursor of ours (sqlite3's own execute makes a plain cursor), so fetching translates too
    def _cursor(self) -> Cursor:
        try:
            return self.cursor()
        except sqlite3.Error as exc:  # e.g. a closed connection
            raise translate(exc) from exc

    def execute(self, *args):
        return self._cursor().execute(*args)

    def executemany(self, *args):
        return self._cursor().executemany(*args)

    def executescript(self, *args):
        return self._cursor().executescript(*args)


def connect(path, **kw) -> Connection:
    """``sqlite3.connect`` whose connection translates its errors; an error opening it is raw (the caller,
    :class:`.connection.Bus`, says which file could not be opened)."""
    return sqlite3.connect(path, factory=Connection, **kw)  # type: ignore[return-value]


__all__ = ["Connection", "Cursor", "Row", "as_nerve_error", "connect", "is_busy", "translate"]
