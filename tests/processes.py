"""The process table without ``/proc``: POSIX ``ps`` (procps on Linux, the BSD ps of macOS), for test helpers
that must find a process they did not start themselves (a hook git runs, a command's background work)."""

from __future__ import annotations

import os
import subprocess
from typing import NamedTuple


class Process(NamedTuple):
    pid: int
    ppid: int
    state: str
    args: str


def table() -> list[Process]:
    """Every process (``-ww``: whole command lines, on both ps flavours)."""
    out = subprocess.run(["ps", "-A", "-ww", "-o", "pid=,ppid=,stat=,args="], capture_output=True, text=True,
                         check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            rows.append(Process(int(parts[0]), int(parts[1]), parts[2], parts[3] if len(parts) == 4 else ""))
    return rows


def descendants(pid: int, rows: list[Process] | None = None) -> list[Process]:
    """The processes below ``pid`` (children, their children, ...), zombies left out."""
    rows = table() if rows is None else rows
    found: list[Process] = []
    frontier = {pid}
    while frontier:
        below = [p for p in rows if p.ppid in frontier and p not in found]
        found += below
        frontier = {p.pid for p in below}
    return [p for p in found if not p.state.startswith("Z")]


def naming(path: str | os.PathLike[str], rows: list[Process] | None = None) -> list[Process]:
    """Live processes (not this one) whose command line names ``path`` or something below it."""
    rows = table() if rows is None else rows
    names = {os.fspath(path), os.path.realpath(path)}
    return [p for p in rows if p.pid != os.getpid() and not p.state.startswith("Z") and any(n in p.args for n in names)]
