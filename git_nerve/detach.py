"""Starting a git-nerve process that nobody waits for, floor 0 (standard library only).

The one way git-nerve starts ``python -m git_nerve.<module>`` detached: a new session (no terminal, no signal
from the command's process group), stdin from /dev/null, stdout and stderr appended to a log under
``<git-common-dir>/nerve/``, no inherited descriptors, this package first on PYTHONPATH (the child imports the
same git_nerve as its parent, wherever it was run from). The background sync (``shared/background.py``), the
radar's recompute (``radar/background.py``), the knowledge sync (``knowledge/trigger.py``) and the listener
(``listener.py``) use it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .fs import create_file, make_dirs


def start(module: str, args: list[str], *, cwd: str | os.PathLike[str], log: str | os.PathLike[str],
          env: dict[str, str]) -> subprocess.Popen:
    """Start ``python -m <module> <args>`` in ``cwd`` detached, its output appended to ``log``; ``env`` is the
    child's environment (the caller's, with git's location variables taken out), PYTHONPATH put in front.
    Raises OSError when it cannot start."""
    child = dict(env)
    root = str(Path(__file__).resolve().parents[1])
    child["PYTHONPATH"] = root + (os.pathsep + child["PYTHONPATH"] if child.get("PYTHONPATH") else "")
    make_dirs(Path(log).parent)
    out = create_file(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        return subprocess.Popen([sys.executable, "-m", module, *args], cwd=os.fspath(cwd), env=child,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                close_fds=True)
    finally:
        os.close(out)
