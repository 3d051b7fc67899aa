"""The door for single files: the only code that removes one of git-nerve's files (`git/destroy.py`, the door for
trees, worktrees, branches and refs, re-exports it; it lives here, at the bottom floor, because ``fs``,
``liveness``, ``context`` and ``bus/``, below ``git/``, remove files of their own too).

:func:`remove_own_file` removes ``path`` only when

* ``kind`` names one entry of :data:`KINDS`: what the file is, the name git-nerve gives it (a full match of its
  base name) and what proves it git-nerve's (our own name in our own directory, with this process's pid where the
  name carries one; our own liveness token; a record the caller read and passes as ``record``; the marker the hook
  installer writes into every shim);
* it lies strictly inside ``within`` once its directory is resolved (no ``..``, no symlinked directory leads
  out), ``within`` being the git-nerve directory the kind lives in (a ``nerve`` directory of a git dir or inside
  one; a git dir for git's lock files; a hooks directory; the directory of the bus being built);
* ``lstat`` says it is a regular file (a Unix socket for the kinds in :data:`SOCKETS`): a symbolic link planted
  at the name is kept (its target is never followed, and the link is no file git-nerve made: links git-nerve
  makes, its man page links, are removed only by ``destroy.remove_recorded_link``, which checks their record),
  so is a directory.

Anything else is kept: :class:`Refused` (exit 9, its own code) saying why, and nothing removed. A file already
gone is no error (False). :func:`keep_or_remove` is the same, returning the ``kept ...`` line instead of raising,
for best-effort cleanups. Standard library only, no import but ``os``, ``re``, ``stat`` and ``errors`` (hooks,
the heartbeat and the notes hook remove files through it).
"""

from __future__ import annotations

import os
import re
import stat

from .errors import ExitCode, GitError


class Refused(GitError):
    """The door could not prove the target is git-nerve's own: nothing was removed. Exit 9, its own code (a
    ``GitError`` still, so what handles a failed git step handles a refusal too)."""

    exit_code = ExitCode.REFUSED


#: The marker the hook installer writes into every shim it installs (hooks/shim.py's MARKER): a hook file's
#: record of being git-nerve's, written by git-nerve into a file git-nerve wrote.
HOOK_MARKER = b"git-nerve hook shim"

_NERVE, _GITDIR, _HOOKS, _BESIDE, _RECORDED = "nerve", "gitdir", "hooks", "beside", "recorded"

#: kind -> (base name, a full-match pattern; where ``within`` is; what proves the file git-nerve's). A ``pid``
#: group in the pattern must be this process's pid.
KINDS: dict[str, tuple[str, str, str]] = {
    "bus-build": (r"\.[^/]+\.(?P<pid>\d+)\.new(?:-wal|-shm|-journal)?", _BESIDE,
                  "the new bus this process builds beside the bus path (its own pid in the name)"),
    "spool-claimed": (r"spool\.claimed-\d+-\d+", _NERVE,
                      "a hook spool an ingest renamed to its claimed name, read and recorded on the bus"),
    "liveness": (r"\d+-[0-9a-f]+(?:\.\d+)?", _NERVE,
                 "a liveness token of ours or its marker: this process's own, or a dead one whose lock it holds"),
    "ctx-temp": (r"\.worker-ctx\.json\.\d+\.tmp", _NERVE,
                 "the temporary of a .worker-ctx.json write whose writer (the pid in its name) is gone"),
    "notes-pending": (r"[^./][^/]*", _NERVE, "the notes-pending marker of a task (notes-pending/<task key>)"),
    "stop-request": (r"stop-request", _NERVE, "the stop request a run wrote for its agent"),
    "spawn-record": (r"spawn-[^/]+", _NERVE, "the record of an unfinished spawn, written before its git work"),
    "owned-record": (r"[a-z]+-[0-9a-f]{24}\.json", _NERVE,
                     "an ownership record (git/ownership.py) of something git-nerve made and removed"),
    "repair-marker": (r"[a-z][a-z-]*", _NERVE,
                      "a marker of our own multi-step git work, written before it began"),
    "knowledge-queue": (r"\d+-\d+\.files", _NERVE, "a list of files the post-commit hook queued for the index"),
    "radar-request": (r"[^./][^/]*", _NERVE, "a recompute request radar.queue.add made (radar-pending/<task>)"),
    "snapshot-index": (r"snapshot-(?P<pid>\d+)-[^/]+", _NERVE,
                       "the temporary index of a snapshot this process takes (git/worktrees.snapshot)"),
    "radar-notice": (r"radar-notice\.(?P<pid>\d+)", _NERVE, "the radar notice this process claimed by renaming it"),
    "mcp-record": (r"mcp\.json", _NERVE, "the record of what `git nerve mcp install` added"),
    "git-lock": (r"[^/]+\.lock", _GITDIR, "a lock file a dead git of ours made (its dead liveness token)"),
    "hook-shim": (r"[a-z-]+(?:\.[a-z0-9-]+)?", _HOOKS, "a hook shim git-nerve's installer wrote (its marker)"),
    "mcp-config": (r"[^/]+", _RECORDED, "an MCP config file `git nerve mcp install` created (its record)"),
    "reset-added": (r"[^/]+", _RECORDED, "a file our killed reset created in a task's worktree (absent at the "
                    "commit the repair marker, written before the reset, names as its start)"),
    "warm-socket": (r"warm\.sock", _NERVE, "the warm reader's socket (git_nerve/warm): its server, holding the "
                    "server lock, removes its own, or a dead server's it replaces"),
}

