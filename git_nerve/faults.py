"""Fault injection points for the reliability tests. Standard library only.

A command calls :func:`point` at the moments where a crash would hurt most
(a worktree made but no bus row yet, a merge published but not recorded,
...). Normally that is one dictionary lookup. With ``NERVE_FAULT=<name>`` in
the environment, the process dies at the point of that name:

* ``NERVE_FAULT=<name>`` kills the process with SIGKILL, as ``kill -9``
  would (no ``finally`` block, no atexit, no rollback of ours runs);
* ``NERVE_FAULT=<name>:enospc`` raises ``OSError(ENOSPC)`` there instead,
  and ``NERVE_FAULT=<name>:sqlite-full`` makes :func:`point` return
  ``"sqlite-full"``, where the bus (the only caller that asks) raises the error
  SQLite raises on a full disk, so a test can simulate a full disk without
  filling one.

The suites in ``tests/test_reliability_faults.py`` and ``bench/reliability``
list the points and check that rerunning the killed command converges.
"""

from __future__ import annotations

import os

ENV = "NERVE_FAULT"


def point(name: str) -> str | None:
    """Die here (or raise the configured error, or return ``"sqlite-full"``) when ``NERVE_FAULT`` names this
    point; None otherwise."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return None
    target, _, action = wanted.partition(":")
    if target != name:
        return None
    if action == "enospc":
        import errno

        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if action == "sqlite-full":
        return action
    import signal  # here: every command imports this module, few ever die in it

    os.kill(os.getpid(), signal.SIGKILL)
