"""Starting a git-nerve process that nobody waits for, floor 0 (standard library only).

The one way git-nerve starts ``python -m git_nerve.<module>`` detached: a new session (no terminal, no signal
from the command's process group), stdin from /dev/null, stdout and stderr appended to a log under
``<git-common-dir>/nerve/``, no inherited descriptors, this package first on PYTHONPATH (the child imports the
same git_nerve as its parent, wherever it was run from), at a lower priority (``nice``, :data:`BACKGROUND_NICENESS`):
on a machine whose cores are all busy with agents, the agents' own short commands (start, heartbeat, status,
done) get a CPU before work that nobody waits on. The background sync (``shared/background.py``), the
radar's recompute (``radar/background.py``), the knowledge sync (``knowledge/trigger.py``) and the listener
(``listener.py``) use it; so does the warm reader (``warm/start.py``), at the caller's priority: it answers
commands someone waits for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .fs import create_file, make_dirs


#: the niceness of work nobody waits on (the radar's recompute, the knowledge sync, the listener, the background
#: sync; the post-commit hook's background part, hooks/run.py)
BACKGROUND_NICENESS = 10


def lower_priority(niceness: int) -> list[str]:
    """The ``nice -n K`` that runs a command at ``niceness`` (POSIX ``nice``, on macOS too), or nothing when this
    process already runs at that niceness or lower priority, or when ``nice`` is not on PATH. Absolute, not added
    on: work started by work already lowered is not lowered again."""
    inc = niceness - os.nice(0)
    found = _on_path("nice") if inc > 0 else None
    return [found, "-n", str(inc)] if found else []


def _on_path(name: str) -> str | None:
    """``shutil.which(name)`` for a plain name, without importing shutil (and its compression modules) into
    every spawn (start-up); only absolute directories of PATH (never the current one: an agent's worktree)."""
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isabs(d):
            continue
        candidate = os.path.join(d, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def lower_own_priority(niceness: int = BACKGROUND_NICENESS) -> None:
    """Run this process at ``niceness`` (no-op when it already runs at that or lower priority)."""
    try:
        inc = niceness - os.nice(0)
        if inc > 0:
            os.nice(inc)
    except OSError:
        pass


def start(module: str, args: list[str], *, cwd: str | os.PathLike[str], log: str | os.PathLike[str],
          env: dict[str, str], niceness: int | None = BACKGROUND_NICENESS,
          pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """Start ``python -m <module> <args>`` in ``cwd`` detached, its output appended to ``log``; ``env`` is the
    child's environment (the caller's, with git's location variables taken out), PYTHONPATH put in front.
    ``niceness``: the priority it runs at (:func:`lower_priority`); None: the caller's (the warm reader, which
    answers commands someone waits for). ``pass_fds``: the only descriptors it inherits (a lock handed to it:
    :func:`git_nerve.locks.take`). Raises OSError when it cannot start."""
    child = dict(env)
    root = str(Path(__file__).resolve().parents[1])
    child["PYTHONPATH"] = root + (os.pathsep + child["PYTHONPATH"] if child.get("PYTHONPATH") else "")
    make_dirs(Path(log).parent)
    out = create_file(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        nice = lower_priority(niceness) if niceness is not None else []
        argv = [*nice, sys.executable, "-m", module, *args]
        return subprocess.Popen(argv, cwd=os.fspath(cwd), env=child, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=out, start_new_session=True, close_fds=True, pass_fds=pass_fds)
    finally:
        os.close(out)
