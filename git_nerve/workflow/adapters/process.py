"""Running one agent process: its own session, its pipes drained on threads (and tee'd to the round's log),
a diagnosis while it runs, and its whole process group stopped on abort, timeout or exit.

* argv lists only, never a shell;
* the agent runs in its own session (``start_new_session=True``), so abort
  and timeout kill its whole process group: SIGTERM, then SIGKILL after a
  grace period, and grandchildren go with it (and :func:`sweep` finds those
  that left the group);
* no retries, no fallback: a failure is one of the adapter errors of :mod:`.base`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ... import proctable
from .base import AdapterAborted, AdapterAgentFailed, AdapterNonZeroExit, AdapterSpawnFailed, AdapterTimeout

log = logging.getLogger("git_nerve.workflow")

#: Seconds between SIGTERM and SIGKILL when a process group is stopped.
DEFAULT_GRACE = 5.0
#: Most stdout kept from one agent run (the tail is kept: the typed result comes last).
MAX_STDOUT = 2 * 1024 * 1024
MAX_STDERR = 256 * 1024
#: Seconds between two looks at a running agent's output for a fatal error (see ``diagnose``).
DIAGNOSE_EVERY = 0.5

#: ``(exit code or None while running, stdout, stderr) -> the cause of a failure, or None``.
Diagnose = Callable[["int | None", str, str], "str | None"]


# -- process groups --------------------------------------------------------------


def group_alive(pgid: int) -> bool:
    """True while a live (not zombie) process is in process group ``pgid`` (no /proc needed: :mod:`proctable`)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return proctable.group_running(pgid)


def kill_group(proc: subprocess.Popen, grace: float = DEFAULT_GRACE, *, first: int = signal.SIGTERM) -> None:
    """Stop the process group led by ``proc``: ``first`` (SIGTERM), then SIGKILL after ``grace`` seconds."""
    pgid = proc.pid
    try:
        os.killpg(pgid, first)
    except ProcessLookupError:
        proc.poll()
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader so a zombie does not keep the group alive
        if not group_alive(pgid):
            return
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    deadline = time.monotonic() + 2.0
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


RUN_MARKER = "NERVE_RUN_ID"


def sweep(run_id: str | None) -> int:
    """SIGKILL every process still carrying ``NERVE_RUN_ID=<run_id>`` in its environment; how many.

    An agent CLI can start helpers in a session of their own (Codex runs its
    sandboxed commands under ``bwrap --new-session``): they leave the agent's
    process group, so a group kill misses them. Everything the agent started
    inherits the run's marker, so this finds them whoever their parent is now: in /proc where it is mounted,
    else through ps (macOS); where neither answers, nothing is killed (the group kill still ran).
    """
    if not run_id:
        return 0
    killed = 0
    for pid in proctable.carrying(f"{RUN_MARKER}={run_id}") or ():
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            pass
    return killed


def mark_private(tmpdir: str, run_id: str) -> int | None:
    """Mark a run's private directory as its runner's while it lives (``git.destroy.PRIVATE_MARK``: a lock this
    process holds, the run's id written under it): the descriptor to close after the directory is removed; None
    when it could not be marked (the directory is then never swept: kept)."""
    from ... import locks
    from ...git.destroy import PRIVATE_MARK

    path = os.path.join(tmpdir, PRIVATE_MARK)
    deadline = time.monotonic() + 1.0
    while True:
        try:
            fd = locks.take(path)  # a sweep may hold it a moment while it reads an empty mark
        except OSError:
            return None
        if fd is not None:
            break
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    os.pwrite(fd, run_id.encode("ascii") + b"\n", 0)
    return fd


def still_running(run_id: str) -> bool | None:
    """Whether a process still carries ``NERVE_RUN_ID=<run_id>`` (None: cannot tell)."""
    pids = proctable.carrying(f"{RUN_MARKER}={run_id}")
    return None if pids is None else bool(pids)


@contextlib.contextmanager
def private_dir(prefix: str, run_id: str) -> Iterator[str]:
    """A run's private directory (``tempfile.mkdtemp(prefix=prefix)``, 0700), marked as its runner's
    (:func:`mark_private`) and removed after it. First, the private directories of earlier runs whose runner was
    killed (no ``finally`` ran: copies of settings and keys inside) go, once proven dead (``git.destroy``)."""
    import tempfile

    from ...git import destroy

    destroy.remove_dead_private_dirs("nerve-", still_running=still_running)
    tmpdir = tempfile.mkdtemp(prefix=prefix)
    mark = None
    try:
        mark = mark_private(tmpdir, run_id)
        yield tmpdir
    finally:
        destroy.remove_own_tempdir(tmpdir, prefix=prefix)
        if mark is not None:
            os.close(mark)


class Capture:
    """Drain one pipe on a thread, keeping at most ``limit`` bytes (the tail)."""

    def __init__(self, stream, limit: int, on_chunk: Callable[[bytes], None] | None = None):
        self._stream = stream
        self._limit = limit
        self._chunks: list[bytes] = []
        self._size = 0
        self.dropped = 0
        self._on_chunk = on_chunk
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            while True:
                chunk = self._stream.read1(65536) if hasattr(self._stream, "read1") else self._stream.read(65536)
                if not chunk:
                    break
                if self._on_chunk is not None:
                    self._on_chunk(chunk)
                self._chunks.append(chunk)
                self._size += len(chunk)
                if self._size > 2 * self._limit:
                    data = b"".join(self._chunks)
                    self.dropped += len(data) - self._limit
                    self._chunks, self._size = [data[-self._limit:]], self._limit
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._stream.close()
            except OSError:
                pass

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def text(self) -> str:
        data = b"".join(self._chunks)
        dropped = self.dropped
        if len(data) > self._limit:
            dropped += len(data) - self._limit
            data = data[-self._limit:]
        text = data.decode("utf-8", "replace")
        return f"[... {dropped} bytes dropped ...]\n{text}" if dropped else text