#: the kinds that are a Unix socket, not a regular file (a regular file or anything else at their name is kept)
SOCKETS = frozenset({"warm-socket"})


def _refuse(path: str, why: str):
    raise Refused(f"kept {path}: {why}")


def _prove(path, within, kind: str, record: dict | None) -> tuple[str, str] | None:
    """(the resolved path to remove, its base name), None when it is gone; :class:`Refused` otherwise."""
    raw, home = os.fspath(path), os.fspath(within)
    if kind not in KINDS:
        _refuse(raw, f"{kind!r} is no kind of file git-nerve removes")
    pattern, where, _ = KINDS[kind]
    name = os.path.basename(raw)
    if not os.path.isabs(raw) or not os.path.isabs(home):
        _refuse(raw, "not an absolute path")
    m = re.fullmatch(pattern, name)
    if m is None or name in (".", ".."):
        _refuse(raw, f"its name is not one git-nerve gives a {kind} file")
    if "pid" in m.groupdict() and int(m["pid"]) != os.getpid():
        _refuse(raw, f"its name carries pid {m['pid']}, not this process's")
    real_home = os.path.realpath(home)
    parent = os.path.realpath(os.path.dirname(raw))
    if parent != real_home and not parent.startswith(real_home.rstrip(os.sep) + os.sep):
        _refuse(raw, f"it is not inside {home}")
    if real_home == os.sep or (where == _NERVE and "nerve" not in real_home.split(os.sep)):
        _refuse(raw, f"{home} is not a git-nerve directory")
    if where == _RECORDED and not (isinstance(record, dict) and record.get("created_file")
                                   and os.path.abspath(str(record.get("file") or "")) == os.path.abspath(raw)):
        _refuse(raw, "no record says git-nerve created it")
    target = os.path.join(parent, name)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        _refuse(raw, "it is a symbolic link (its target is not ours to remove, nor is a link git-nerve did not record)")
    if kind in SOCKETS:
        if not stat.S_ISSOCK(st.st_mode):
            _refuse(raw, "not a socket")
    elif not stat.S_ISREG(st.st_mode):
        _refuse(raw, "not a regular file")
    if where == _HOOKS and not _has_marker(target):
        _refuse(raw, "not a hook git-nerve's installer wrote")
    return target, name


def _has_marker(target: str) -> bool:
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        return HOOK_MARKER in os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)


def remove_own_file(path, *, within, kind: str, record: dict | None = None) -> bool:
    """Remove the regular file ``path`` git-nerve made (see the module's docstring): True when removed, False when
    it was gone already; :class:`Refused` (nothing removed) when it cannot be proven git-nerve's."""
    proved = _prove(path, within, kind, record)
    if proved is None:
        return False
    try:
        os.unlink(proved[0])
    except FileNotFoundError:
        return False
    return True


def keep_or_remove(path, *, within, kind: str, record: dict | None = None) -> str | None:
    """:func:`remove_own_file` for a best-effort cleanup: None when the file is gone (removed now or before), else
    the line saying what was kept and why (refused, or the removal failed)."""
    try:
        remove_own_file(path, within=within, kind=kind, record=record)
    except Refused as exc:
        return exc.message
    except OSError as exc:
        return f"kept {os.fspath(path)}: {exc.strerror or exc}"
    return None


__all__ = ["HOOK_MARKER", "KINDS", "SOCKETS", "Refused", "keep_or_remove", "remove_own_file"]
