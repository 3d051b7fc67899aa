"""`git worker run [--task T] [--done] -- CMD ...`: any agent command, supervised.

Starts the task if it is ASSIGNED, runs CMD in the task's worktree (in its
own process group, output passed through and its tail kept), records a
heartbeat every ``nerve.heartbeatInterval`` seconds from a background thread
while CMD runs, forwards SIGINT and SIGTERM to CMD, then appends a round
(the exit code and the tail of the output) to the task's thread and, with
``--done`` and exit status 0, runs `git worker done`, but only when git
agrees: the branch gained a commit and the worktree is clean (otherwise the
exit status is 1 and the reason is printed). The exit status is otherwise
CMD's (128+N when a signal N ended it). Every commit the command made is
recorded on the bus, even one that bypassed the hooks.

Only the command's name is recorded, never its arguments (they may hold a
prompt or a secret). What CMD prints is written masked (:mod:`git_nerve.redact`) to the round's log
(``<common>/nerve/runs/<task>/<round>-<role>.log``, which the console follows) and to the round's tail; the
terminal gets it as CMD printed it.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .. import clock
from ..bus import rounds, workers
from ..bus.connection import Bus
from ..errors import InvalidTransition, NerveError, UsageError
from ..locks import hold
from ..git import cli as gitcli
from ..redact import NOTHING, Redactor
from ..worktree_prep import ports
from . import ground, runlog
from .adapters.command import DEFAULT_GRACE, Capture, kill_group

TAIL_LINES = 40
TAIL_CHARS = 4000
RUNNABLE = ("ASSIGNED", "WORKING", "CONFLICTED")


@dataclass
class WrapResult:
    task_id: str
    exit_code: int
    round: int
    duration_s: float
    started: bool  #: this run moved the task ASSIGNED -> WORKING
    signal: int | None = None  #: the signal that ended CMD
    stopped: str | None = None  #: why CMD was stopped by a tick
    done: Any = None  #: the `git worker done` result, with --done and exit 0
    commits: list[str] | None = None  #: what git saw the command add to the task's branch
    not_done: str | None = None  #: why --done was refused although CMD exited 0 (git disagreed)
    heartbeats: int = 0
    heartbeat_error: str | None = None  #: the last heartbeat that could not be recorded, if any

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id, "exit_code": self.exit_code, "round": self.round, "duration_s": self.duration_s,
            "started": self.started, "signal": self.signal, "stopped": self.stopped, "heartbeats": self.heartbeats,
            "heartbeat_error": self.heartbeat_error, "commits": self.commits, "not_done": self.not_done,
            "done": None if self.done is None else (self.done.outcome.current if self.done.outcome else "already"),
        }


class _Tail:
    """The last lines of stdout and stderr together, in arrival order."""

    def __init__(self, limit: int = 64 * 1024):
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._size - len(self._chunks[0]) >= self._limit:
                self._size -= len(self._chunks.popleft())

    def text(self, lines: int = TAIL_LINES, chars: int = TAIL_CHARS, masking: Redactor = NOTHING) -> str:
        with self._lock:
            data = b"".join(self._chunks)
        text = masking.text(data.decode("utf-8", "replace")).rstrip()  # masked before it is cut: no half value
        kept = text.splitlines()[-lines:]
        out = "\n".join(kept)
        return out[-chars:] if len(out) > chars else out


def _tee(stream: BinaryIO | None, tail: _Tail, log: Callable[[bytes], None] | None = None) -> Callable[[bytes], None]:
    def on_chunk(chunk: bytes) -> None:
        tail.add(chunk)
        if log is not None:
            log(chunk)
        if stream is not None:
            try:
                stream.write(chunk)
                stream.flush()
            except (OSError, ValueError):
                pass

    return on_chunk


def _found(argv0: str, cwd: Path) -> bool:
    if os.sep in argv0:
        path = Path(argv0) if os.path.isabs(argv0) else cwd / argv0
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(argv0) is not None


class _Heartbeats(threading.Thread):
    """A heartbeat at once, then every ``interval`` seconds, on its own bus connection; ``on_tick`` may stop CMD."""

    def __init__(self, bus_path: Path, task_id: str, status: str, interval: float,
                 proc: subprocess.Popen, on_tick: Callable[[str], str | None] | None, grace: float):
        super().__init__(daemon=True, name="nerve-heartbeat")
        self.bus_path, self.task_id, self.status, self.interval = bus_path, task_id, status, interval
        self.proc, self.on_tick, self.grace = proc, on_tick, grace
        self.stop_event = threading.Event()
        self.count = 0
        self.stopped: str | None = None
        self.error: str | None = None

    def run(self) -> None:
        from ..worker.heartbeat import record

        bus = Bus(self.bus_path)
        try:
            self._beat(record, bus)  # one as CMD starts, then one per interval
            while not self.stop_event.wait(self.interval):
                self._beat(record, bus)
                if self.on_tick is not None and self.stopped is None:
                    reason = self.on_tick(self.task_id)
                    if reason:
                        self.stopped = reason
                        kill_group(self.proc, self.grace)
        finally:
            bus.close()

    def _beat(self, record, bus: Bus) -> None:
        try:
            record(bus, self.task_id, status=self.status, source="run")
            self.count += 1
        except NerveError as exc:  # e.g. the bus stayed locked: CMD keeps running
            self.error = exc.message


def run_command(
    argv: Sequence[str],
    *,
    task: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    done: bool = False,
    role: str | None = None,
    on_tick: Callable[[str], str | None] | None = None,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
    grace: float = DEFAULT_GRACE,
    sandbox: str | None = None,
) -> WrapResult:
    """Run ``argv`` for a task; see the module docstring. ``sandbox``: the box around CMD (:func:`_boxed`)."""
    from ..worker import lifecycle

    argv = [os.fspath(a) for a in argv]
    if not argv or not argv[0]:
        raise UsageError("no command given: git worker run [--task T] [--done] -- CMD [ARGS...]")
    here = Path(cwd) if cwd is not None else Path.cwd()
    repo = lifecycle.open_repo(here)
    running = contextlib.ExitStack()  # while the command runs: `git nerve tell stop` sees a run of the task
    try:
        task_id, w, worktree, run_dir, interval = _runnable(repo, task, argv, here)
        from ..steer.hook import worker_run_lock

        running.enter_context(hold(worker_run_lock(repo.lock_path("x").parent, w.task_id), shared=True, timeout=None,
                                   what=f"the run lock of {task_id}"))
        started = False
        if w.state == "ASSIGNED":
            started = lifecycle.start(repo, task_id).changed
        name, before, tail = os.path.basename(argv[0]), ground.tip(worktree, w.branch), _Tail()
        masking, log, sinks = _masked_log(repo, task_id, role or name, worktree, tail, stdout, stderr)
        t0 = time.monotonic()
        with contextlib.closing(log) if log is not None else contextlib.nullcontext(), \
                _boxed(repo, sandbox, worktree, w, task_id) as box:
            code, beats = _run_supervised(argv, run_dir, repo, task_id, name, interval, on_tick, grace, *sinks, box)
        duration = round(time.monotonic() - t0, 1)
        exit_code = code if code >= 0 else 128 - code
        metadata = _exit_facts(name, code, exit_code, duration, beats)
        obs = ground.observe(worktree, w.branch, before)
        metadata["commits"] = obs.commits
        ground.record_commits(repo.bus, worktree, task_id, obs.commits, "worker-run")
        problem = ground.verdict(obs, must_commit=done, branch=w.branch)
        if problem:
            metadata["git_error"] = problem
        number = _record_end(repo, task_id, role or name, tail.text(masking=masking) or "(no output)", metadata,
                             ended_status(name, code, beats.stopped, clock.now()))
        result = WrapResult(task_id, exit_code, number, duration, started, -code if code < 0 else None, beats.stopped,
                            heartbeats=beats.count, heartbeat_error=beats.error, commits=obs.commits)
        if done and exit_code == 0:
            if problem:  # "exit 0" is the agent's word; an empty or dirty branch is not ready for review
                result.not_done = f"not marked done: {problem}"
            else:
                result.done = lifecycle.done(repo, task_id)
        return result
    finally:
        running.close()
        repo.close()


def _masked_log(repo, task_id: str, role: str, worktree: Path, tail: _Tail, stdout, stderr):
    """What CMD's output is masked by (git_nerve/redact.py: the secret values of the environment it is given, the
    task's copied values); its round's log under <common>/nerve/runs/<task>/ (the console follows it), masked as it
    is written (None when it cannot be written); the sinks of CMD's stdout and stderr."""
    from ..worktree_prep.secrets import redactor

    masking = redactor(repo.bus.conn, task_id, worktree)
    log = runlog.open_tee(repo.paths.common_dir, task_id, rounds.last_round(repo.bus.conn, task_id) + 1, role, "run",
                          os.environ, worktree)
    return masking, log, (_tee(stdout, tail, log and log.sink("stdout")), _tee(stderr, tail, log and log.sink("stderr")))


