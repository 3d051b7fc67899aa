"""``[worktree] setup``: a command run in a new worktree after the copy, with NERVE_TASK_ID and NERVE_PORT.

Its argv is the setting split like a shell splits words (shlex), never given to a shell: a setup that
needs one is written ``sh -c '...'``. It runs under a small supervisor process (:mod:`.setup_run`) that
writes its output to ``<common-dir>/nerve/setup/<task>.log`` and records in the bus whether it is
running, done or failed (with its exit status), so `spawn` returns at once (``--wait`` waits) and
`status`, `show` and `start` can tell. A failing setup changes nothing else: the task, its worktree and
the copied files stay; the log says why.

A setup is stopped by what removes its worktree (issue 35): the supervisor starts a session of its own (its
process group, numbered by its pid, holds the setup and everything it started), and the lock
``<common-dir>/nerve/setup/<task>.lock`` is taken by the starter before the supervisor exists and handed down to
it and to the command (``pass_fds``): the kernel keeps it held while any process of the setup lives, however
they die (no ``/proc``). :func:`stop` (cleanup of merge and `cancel --cleanup`, and every new start of the same
task's setup: retry, `git worker setup`) signals that group only while the lock proves a process of it alive,
and waits until the lock is free. Each setup has its generation, its ``setup_started``: the supervisor records
its end only over its own generation (a compare-and-set), so a stale supervisor never writes over a newer
setup's record. A setup whose supervisor died before it recorded an end is ``interrupted``: the rerun of the
spawn that started it, and `git worker setup T`, run it again.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import liveness, locks
from ..bus import prep as busprep
from ..errors import NerveError
from ..fs import create_file, make_dirs

SETUP_DIR = "setup"
#: seconds a stopped setup has between SIGTERM and SIGKILL, then for SIGKILL to take
GRACE = 5.0


def log_path(common_dir: Path, task_id: str) -> Path:
    return common_dir / "nerve" / SETUP_DIR / f"{task_id}.log"


def lock_path(common_dir: Path, task_id: str) -> Path:
    """Held while any process of the task's setup lives (see the module's docstring)."""
    return common_dir / "nerve" / SETUP_DIR / f"{task_id}.lock"


def start(bus, common_dir: Path, task_id: str, worktree: Path, argv: tuple[str, ...], env: dict[str, str],
          *, wait: bool = False) -> str:
    """Start the setup (recorded as running first; a setup of the task still running is stopped first); with
    ``wait``, return once it ended. Its state."""
    common_dir = Path(common_dir)
    kept = stop(common_dir, task_id)
    if kept:
        raise NerveError(f"the setup was not started again: {kept[0]}")
    log = log_path(common_dir, task_id)
    make_dirs(log.parent)
    fd = _take_lock(lock_path(common_dir, task_id))
    started = time.time()
    try:
        with bus.write() as conn:
            busprep.set_values(conn, task_id, setup_state="running", setup_log=str(log), setup_pid=None,
                               setup_exit=None, setup_started=started, setup_ended=None)
        cmd = [sys.executable, "-m", "git_nerve.worktree_prep.setup_run", os.fspath(bus.path), task_id,
               os.fspath(worktree), os.fspath(log), repr(started), str(fd), "--", *argv]
        root = str(Path(__file__).resolve().parents[2])
        child_env = {**os.environ, **env,
                     "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", liveness.FD_VAR):
            child_env.pop(var, None)
        proc = subprocess.Popen(cmd, cwd=worktree, env=child_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, pass_fds=(fd,))
        os.ftruncate(fd, 0)
        os.write(fd, f"{proc.pid}\n".encode())  # the process group to stop (locks.holder reads it)
    finally:
        os.close(fd)  # the supervisor holds it now (or nothing started: the lock is free again)
    with bus.write() as conn:
        busprep.set_setup_pid(conn, task_id, proc.pid, started)
    if not wait:
        return "running"
    try:
        proc.wait()
    except BaseException:  # Ctrl-C of `spawn --wait`: the setup it waited for goes with it, as before
        stop(common_dir, task_id)
        raise
    row = busprep.get(bus.conn, task_id)
    return state(row) or "failed"


def _take_lock(path: Path) -> int:
    """The setup's lock, taken (free: :func:`stop` ended whatever held it; another start of this task's setup
    taking it first is waited for a moment, then refused)."""
    fd = create_file(path, os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + GRACE
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.ftruncate(fd, 0)  # the last setup's pid goes at once: :func:`stop` waits for this one's
            return fd
        except OSError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise NerveError(f"another setup of this task runs right now (its lock: {path}); nothing started")
            time.sleep(0.02)


def running(common_dir: Path, task_id: str) -> bool:
    """A process of the task's setup is alive (its lock is held)."""
    return locks.is_held(lock_path(Path(common_dir), task_id))


def stop(common_dir: Path, task_id: str, *, grace: float = GRACE) -> list[str]:
    """Stop the task's running setup, its whole process group, and wait until none of it lives: SIGTERM, then
    SIGKILL after ``grace`` seconds. Nothing when none runs. What could not be stopped is said (a ``kept:`` line:
    its group is not the one recorded, e.g. a process that left it), never guessed at."""
    path = lock_path(Path(common_dir), task_id)
    if not locks.is_held(path):
        return []
    pgid = _recorded_group(path)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if pgid is None or not _group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        except PermissionError:
            return [f"kept: the setup of {task_id} (process group {pgid}) is not this user's"]
        if _wait_free(path, grace):
            return []
    if _wait_free(path, grace):
        return []
    return [f"kept: the setup of {task_id} still runs outside its process group {pgid or '?'}; "
            f"stop it yourself (its lock: {path})"]


def _recorded_group(path: Path) -> int | None:
    """The supervisor's pid the starter wrote (its process group's number); a moment after the start it may not
    be written yet."""
    deadline = time.monotonic() + 5
    while True:
        pid = locks.holder(path)
        if pid or time.monotonic() >= deadline or not locks.is_held(path):
            return pid
        time.sleep(0.01)


def _group_alive(pgid: int) -> bool:
    try:
        return os.getpgid(pgid) == pgid  # the group's leader, or the group still has it as its number
    except ProcessLookupError:
        try:
            os.killpg(pgid, 0)  # the leader is gone, members of its group are not
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    except OSError:
        return True


def _wait_free(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while locks.is_held(path):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def state(row: busprep.Prep | None) -> str | None:
    """running | done | failed | interrupted (its supervisor is gone without a word) | None (no setup)."""
    if row is None or row.setup_state is None:
        return None
    if row.setup_state == "running" and not _alive(row):
        return "interrupted"
    return row.setup_state


def _alive(row: busprep.Prep) -> bool:
    """The setup recorded running has a live process: its lock says (beside its log); a setup started before the
    lock existed: its supervisor's pid."""
    if row.setup_log:
        lock = Path(row.setup_log).with_suffix(".lock")
        if lock.exists():
            return locks.is_held(lock)
    return bool(row.setup_pid) and liveness.pid_alive(row.setup_pid)


def wait_ended(common_dir: Path, task_id: str) -> None:
    """Wait until no process of the task's setup lives (a `spawn --wait` rerun after the spawn that started it was
    killed: the setup may run on in its own session)."""
    path = lock_path(Path(common_dir), task_id)
    while locks.is_held(path):
        time.sleep(0.05)
