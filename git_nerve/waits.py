"""Where a command's wall time went, for bench/ (issue 27). Standard library only, nothing of git_nerve.

With ``NERVE_WAITS=<file>`` in the environment, a command appends one JSON line to that file as it exits: its
argv, its CPU seconds (its own, and the children it waited for: git), and what it waited for, by kind, in
seconds: each lock (:mod:`.locks`, by the lock file's first word: ``spawn``, ``add``, ``fetch``, ...), the bus's
write lock (``bus``: ``BEGIN IMMEDIATE`` and its retries), and the git children it ran (``git``: their wall time,
with ``git_n`` their count), and (Linux) how long it was runnable but waiting for a CPU. Otherwise :func:`add` is one dictionary lookup and nothing is written.
"""

from __future__ import annotations

import os

ENV = "NERVE_WAITS"
_FILE = os.environ.get(ENV) or None
_SPENT: dict[str, float] = {}


def on() -> bool:
    return _FILE is not None


def add(kind: str, seconds: float) -> None:
    """``seconds`` more spent on ``kind`` (recorded only under NERVE_WAITS)."""
    if _FILE is not None:
        _SPENT[kind] = _SPENT.get(kind, 0.0) + seconds


def _write() -> None:
    import json
    import sys

    t = os.times()
    line = json.dumps({"argv": sys.argv[1:], "pid": os.getpid(), "cpu_self": t.user + t.system,
                       "cpu_children": t.children_user + t.children_system, "spent": _SPENT, "runq": _runq()})
    try:
        fd = os.open(_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def _runq() -> float | None:
    """Seconds this process was runnable but waiting for a CPU (Linux's schedstat; None elsewhere)."""
    try:
        with open("/proc/self/schedstat", encoding="ascii") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


if _FILE is not None:
    import atexit

    atexit.register(_write)