def _record_end(repo, task_id: str, role: str, content: str, metadata: dict[str, Any], status: str) -> int:
    """The run's round, and the row's status saying how it ended (never "running" after it did); the round's number."""
    ended = clock.now()
    with repo.bus.write() as conn:
        number = rounds.append(conn, task_id, role=role, content=content, metadata=metadata, ts=ended)
        workers.heartbeat(conn, task_id, ended, status, None)
    if metadata.get("exit_code"):  # the task's attention is "failed": the notification sender (issue 38), not waited for
        from ..worker.notify import poke

        poke(repo.paths.common_dir)
    return number


def ended_status(name: str, code: int, stopped: str | None, at: float) -> str:
    """What a task's row says once its `git worker run` ended: ``run NAME exited 1 at 14:03:07`` (local time),
    ``killed by SIGTERM``, or ``stopped (REASON)`` when git-nerve stopped it."""
    when = time.strftime("%H:%M:%S", time.localtime(at))
    if stopped:
        how = f"stopped ({stopped})"
    elif code < 0:
        how = f"killed by {signal.Signals(-code).name if -code in signal.valid_signals() else f'signal {-code}'}"
    else:
        how = f"exited {code}"
    return f"run {name} {how} at {when}"


def _exit_facts(name: str, code: int, exit_code: int, duration: float, beats: "_Heartbeats") -> dict[str, Any]:
    metadata: dict[str, Any] = {"command": name, "exit_code": exit_code, "duration_s": duration}
    if code < 0:
        metadata["signal"] = signal.Signals(-code).name if -code in signal.valid_signals() else -code
    if beats.stopped:
        metadata["stopped"] = beats.stopped
    return metadata


