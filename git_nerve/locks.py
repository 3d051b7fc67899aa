"""Inter-process locks on ``flock(2)``. Standard library only.

The kernel releases an flock when the holding process dies, however it dies,
so a lock left by a ``kill -9`` can never be waited on: the next taker gets
it at once. (filelock gives the same semantics but imports asyncio, 50-90 ms
measured here, which the spawn and hook paths cannot afford.)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from pathlib import Path
from collections.abc import Iterator

from .errors import ExitCode, NerveError
from . import waits
from .fs import create_file, make_dirs


class LockTimeout(NerveError):
    """A lock another process holds (exit 4, as for git's own lock files a running process holds)."""

    exit_code = ExitCode.GIT


def holder(path: str | os.PathLike[str]) -> int | None:
    """The pid the holder of the lock at ``path`` wrote into it (the last one that held it), or None."""
    try:
        text = Path(path).read_text(encoding="ascii").strip()
    except (OSError, ValueError):
        return None
    return int(text) if text.isdigit() else None


@contextlib.contextmanager
def hold(path: str | os.PathLike[str], *, timeout: float | None = 600.0, what: str = "lock",
         shared: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block.

    ``timeout=0`` tries once and raises :class:`LockTimeout` if it is held;
    ``None`` waits for ever. ``shared``: a shared lock (many holders; "something of this kind runs").
    """
    p = Path(path)
    make_dirs(p.parent)
    fd = create_file(p, os.O_RDWR | os.O_CREAT)
    try:
        began = time.monotonic()
        deadline = None if timeout is None else began + timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                waits.add(f"lock:{p.stem.split('-')[0]}", time.monotonic() - began)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                if deadline is not None and time.monotonic() >= deadline:
                    pid = holder(p)
                    raise LockTimeout(f"{what} is held by another process ({f'pid {pid}, ' if pid else ''}{p}); "
                                      "try again") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        if not shared:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def is_held(path: str | os.PathLike[str]) -> bool:
    """Some live process holds ``path`` (shared or exclusive) right now. Creates nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)  # releases the probe's lock at once
    return False


def try_hold(path: str | os.PathLike[str], *, handed: int | None = None):
    """Non-blocking: a context manager that holds the lock, or None if another process has it. ``handed``: a
    descriptor the starter of this process took with :func:`take` and passed on: when it holds the lock on
    ``path``, this process holds it from then on (the manager closes it), and nothing else is tried."""
    if handed is not None and _holds(handed, path):
        name_holder(handed, os.getpid())
        return contextlib.closing(_Fd(handed))
    try:
        cm = hold(path, timeout=0)
        cm.__enter__()
    except LockTimeout:
        return None
    return cm


def take(path: str | os.PathLike[str]) -> int | None:
    """Non-blocking: an open descriptor holding the exclusive lock on ``path`` (created if missing), or None when
    another process holds it. The flock belongs to the open file, which a child started with the descriptor
    (``pass_fds``) shares: how a starter hands a lock to the process it starts (:func:`try_hold` ``handed``), so
    the lock is held from the moment the start returns. The caller closes its own copy once the child has it."""
    p = Path(path)
    make_dirs(p.parent)
    fd = create_file(p, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


def name_holder(fd: int, pid: int) -> None:
    """Write ``pid`` into the lock file open at ``fd`` (what :func:`holder` reads)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{pid}\n".encode(), 0)


def _holds(fd: int, path) -> bool:
    """``fd`` is the lock file at ``path`` and its open file holds the exclusive lock (taking it again through
    the same open file succeeds at once; another holder's lock refuses it)."""
    try:
        st, there = os.fstat(fd), os.stat(path)
        if (st.st_dev, st.st_ino) != (there.st_dev, there.st_ino):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    os.set_inheritable(fd, False)
    return True


class _Fd:
    def __init__(self, fd: int):
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)  # releases the flock (no other process has the open file any more)
