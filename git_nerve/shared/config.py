"""Is this repository in shared mode, through which remote, and what is this machine called.

``nerve.toml`` (committed, so every clone takes part once it ran `git nerve init`)::

    [shared]
    backend = "git"        # "local" (or no table): one machine, the SQLite bus alone; "postgres": PostgreSQL
    remote = "nerve"       # optional: a separate coordination remote (default: nerve.remote, else origin)
    schema = "nerve_x_1a2b3c"  # postgres: this repository's namespace in the database (several share one)
    lease = 600            # optional: seconds a holder's log may stay still before its tasks can be taken over
    background = true      # optional: each transition starts a sync in the background (publishes its events)
    takeover = "manual"    # optional: "idle" / "auto": `git nerve sync` takes over tasks whose holder's lease ran out
    poll_min = 2           # optional: `git nerve sync --watch` on the git remote asks it at most this often (s)...
    poll_max = 200         # ...and at least this often (default and most: a third of the lease; :mod:`.poll`)
    listen = true          # postgres: each clone runs a listener (LISTEN/NOTIFY) that keeps its view fresh
    listen_idle = 600      # ...which stops after this many seconds without a live task here or an open console

A machine's name: ``git config nerve.machine``, else the host name. The PostgreSQL backend's connection is
each machine's own (``git config nerve.database`` or ``NERVE_DATABASE_URL``: never in a committed file), read
when it connects (:mod:`.postgres`).
"""

from __future__ import annotations

from dataclasses import dataclass
import os
import re
from pathlib import Path

from .. import nerve_toml
from ..errors import UsageError
from ..git import config as gitconfig

BACKENDS = ("local", "git", "postgres")
#: ``[shared] takeover``: manual (only `git worker takeover`), idle (a sync takes over the tasks nobody works on:
#: ASSIGNED, IN_REVIEW, APPROVED), auto (a sync takes over every live task, WORKING and CONFLICTED too)
TAKEOVER = ("manual", "idle", "auto")
#: the PostgreSQL backend's namespace when nerve.toml names none
DEFAULT_SCHEMA = "nerve"
_SCHEMA = r"^[a-z_][a-z0-9_]{0,62}$"  # re.match compiles it when a schema is read


@dataclass(frozen=True)
class SharedConfig:
    backend: str
    remote: str | None
    machine: str
    #: where repository-wide git commands run (the main checkout, else the common dir)
    cwd: Path
    common_dir: Path
    lease: float = 600.0
    background: bool = True
    takeover: str = "manual"
    #: the PostgreSQL backend: this repository's schema in the database
    schema: str | None = None
    #: `git nerve sync --watch` on the git remote: the shortest and longest wait between two looks (seconds)
    poll_min: float = 2.0
    poll_max: float = 200.0
    #: the PostgreSQL backend: run the per-clone listener (:mod:`.listen`), and how long it stays idle
    listen: bool = True
    listen_idle: float = 600.0


def _home(common_dir: Path) -> Path | None:
    """The checkout whose nerve.toml holds for the repository at ``common_dir``: its main checkout
    (:func:`git_nerve.dotgit.main_checkout`), else, where that cannot be told (a linked worktree of a git dir kept
    apart with ``--separate-git-dir``), the checkout the command stands in, whose own copy
    :func:`git_nerve.nerve_toml.locate` reads then; None when neither (a bare repository)."""
    from ..dotgit import locate, main_checkout

    main = main_checkout(common_dir)
    if main is not None:
        return main
    here = locate()
    if here is not None and os.path.realpath(here[1]) == os.path.realpath(common_dir):
        return Path(here[2])
    return None


