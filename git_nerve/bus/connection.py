"""Opening the bus.

Connections run in autocommit mode (``isolation_level=None``): Python's own
transaction handling starts deferred transactions that lose updates under
concurrency. Every read-then-write goes through :meth:`Bus.write`, which
issues ``BEGIN IMMEDIATE`` (the write lock is taken before the read) and
retries when the lock cannot be had within the busy timeout. Callers must not
run git or any subprocess inside a write block.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path

from .. import faults, waits
from ..errors import BusBusy, BusError, DatabaseError
from ..filedoor import keep_or_remove
from . import driver
from ..fs import BUS_FILE, create_file, ensure_local_filesystem, make_dirs
from .schema import MIGRATIONS, SCHEMA_VERSION

BUSY_TIMEOUT_MS = 30_000
RETRIES = 8


_is_busy = driver.is_busy


def make_private_dir(path: Path) -> None:
    """mkdir -p honouring the umask, but never world-writable."""
    if path.is_dir():
        return
    try:
        make_dirs(path)
    except OSError as exc:
        raise DatabaseError(f"cannot create {path}: {exc.strerror or exc}") from exc


def _owners_only(directory: Path) -> None:
    """The nerve dir an older git-nerve made group-accessible (0775 in a `git init --shared=group` repository) made
    its owner's only, as a new one is made (fs.DIR_MODE): everything of ours inside is then out of other users'
    reach. Only by its owner; a file system that refuses (read-only) changes nothing."""
    try:
        st = os.stat(directory)
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(directory, st.st_mode & 0o7700)
    except OSError:
        pass


class Bus:
    """A connection to ``<git-common-dir>/nerve/bus.db``."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 busy_timeout: float = BUSY_TIMEOUT_MS / 1000, retries: int = RETRIES, ingest: bool = True):
        """``busy_timeout`` (seconds) and ``retries`` bound how long a locked bus is waited
        for; the hooks use a short wait so a locked bus cannot stall a commit.

        Opening the bus first ingests what the hook shims spooled (commits,
        merges, rewrites: :mod:`.spool`), so every reader sees every commit."""
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.retries = max(1, retries)
        began = time.monotonic()
        from .spool import box_spool

        #: inside an agent's box (issue 41) the bus is read-only: what is written goes to the box's spool
        self.boxed = box_spool() is not None
        self.conn = self._open_boxed() if self.boxed else self._open(create)
        if ingest and not self.boxed:
            from .spool import ingest_quietly

            ingest_quietly(self)
        waits.add("bus_open", time.monotonic() - began)

    # -- opening -----------------------------------------------------------
    def _open(self, create: bool) -> driver.Connection:
        # lexists: a dangling symlink is "something there", never a place to create a bus through
        exists = os.path.lexists(self.path)
        if not exists and not create:
            raise DatabaseError(f"no bus at {self.path}; run `git nerve init` or `git worker spawn` first")
        ensure_local_filesystem(self.path.parent)  # before anything is created there
        if not exists:
            make_private_dir(self.path.parent)
            self._create()
        self._refuse_foreign()
        if not os.access(self.path, os.R_OK):
            raise DatabaseError(f"cannot read the bus {self.path}: permission denied")
        for where in (self.path.parent, self.path):
            # WAL mode writes beside the database even to read it: say so instead of SQLite's
            # "unable to open database file"
            if not os.access(where, os.W_OK):
                raise DatabaseError(f"cannot use the bus {self.path}: {where} is read-only (a read-only file system or permissions)")
        _owners_only(self.path.parent)
        conn = self._connect(self.path)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            self._check_ours(conn)
            self._retry(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone())
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise DatabaseError(
                    f"the bus {self.path} has schema version {version}, newer than this git-nerve understands "
                    f"({SCHEMA_VERSION}); upgrade git-nerve"
                )
            if version < SCHEMA_VERSION:
                self._migrate(conn)
        except BusError as exc:
            conn.close()
            if not isinstance(exc.driver, sqlite3.DatabaseError):
                raise  # the bus's own verdict (a lock that stayed, from _retry)
            exc = exc.driver
            if _no_room(self.path.parent):
                # opening in WAL mode writes the -wal/-shm files beside it: on a full disk SQLite only says "disk I/O error"
                raise DatabaseError(f"cannot open the bus {self.path}: no space left on device ({exc}); it was left untouched") from exc
            raise DatabaseError(f"the bus {self.path} is unreadable ({exc}); it was left untouched") from exc
        except DatabaseError:
            conn.close()
            raise
        return conn

    def _open_boxed(self) -> driver.Connection:
        """The bus read-only, from inside an agent's box: no creation, no migration, no spool ingest (git-nerve
        outside the box holds it open meanwhile, so its WAL files exist for a read-only reader)."""
        if not os.path.isfile(self.path):
            raise DatabaseError(f"no bus at {self.path} (inside an agent's box the bus is read-only)")
        try:
            conn = driver.connect(self.path.absolute().as_uri() + "?mode=ro", uri=True, timeout=self.busy_timeout,
                                  isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            self._check_ours(conn)
        except (sqlite3.Error, BusError) as exc:
            raise DatabaseError(f"cannot read the bus {self.path} from inside the box: {exc}") from exc
        return conn

    def _connect(self, path: Path) -> driver.Connection:
        try:
            return driver.connect(path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise DatabaseError(f"cannot open the bus {path}: {exc}") from exc

    def _create(self) -> None:
        """Make a new bus where none exists, atomically: built and migrated in a temporary file,
        then hard-linked into place (which fails if a bus appeared meanwhile). A bus file is thus
        never empty or half-made, and an empty or foreign one can be refused instead of reused."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
        for stale in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            kept = keep_or_remove(stale, within=self.path.parent, kind="bus-build")
            if kept:  # a link or directory planted at our own name: never built through
                raise DatabaseError(f"cannot create the bus {self.path}: {kept}")
        try:
            os.close(create_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL))  # 0600: SQLite gives its WAL the same
            conn = self._connect(tmp)
            try:
                conn.execute("PRAGMA journal_mode=WAL").fetchone()
                self._migrate(conn)
            except BusError as exc:
                if exc.driver is None:
                    raise
                raise DatabaseError(f"cannot create the bus {self.path}: {exc.driver}") from exc
            finally:
                conn.close()  # the last connection folds the WAL into the file and removes it
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass  # a concurrent command created it first: use theirs
            except OSError as exc:
                raise DatabaseError(f"cannot create the bus {self.path}: {exc.strerror or exc}") from exc
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                keep_or_remove(leftover, within=self.path.parent, kind="bus-build")

    def _refuse_foreign(self) -> None:
        """DatabaseError (exit 5) when the bus path holds something that is not a bus: a symlink,
        an empty file (a crash or a full disk leaves one), a directory, or a file that is not SQLite.
        Nothing is written to it."""
        where = self.path
        if where.is_symlink():
            raise DatabaseError(
                f"the bus {where} is a symlink (to {os.readlink(where)}); refusing to use it. "
                "It was left untouched: replace it with the real bus file, or move it away to start a new bus"
            )
        # stat only, never open(): closing any descriptor of the database file would drop the POSIX
        # locks other connections of this process hold on it (SQLite's documented pitfall); SQLite
        # itself rejects a file that is not a database ("file is not a database")
        try:
            st = where.stat()
        except PermissionError:
            raise DatabaseError(f"cannot read the bus {where}: permission denied") from None
        except OSError as exc:
            raise DatabaseError(f"cannot read the bus {where}: {exc.strerror or exc}") from exc
        if stat.S_ISDIR(st.st_mode):
            raise DatabaseError(f"the bus {where} is a directory, not a database; it was left untouched")
        if st.st_size == 0:
            raise DatabaseError(
                f"the bus {where} is unreadable: empty (0 bytes: a crash or a full disk can leave one); every task's state is "
                "in it, so it was not replaced. Restore it from a backup, or move it away to start a new, empty bus"
            )

    def _check_ours(self, conn: driver.Connection) -> None:
        """A SQLite file without our schema (user_version 0 or no workers table) is someone else's."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        has_workers = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='workers'").fetchone()
        if version == 0 or not has_workers:
            raise DatabaseError(
                f"the bus {self.path} is unreadable: a SQLite database without git-nerve's schema (not ours); it was left "
                "untouched. Move it away to start a new bus"
            )

    def _migrate(self, conn: driver.Connection) -> None:
        def apply() -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                for number in range(version, SCHEMA_VERSION):
                    for statement in _split(MIGRATIONS[number]):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={number + 1}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        self._retry(apply)

    # -- transactions --------------------------------------------------------
    def _retry(self, fn):
        delay = 0.01
        for attempt in range(self.retries):
            try:
                return fn()
            except BusError as err:
                exc = err.driver
                if not isinstance(exc, sqlite3.OperationalError):
                    raise
                if not _is_busy(exc) or attempt == self.retries - 1:
                    if _is_busy(exc):
                        raise BusBusy(f"the bus {self.path} stayed locked by another process; try again") from exc
                    raise BusError(f"bus error: {exc}") from exc
                import random  # only when contended: the hooks import this module on every commit

                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)

    def write(self) -> "_Transaction":
        """``with bus.write() as conn:``, a ``BEGIN IMMEDIATE`` transaction: check-then-write is atomic inside it."""
        return _Transaction(self)

    def read(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        cur = self._retry(lambda: self.conn.execute(sql, params))
        return cur.fetchall()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Bus":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Transaction:
    """The context manager behind :meth:`Bus.write` (a class, not contextlib: the hook path avoids that import)."""

    __slots__ = ("bus",)

    def __init__(self, bus: Bus):
        self.bus = bus

    def __enter__(self) -> driver.Connection:
        conn = self.bus.conn
        began = time.monotonic()
        self.bus._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        waits.add("bus", time.monotonic() - began)
        return conn

    def __exit__(self, exc_type, exc, tb) -> bool:
        conn = self.bus.conn
        if exc_type is not None:
            conn.execute("ROLLBACK")
            return False
        try:
            if faults.point("bus.commit") == "sqlite-full":  # the driver's own words on a full disk
                raise driver.translate(sqlite3.OperationalError("database or disk is full"))
            conn.execute("COMMIT")
        except BusError as err:
            try:
                conn.execute("ROLLBACK")
            except BusError:
                pass
            raise DatabaseError(f"could not commit to the bus: {err.driver or err.message}") from err
        return False


def _split(script: str) -> list[str]:
    statements, buf = [], []
    for line in script.splitlines():
        stripped = line.split("--", 1)[0] if "--" in line else line
        buf.append(stripped)
        if stripped.rstrip().endswith(";"):
            stmt = "\n".join(buf).strip()
            if stmt.strip(";").strip():
                statements.append(stmt)
            buf = []
    tail = "\n".join(buf).strip()
    if tail:
        statements.append(tail)
    return statements


def open_bus(common_dir: str | os.PathLike[str], *, create: bool = True) -> Bus:
    """Open (creating and migrating if needed) the bus of a repository."""
    return Bus(Path(common_dir) / "nerve" / BUS_FILE, create=create)


def _no_room(directory: Path) -> bool:
    """True when the file system holding ``directory`` has (almost) no space left for us."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024