def _runnable(repo, task: str | None, argv: list[str], here: Path):
    """(the task, its row, its worktree, where the command runs, the heartbeat interval), or the refusal."""
    from ..context import resolve_task
    from ..worker.settings import heartbeat_interval
    from ..worker.transitions import get as get_worker

    task_id = resolve_task(repo.paths.git_dir, task)
    w = get_worker(repo.bus, task_id)
    if w.state not in RUNNABLE:
        raise InvalidTransition(f"cannot run a command for {task_id}: it is {w.state} (needs {', '.join(RUNNABLE)})")
    worktree = Path(w.worktree)
    if not worktree.is_dir():
        raise UsageError(f"the worktree of {task_id} is missing ({worktree}); run `git worker spawn {task_id}` to recreate it")
    resolved_here = here.resolve()
    run_dir = here if resolved_here == worktree.resolve() or worktree.resolve() in resolved_here.parents else worktree
    if not _found(argv[0], run_dir):
        raise UsageError(f"command not found: {argv[0]}")
    return task_id, w, worktree, run_dir, heartbeat_interval(repo.config)


@contextlib.contextmanager
def _boxed(repo, mode: str | None, worktree: Path, w, task_id: str):
    """(kind, Box) of the box CMD runs in (``mode``, else nerve.toml [run] sandbox, default auto: :mod:`.sandbox`),
    or None unboxed; what it spooled is taken in when it ends."""
    from . import config as nerve_config
    from . import sandbox
    from .adapters.command import git_dirs

    cfg = nerve_config.load(repo.paths.toplevel or worktree).run
    kind = sandbox.choose(mode or cfg.sandbox)
    git_dir, common_dir = git_dirs(str(worktree))
    if kind == "none" or not common_dir:
        yield None
        return
    import tempfile

    from ..bus import spool
    from ..git import destroy

    tmp = tempfile.mkdtemp(prefix="nerve-box-")
    try:
        yield kind, sandbox.make_box(workdir=str(worktree), git_dir=git_dir, common_dir=common_dir, branch=w.branch,
                                     task_id=task_id, tmp_parent=tmp, env=os.environ, network=cfg.network != "none",
                                     hide=cfg.hide)
        spool.ingest(repo.bus)
    finally:
        destroy.remove_own_tempdir(tmp, prefix="nerve-box-")


def _run_supervised(argv, run_dir, repo, task_id, name, interval, on_tick, grace, out_sink, err_sink, box=None):
    """Start ``argv`` in its own process group (in ``box``: (kind, Box)), heartbeat while it runs; (its status,
    the heartbeats)."""
    env = gitcli.clean_env(ports.env_for(repo.bus.conn, task_id))  # + NERVE_PORT
    if box is not None:
        from .sandbox import wrap

        argv, env = wrap(box[0], box[1], argv, env)
    with _Forwarding() as forwarding:  # from before the start: a Ctrl-C right after it goes to the command too
        try:
            proc = subprocess.Popen(
                argv, cwd=run_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            )
        except OSError as exc:
            raise UsageError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        forwarding.started(proc)
        out = Capture(proc.stdout, 64 * 1024, out_sink)
        err = Capture(proc.stderr, 64 * 1024, err_sink)
        beats = _Heartbeats(repo.paths.bus_path, task_id, f"running {name}", interval, proc, on_tick, grace)
        beats.start()
        code = proc.wait()
    beats.stop_event.set()
    beats.join()
    out.join(2.0), err.join(0.5)
    return code, beats


#: what a person or a process manager sends to end a command (Ctrl-C, kill, a closed terminal)
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Forwarding:
    """While the ``with`` runs (main thread only), SIGINT, SIGTERM and SIGHUP go to the command's process group instead of
    ending this wrapper; one that arrives before the command was started (:meth:`started`) is sent to it as soon
    as it has been: installed before the start, so no signal in between ends the wrapper and leaves the command."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.early: list[int] = []
        self.previous: dict = {}

    def __enter__(self) -> "_Forwarding":
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self._on_signal) for s in FORWARDED}
        return self

    def _on_signal(self, signum, frame) -> None:
        if self.proc is None:
            self.early.append(signum)
        else:
            self._send(signum)

    def _send(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def started(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        while self.early:
            self._send(self.early.pop(0))

    def __exit__(self, *exc) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, handler)


__all__ = ["TAIL_CHARS", "TAIL_LINES", "WrapResult", "run_command"]