def _feed(stream, data: bytes) -> None:
    try:
        stream.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass  # the agent stopped reading; what it did with the prompt shows in its exit
    finally:
        try:
            stream.close()
        except (BrokenPipeError, OSError):
            pass


def _start(argv: list[str], *, name: str, cwd, env, stdin: bool) -> subprocess.Popen:
    """The agent's process in a group of its own, or the AdapterSpawnFailed that says why it did not start."""
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        if cwd is not None and not os.path.isdir(cwd):
            raise AdapterSpawnFailed(name, f"working directory {os.fspath(cwd)} does not exist") from None
        raise AdapterSpawnFailed(name, f"`{argv[0]}` not found on PATH") from None
    except PermissionError:
        raise AdapterSpawnFailed(name, f"`{argv[0]}` is not executable") from None
    except OSError as exc:
        raise AdapterSpawnFailed(name, f"cannot start `{argv[0]}`: {exc.strerror or exc}") from None


def _watch(proc, out, err, *, name: str, started: float, timeout: float, abort, grace: float, poll: float,
           diagnose) -> int:
    """Wait for the agent's exit status; an abort, a diagnosed cause or the timeout kills its group and raises."""
    deadline = started + timeout
    next_look = started + DIAGNOSE_EVERY
    while True:
        try:
            return proc.wait(timeout=poll)
        except subprocess.TimeoutExpired:
            pass
        if abort is not None and abort.is_set():
            kill_group(proc, grace)
            out.join(2.0), err.join(2.0)
            raise AdapterAborted(name, "aborted; the agent's process group was killed")
        now = time.monotonic()
        if diagnose is not None and now >= next_look:
            next_look = now + DIAGNOSE_EVERY
            cause = diagnose(None, out.text(), err.text())
            if cause:
                kill_group(proc, grace)
                out.join(2.0), err.join(2.0)
                raise AdapterAgentFailed(name, cause, proc.returncode or 0, out.text(), err.text())
        if now >= deadline:
            kill_group(proc, grace)
            out.join(2.0), err.join(2.0)
            raise AdapterTimeout(name, timeout, out.text(), err.text())


def run_process(
    argv: Sequence[str],
    *,
    name: str,
    cwd: str | os.PathLike[str] | None,
    input_text: str | None,
    timeout: float,
    abort: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
    grace: float = DEFAULT_GRACE,
    poll: float = 0.05,
    diagnose: Diagnose | None = None,
    tee: Any = None,
) -> tuple[str, str]:
    """Run ``argv`` in its own process group; return (stdout, stderr) when it exits 0.

    ``diagnose(exit_code, stdout, stderr)`` names a failure the exit status
    hides (a CLI that exits 0 after a 401): it is asked while the agent runs
    (``exit_code`` None; a cause stops the agent at once instead of letting it
    retry until the timeout) and after it exits. ``tee`` (a :class:`..runlog.Tee`): both pipes are
    also appended to the round's log as they arrive (what `git nerve console` follows live).

    Raises :class:`AdapterSpawnFailed`, :class:`AdapterNonZeroExit`,
    :class:`AdapterAgentFailed`, :class:`AdapterTimeout` or :class:`AdapterAborted`.
    """
    argv = [os.fspath(a) for a in argv]
    proc = _start(argv, name=name, cwd=cwd, env=env, stdin=input_text is not None)
    started = time.monotonic()
    log.debug("%s: started pid %d (%s)", name, proc.pid, argv[0])
    out = Capture(proc.stdout, MAX_STDOUT, tee.sink("stdout") if tee is not None else None)
    err = Capture(proc.stderr, MAX_STDERR, tee.sink("stderr") if tee is not None else None)
    if input_text is not None:
        threading.Thread(target=_feed, args=(proc.stdin, input_text.encode("utf-8")), daemon=True).start()
    try:
        code = _watch(proc, out, err, name=name, started=started, timeout=timeout, abort=abort, grace=grace,
                      poll=poll, diagnose=diagnose)
    except BaseException as exc:
        if not isinstance(exc, (AdapterAborted, AdapterTimeout, AdapterAgentFailed)) and proc.poll() is None:
            kill_group(proc, grace)
        sweep((env or {}).get(RUN_MARKER))
        raise
    # The agent has exited; something it left behind in its group may still hold our pipes.
    if not (out.join(1.0) and err.join(0.2)):
        kill_group(proc, grace)
        out.join(2.0), err.join(2.0)
    sweep((env or {}).get(RUN_MARKER))  # nothing the agent started outlives it
    log.debug("%s: exit %d after %.1fs", name, code, time.monotonic() - started)
    stdout, stderr = out.text(), err.text()
    cause = diagnose(code, stdout, stderr) if diagnose is not None else None
    if cause:
        raise AdapterAgentFailed(name, cause, code, stdout, stderr)
    if code != 0:
        raise AdapterNonZeroExit(name, code, stdout, stderr, note=f"killed by signal {-code}" if code < 0 else None)
    return stdout, stderr


__all__ = ["Capture", "DEFAULT_GRACE", "DIAGNOSE_EVERY", "Diagnose", "MAX_STDERR", "MAX_STDOUT", "RUN_MARKER",
           "group_alive", "kill_group", "run_process", "sweep"]
