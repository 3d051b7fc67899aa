"""Whether a clone gets a warm reader, and its start (issue 27).

A clone gets one only when it is worth a process: ``[worker] warm`` in nerve.toml is not ``false``, ``NERVE_WARM``
is not ``0``, and the bus has at least :data:`THRESHOLD` live tasks (a person with one task never gets a
background process). The command that found none (:mod:`.client` says so) answers itself first, then calls
:func:`after_direct` (and so does a spawn, :func:`after_spawn`: the polls after a burst of spawns are served from the
first), which starts the server detached (:mod:`git_nerve.detach`) at the caller's priority (it
answers commands someone waits for), unless one runs (its lock, ``<common>/nerve/locks/warm.lock``) or something
that is not a socket sits at ``<common>/nerve/warm.sock`` (kept: no server then, every command answers itself).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .client import ENV_OFF, socket_path

MODULE = "git_nerve.warm_server"
#: the server's output (a line when it starts and when it stops, and why)
LOG = "warm.log"
#: live tasks on the clone from which a server is started
THRESHOLD = 4
#: the states of a live task (as the listener counts them: shared/listen.LIVE)
LIVE = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")
#: seconds without a request after which the server stops; ``NERVE_WARM_IDLE`` (read by the server) overrides
IDLE = 300.0
ENV_IDLE = "NERVE_WARM_IDLE"


def lock_path(common_dir) -> Path:
    """Held by the clone's one server while it runs ("is it alive" = this lock)."""
    return Path(common_dir) / "nerve" / "locks" / "warm.lock"


def bus_path(common_dir) -> Path:
    return Path(common_dir) / "nerve" / "bus.db"


def enabled(common_dir) -> bool:
    """``[worker] warm`` of the main checkout's nerve.toml is not false (only ``true`` or missing keeps it on: a
    value that is no boolean turns it off), and the environment does not say ``NERVE_WARM=0``."""
    from ..errors import NerveError
    from ..nerve_toml import read

    if os.environ.get(ENV_OFF) == "0":
        return False
    common = Path(common_dir)
    main = common.parent if common.name == ".git" else common
    try:
        table = (read(main) or {}).get("worker", {})
    except NerveError:
        return False  # a broken nerve.toml: the command says why; no server meanwhile
    return isinstance(table, dict) and table.get("warm", True) is True


def live_tasks(common_dir) -> int:
    """How many live tasks the bus has (a read-only look: no ingest, never creates the bus)."""
    from ..bus.peek import tasks

    return sum(1 for _, state, _ in tasks(bus_path(common_dir)) if state in LIVE)


def after_direct(common_dir: str) -> bool:
    """The command answered itself because no server listens for its clone: start one when it is worth it and none
    runs. Never fails the command, never waits for the server; True when one was started."""
    from .. import detach, locks
    from ..git.cli import clean_env

    try:
        path = socket_path(common_dir)
        if path is None or locks.is_held(lock_path(common_dir)) or _planted(path):
            return False
        if not enabled(common_dir) or live_tasks(common_dir) < THRESHOLD:
            return False
        detach.start(MODULE, ["--common", os.fspath(common_dir)], cwd=common_dir,
                     log=Path(common_dir) / "nerve" / LOG, env=clean_env(), niceness=None)
    except Exception:  # noqa: BLE001 - a server is an optimisation: the command's answer stands
        return False
    return True


def after_spawn() -> bool:
    """A spawn that left the clone with :data:`THRESHOLD` live tasks or more starts its warm reader when none runs,
    so that the `status --json` polls which follow a burst of spawns are answered warm from the first. Never fails
    the spawn; True when one was started."""
    from .client import UNUSUAL

    if os.environ.get(ENV_OFF) == "0" or any(v in os.environ for v in UNUSUAL):
        return False
    from ..dotgit import locate

    found = locate()
    return found is not None and after_direct(found[1])


def _planted(path: str) -> bool:
    """Something that is not a socket, or another user's socket, sits at the socket's name (kept, and no server
    runs)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid()
