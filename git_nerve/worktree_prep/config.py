"""``[worktree]`` in nerve.toml: what a new task's worktree is given (include, clone_dirs, setup, ports)
and the caps on live worktrees. One clear line for a bad value."""

from __future__ import annotations

from dataclasses import dataclass, field
import os
import shlex
from pathlib import Path

from .. import nerve_toml
from ..errors import UsageError

DEFAULT_PORTS = (20000, 30000)  # [start, end): NERVE_PORT blocks are taken from here
DEFAULT_BLOCK = 10
DISK_TTL = 60.0  # seconds a measured disk_bytes is reused


@dataclass(frozen=True)
class PrepConfig:
    include: tuple[str, ...] = ()
    clone_dirs: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()  # argv (shlex-split; never a shell)
    port_range: tuple[int, int] = DEFAULT_PORTS
    port_block: int = DEFAULT_BLOCK
    max_live: int | None = None
    max_total_bytes: int | None = None
    disk_ttl: float = DISK_TTL
    source: str = field(default="", compare=False)


def load(toplevel: str | os.PathLike[str]) -> PrepConfig:
    """The ``[worktree]`` table of the nerve.toml that holds for ``toplevel`` (defaults when there is none)."""
    data = nerve_toml.read(toplevel) or {}
    table = data.get("worktree", {})
    where = f"{nerve_toml.locate(toplevel)} [worktree]"
    if not isinstance(table, dict):
        raise UsageError(f"{where}: must be a table")
    unknown = set(table) - {"include", "clone_dirs", "setup", "port_range", "port_block", "max_live",
                            "max_total_bytes", "disk_ttl"}
    if unknown:
        raise UsageError(f"{where}: unknown setting {sorted(unknown)[0]!r}")
    setup = table.get("setup", "")
    if not isinstance(setup, str):
        raise UsageError(f"{where}: setup must be a string (a command, split like a shell does; write "
                         "`sh -c '...'` for a shell)")
    try:
        argv = tuple(shlex.split(setup))
    except ValueError as exc:
        raise UsageError(f"{where}: setup cannot be split into words: {exc}") from None
    lo, hi = _port_range(where, table.get("port_range", list(DEFAULT_PORTS)))
    return PrepConfig(
        include=_strings(where, "include", table.get("include", [])),
        clone_dirs=_strings(where, "clone_dirs", table.get("clone_dirs", [])),
        setup=argv, port_range=(lo, hi),
        port_block=_int(where, "port_block", table.get("port_block", DEFAULT_BLOCK), minimum=1),
        max_live=_optional_int(where, "max_live", table.get("max_live")),
        max_total_bytes=_optional_int(where, "max_total_bytes", table.get("max_total_bytes")),
        disk_ttl=float(_int(where, "disk_ttl", table.get("disk_ttl", int(DISK_TTL)), minimum=0)),
        source=where,
    )


def _strings(where: str, key: str, value) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _int(where: str, key: str, value, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{where}: {key} must be an integer >= {minimum}")
    return value


def _optional_int(where: str, key: str, value) -> int | None:
    return None if value is None else _int(where, key, value, minimum=0)


def _port_range(where: str, value) -> tuple[int, int]:
    if (not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                                                   for v in value)
            or not 1 <= value[0] < value[1] <= 65536):
        raise UsageError(f"{where}: port_range must be [first, end) with 1 <= first < end <= 65536")
    return value[0], value[1]
