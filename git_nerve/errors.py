"""Exit codes and the exception types that carry them.

Every user-facing failure is a :class:`NerveError` subclass. The CLI layer
prints ``error: <message>`` on one line and exits with ``exc.exit_code``.
This module imports only the standard library: hooks and the heartbeat path
load it.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    FAILURE = 1  # a command that ran and reports failure (e.g. a workflow that ended unsuccessfully)
    USAGE = 2  # bad input or usage
    INVALID_TRANSITION = 3
    GIT = 4
    DATABASE = 5
    CONFLICT = 6
    CHECK_FAILED = 7  # `merge --check CMD` exited non-zero, or a pre-push hook refused merge's push: nothing moved
    HELD_ELSEWHERE = 8  # shared mode: another machine holds the task or moved it first; nothing changed here
    REFUSED = 9  # the door for destruction kept what it could not prove git-nerve's (filedoor.Refused): nothing removed
    INTERRUPTED = 130


class NerveError(Exception):
    """Base class: a failure the user should see as one clear line."""

    exit_code: ExitCode = ExitCode.FAILURE

    def __init__(self, message: str, *, details: list[str] | None = None):
        super().__init__(message)
        self.message = message
        #: extra lines printed after the error line (e.g. resolution steps)
        self.details = list(details or [])


class UsageError(NerveError):
    exit_code = ExitCode.USAGE


class InvalidTransition(NerveError):
    exit_code = ExitCode.INVALID_TRANSITION


class GitError(NerveError):
    exit_code = ExitCode.GIT


class DatabaseError(NerveError):
    exit_code = ExitCode.DATABASE


class BusError(DatabaseError):
    """The bus's database driver failed: ``bus/`` raises this in place of the driver's own error (kept as
    ``driver`` and as ``__cause__``), so nothing above the bus handles sqlite3. Exit 5, like every database
    failure; its message is the one users saw before (``bus error: <the driver's words>``)."""

    def __init__(self, message: str, *, driver: BaseException | None = None, details: list[str] | None = None):
        super().__init__(message, details=details)
        #: the driver's error when this one translates it (None: the bus's own verdict, e.g. a lock that stayed)
        self.driver = driver


class BusBusy(BusError):
    """The bus stayed locked by another process."""


class ConflictError(NerveError):
    exit_code = ExitCode.CONFLICT

    def __init__(self, message: str, *, files: list[str] | None = None, details: list[str] | None = None):
        super().__init__(message, details=details)
        self.files = list(files or [])


class CheckFailed(NerveError):
    exit_code = ExitCode.CHECK_FAILED


class HeldElsewhere(NerveError):
    """Shared mode: the remote's compare-and-set went to another machine (it names it); nothing changed here."""

    exit_code = ExitCode.HELD_ELSEWHERE


class StoreMoved(UsageError):
    """Shared mode: the repository's shared state moved to another store (`git nerve init --shared X --move`)
    and this clone's nerve.toml still names the old one: exit 2 (its configuration is out of date); nothing
    changed here."""
