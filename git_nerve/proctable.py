"""The process table, for process control only: a process's group, parent, name and state (a zombie or not), and
which processes carry a marker in their environment.

Two sources, one answer: ``/proc`` where it is mounted (Linux: exact, and no child process started), else
``ps`` (macOS and the BSDs, where ps asks the kernel; ``-E``/``e`` adds the environment). Where neither answers
(Linux with no /proc mounted, or no ps installed) every question here says "cannot tell" (None), and each caller
takes the safe side of it. Nothing here decides what to keep or remove on disk: that is :mod:`git_nerve.liveness`
(tokens, no /proc at all). Callers: the agent-helper sweep and the group stop (``workflow/adapters/process.py``),
the zombie check of ``git nerve knowledge status``, the notes hook's walk up to the agent CLI.

Standard library only, and subprocess only when ps is asked (the notes hook, a hot path, imports it).
"""

from __future__ import annotations

import os
import sys
from collections import namedtuple

TYPE_CHECKING = False  # typing costs the notes hook more than its walk (issue 27): these names for readers only
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

PROC = "/proc"


class Proc(namedtuple("Proc", "pid ppid pgid state name")):
    """pid, parent, process group (ints); ``state``: the letter(s) as the source gives them (a zombie's starts
    with "Z"); ``name``: the command's name (/proc's and ps's ``comm``)."""

    __slots__ = ()

    @property
    def zombie(self) -> bool:
        return self.state.startswith("Z")


def mounted() -> bool:
    """True when /proc is there to read (Linux); else ps is asked."""
    return os.path.isdir(f"{PROC}/self")


# -- /proc ---------------------------------------------------------------------------------------------------


def _proc_stat(pid: int | str) -> Proc | None:
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as fh:
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    lp, rp = data.find("("), data.rfind(")")
    fields = data[rp + 2:].split()
    try:
        return Proc(int(pid), int(fields[1]), int(fields[2]), fields[0], data[lp + 1:rp])
    except (IndexError, ValueError):
        return None


def _proc_rows() -> Iterator[Proc] | None:
    """/proc's processes, read one by one as they are asked for (a caller that finds its answer stops early)."""
    try:
        entries = os.listdir(PROC)
    except OSError:
        return None
    found = (_proc_stat(e) for e in entries if e.isdigit())
    return (p for p in found if p is not None)


def _proc_carrying(entry: bytes) -> list[int] | None:
    try:
        entries = os.listdir(PROC)
    except OSError:
        return None
    pids = []
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"{PROC}/{e}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        if entry in environ.split(b"\0"):
            pids.append(int(e))
    return pids


# -- ps ------------------------------------------------------------------------------------------------------


def _ps(args: list[str]) -> str | None:
    """ps's output, or None when it cannot answer (not installed, or Linux's procps with no /proc mounted)."""
    import subprocess  # only where there is no /proc: the notes hook's start stays light

    try:
        # an environment of its own: ps lists itself, and must not carry a marker of ours (see carrying)
        proc = subprocess.run(["ps", *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                              check=False, env={"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0 and not proc.stdout.strip():
        return None  # also `ps -p <pid>` of no such process: for one pid, "no such process" and "cannot tell" agree
    return proc.stdout.decode("utf-8", "replace")


def _ps_rows(args: list[str]) -> list[Proc] | None:
    out = _ps(["-o", "pid=,ppid=,pgid=,stat=,comm=", *args])
    if out is None:
        return None
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 4)
        if len(parts) == 5 and all(p.isdigit() for p in parts[:3]):
            rows.append(Proc(int(parts[0]), int(parts[1]), int(parts[2]), parts[3], os.path.basename(parts[4])))
    return rows


#: the flag that adds each process's environment after its command: macOS's ps (-e there means -A), the BSDs'
#: and procps' BSD-style ``e``
_ENV_FLAG = "-E" if sys.platform == "darwin" else "e"


def _ps_carrying(entry: str) -> list[int] | None:
    """ps prints the environment after the arguments, separated by spaces: a process whose arguments hold the
    entry itself counts as carrying it (only the processes of a run know its marker)."""
    out = _ps(["-A", "-ww", _ENV_FLAG, "-o", "pid=,command="])
    if out is None:
        return None
    pids = []
    for line in out.splitlines():
        pid, _, rest = line.strip().partition(" ")
        if pid.isdigit() and entry in rest.split():
            pids.append(int(pid))
    return pids


# -- the questions -------------------------------------------------------------------------------------------


def rows() -> Iterable[Proc] | None:
    """Every process (that this user may see), or None when there is no table to read."""
    return _proc_rows() if mounted() else _ps_rows(["-A"])


def process(pid: int) -> Proc | None:
    """The process ``pid`` (None: no such process, or cannot tell)."""
    if mounted():
        return _proc_stat(pid)
    rows = _ps_rows(["-p", str(pid)])
    return next((p for p in rows or () if p.pid == pid), None)


def zombie(pid: int) -> bool:
    """True only when ``pid`` is known to be a zombie: exited, waiting for its parent to reap it."""
    p = process(pid)
    return p is not None and p.zombie


def group_running(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs (not a zombie: those of a slow reaper still answer
    ``killpg(pgid, 0)``); True also when there is no table to tell (the safe side: wait, then SIGKILL)."""
    every = rows()
    if every is None:
        return True
    return any(p.pgid == pgid and not p.zombie for p in every)


def carrying(entry: str) -> list[int] | None:
    """The processes (not this one) whose environment holds ``entry`` (``NAME=value``); None: cannot tell."""
    pids = _proc_carrying(entry.encode()) if mounted() else _ps_carrying(entry)
    if pids is None:
        return None
    me = os.getpid()
    return [p for p in pids if p != me]


__all__ = ["Proc", "carrying", "group_running", "mounted", "process", "rows", "zombie"]
