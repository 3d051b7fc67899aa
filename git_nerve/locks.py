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


def try_hold(path: str | os.PathLike[str]):
    """Non-blocking: a context manager that holds the lock, or None if another process has it."""
    try:
        cm = hold(path, timeout=0)
        cm.__enter__()
    except LockTimeout:
        return None
    return cm
