"""The process table without ``/proc``: POSIX ``ps`` (procps on Linux, the BSD ps of macOS), for test helpers
that must find a process they did not start themselves (a hook git runs, a command's background work)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
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


# -- hiding /proc (what macOS looks like) ---------------------------------------------------------------------

#: run "$@" with an empty tmpfs over /proc (in a private mount namespace: nothing outside it sees the change)
_HIDE = 'mount -t tmpfs none /proc && exec "$@"'
#: the same, first binding the real /proc at "$1" for the ps shim (see :func:`without_proc`)
_HIDE_KEEPING = 'mount --bind /proc "$1" && mount -t tmpfs none /proc && shift && exec "$@"'


def _unshare() -> tuple[list[str] | None, str]:
    """The prefix that makes a private mount namespace we may mount in, or None and why not."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "unshare(1) is not installed (util-linux): no private mount namespace to hide /proc in"
    prefix = [unshare, "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix.append("--map-root-user")  # an unprivileged user namespace owns the mount namespace
    probe = subprocess.run([*prefix, "sh", "-c", _HIDE, "sh", "test", "!", "-e", "/proc/self"], capture_output=True,
                           text=True, check=False)
    if probe.returncode != 0:
        return None, f"this kernel refuses a private mount namespace hiding /proc ({' '.join(prefix)}: " \
                     f"{probe.stderr.strip() or probe.returncode})"
    return prefix, ""


def without_proc(argv: list[str], work: Path, *, ps: bool = False) -> list[str]:
    """``argv`` run where /proc is empty, as on macOS; skips the test (saying why) only where this OS cannot.

    ``ps=True``: a ``ps`` that still answers, as macOS's does from the kernel: a shim first on PATH runs the real
    ps in a namespace of its own where the real /proc (bound under ``work``) is back. Without it, Linux's ps
    fails like anything else that needs /proc. Where there is no /proc at all (macOS) ``argv`` runs as it is."""
    if not os.path.isdir("/proc/self"):
        return list(argv)
    prefix, why = _unshare()
    if prefix is None:
        import pytest  # here only: bench/reliability imports this module without pytest

        pytest.skip(why)
    if not ps:
        return [*prefix, "sh", "-c", _HIDE, "sh", *argv]
    real_ps = shutil.which("ps")
    assert real_ps is not None, "ps is not installed: tests/processes.py needs it"
    real = work / "real-proc"
    shims = work / "shims"
    real.mkdir(parents=True, exist_ok=True)
    shims.mkdir(exist_ok=True)
    shim = shims / "ps"
    inner = [a for a in prefix if a != "--map-root-user"]  # already root of the namespace (and uid_map is hidden)
    shim.write_text(f"#!/bin/sh\nexec {shlex.join(inner)} sh -c 'mount --bind \"$0\" /proc && exec \"$@\"' "
                    f"{shlex.quote(str(real))} {shlex.quote(real_ps)} \"$@\"\n", encoding="utf-8")
    shim.chmod(0o755)
    return [*prefix, "sh", "-c", _HIDE_KEEPING, "sh", str(real), "env", f"PATH={shims}{os.pathsep}{os.environ['PATH']}",
            *argv]