def load(common_dir: Path) -> SharedConfig:
    """The shared-mode settings of the repository at ``common_dir`` (``backend="local"`` when it has none)."""
    common_dir = Path(common_dir)
    main = _home(common_dir)
    cwd = main if main is not None and main.is_dir() else common_dir
    table = _table(main) if main is not None else {}
    backend = table.get("backend", "local")
    if backend not in BACKENDS:
        raise UsageError(f"nerve.toml [shared] backend = {backend!r} is not one of {', '.join(BACKENDS)}")
    if backend == "local":
        return SharedConfig("local", None, "", cwd, common_dir)
    remote = table.get("remote") or _git_config(cwd, "nerve.remote") or "origin"
    if not isinstance(remote, str):
        raise UsageError("nerve.toml [shared] remote must be the name of a git remote")
    lease = table.get("lease", 600)
    if isinstance(lease, bool) or not isinstance(lease, (int, float)) or lease <= 0:
        raise UsageError("nerve.toml [shared] lease must be a number of seconds above 0")
    background = table.get("background", True)
    if not isinstance(background, bool):
        raise UsageError("nerve.toml [shared] background must be true or false")
    takeover = table.get("takeover", "manual")
    if takeover not in TAKEOVER:
        raise UsageError(f"nerve.toml [shared] takeover = {takeover!r} is not one of {', '.join(TAKEOVER)}")
    schema = None
    if backend == "postgres":
        schema = table.get("schema", DEFAULT_SCHEMA)
        if not isinstance(schema, str) or not valid_schema(schema):
            raise UsageError("nerve.toml [shared] schema must be a PostgreSQL schema name (lower-case letters, digits, "
                             "'_'; at most 63; not starting with a digit)")
    poll_min, poll_max = _polling(table, float(lease))
    listen = table.get("listen", True)
    if not isinstance(listen, bool):
        raise UsageError("nerve.toml [shared] listen must be true or false")
    return SharedConfig(backend, remote, machine(cwd), cwd, common_dir, float(lease), background, takeover, schema,
                        poll_min, poll_max, listen, _seconds(table, "listen_idle", 600.0))


def _polling(table: dict, lease: float) -> tuple[float, float]:
    """``[shared] poll_min`` / ``poll_max``: 0 < poll_min <= poll_max <= a third of the lease (a watching
    machine must look, and so beat, within every third of it for its leases to hold). Defaults: 2 s (less
    when poll_max is) and a third of the lease."""
    third = lease / 3
    high = _seconds(table, "poll_max", third)
    low = _seconds(table, "poll_min", min(2.0, high))
    if not low <= high <= third:
        raise UsageError(f"nerve.toml [shared] needs poll_min ({low:g}) <= poll_max ({high:g}) <= a third of the lease "
                         f"({third:g} s), so that a watching machine's leases hold")
    return low, high


def _seconds(table: dict, key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise UsageError(f"nerve.toml [shared] {key} must be a number of seconds above 0")
    return float(value)


def valid_schema(name: str) -> bool:
    return bool(re.match(_SCHEMA, name)) and not name.startswith("pg_")


def machine(cwd) -> str:
    """This machine's name: ``git config nerve.machine``, else the host name (made fit for a ref name)."""
    import socket  # here: only shared mode names the machine (`status` of a one-machine repository never does)

    from . import records

    configured = _git_config(cwd, "nerve.machine")
    if configured:
        if not records.valid_machine(configured):
            raise UsageError(f"git config nerve.machine={configured!r} is not a usable machine name "
                             "(lower-case letters, digits, '.', '_', '-'; at most 63)")
        return configured
    return records.machine_name(socket.gethostname())


def _git_config(cwd, key: str) -> str | None:
    return (gitconfig.get_value(cwd, key) or "").strip() or None


def table_of(common_dir: Path) -> dict:
    """nerve.toml's ``[shared]`` table of the repository at ``common_dir`` as written (no git config read, no
    validation: :func:`load` validates), {} without one."""
    main = _home(Path(common_dir))
    return _table(main) if main is not None else {}


def table_of_checkout(main: Path) -> dict:
    """nerve.toml's ``[shared]`` table in the main checkout ``main`` as written ({} without one, or unreadable)."""
    try:
        return _table(main)
    except UsageError:
        return {}


def _table(main: Path) -> dict:
    try:
        data = nerve_toml.read(main) or {}
    except UsageError:
        raw = b""
        try:
            raw = nerve_toml.locate(main).read_bytes()
        except OSError:
            pass
        if b"[shared]" in raw:
            raise
        return {}  # a broken nerve.toml without [shared]: its own feature says so; this stays single-machine
    table = data.get("shared") or {}
    if not isinstance(table, dict):
        raise UsageError("nerve.toml [shared] must be a table")
    return table
