"""Supervising one agent while it runs (the runner's and nothing else's).

The agent's adapter runs on a worker thread; this (the calling) thread records a heartbeat every ``interval``
seconds and asks ``on_tick`` whether to stop. A stop for a CLI that can end itself (adapter ``clean_stop``:
claude) is first asked through the stop-request file its notes hook reads (:class:`StopRequest`); the process
group is killed only after ``grace`` seconds. Ctrl-C and SIGTERM abort the agent at once (its adapter kills its
process group); an adapter that ignores the abort is given up on after :data:`ABORT_WAIT` seconds.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NerveError
from ..fs import create_file, make_dirs
from ..git import destroy
from .adapters.base import AdapterAborted

log = logging.getLogger("git_nerve.workflow")

#: Seconds to wait for an aborted adapter to return before giving up on it.
ABORT_WAIT = 30.0

#: Seconds a drained ``stop`` leaves the agent to end itself at its next safe point (its CLI's notes hook
#: answers the stop request) before its process group is killed.
STOP_GRACE = 5.0


class Interrupt(BaseException):
    """SIGTERM, turned into the same clean stop as Ctrl-C."""


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupt()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class StopRequest:
    """``<git-dir of the worktree>/nerve/stop-request``: the running agent's CLI ends itself when its notes hook
    reads it at the next safe point."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self._path: Path | None = None  #: where it goes
        self._written: Path | None = None  #: the request written for the running agent

    def ask(self, reason: str | None) -> None:
        """Write the request (None: remove a request left behind, e.g. by a killed run)."""
        from ..paths import discover, stop_request_path

        try:
            if self._path is None:
                self._path = stop_request_path(discover(self.workdir).git_dir)
            path = self._path
            if reason is None:
                destroy.remove_own_file(path, within=path.parent, kind="stop-request")
                return
            make_dirs(path.parent)
            with os.fdopen(create_file(path), "w", encoding="utf-8") as fh:  # 0600, as every file under nerve/
                fh.write(reason + "\n")
            self._written = path
        except (NerveError, OSError) as exc:
            if reason is not None:
                log.warning("could not ask the agent to stop (%s); it is killed after the grace period", exc)

    def clear(self) -> None:
        if self._written is not None:
            destroy.keep_or_remove(self._written, within=self._written.parent, kind="stop-request")
            self._written = None


@dataclass
class Supervised:
    """How a supervised agent run ended."""

    value: Any = None
    exc: BaseException | None = None
    stop_reason: str | None = None
    interrupted: str | None = None  #: "Ctrl-C" or "SIGTERM"
    stop_how: str | None = None  #: how a stop ended the agent (None: no stop reached it)


class Supervisor:
    def __init__(self, *, beat: Callable[[str], None], interval: float, on_tick: Callable[[str], Any] | None,
                 task_id: str, stop_request: StopRequest, grace: float = 0.0):
        self.beat, self.interval, self.on_tick, self.task_id = beat, interval, on_tick, task_id
        self.stop_request, self.grace = stop_request, grace

    def run(self, work: Callable[[], Any], abort: threading.Event, status: str, aname: str) -> Supervised:
        """Run ``work`` on a worker thread; heartbeat and tick here until it ends."""
        box: dict[str, Any] = {}
        finished = threading.Event()  # not Thread.join/is_alive: an interrupted join can misreport the thread as ended

        def target() -> None:
            try:
                box["value"] = work()
            except BaseException as exc:  # handed back to this thread
                box["exc"] = exc
            finally:
                finished.set()

        out = Supervised()
        self.beat(status)
        threading.Thread(target=target, daemon=True, name="nerve-agent").start()
        try:
            with sigterm_as_interrupt():
                self._watch(finished, abort, status, out)
        except (KeyboardInterrupt, Interrupt) as exc:
            out.interrupted = "SIGTERM" if isinstance(exc, Interrupt) else "Ctrl-C"
            abort.set()
        if not self._wait_for_end(finished, abort, out):
            out.exc = AdapterAborted(aname, f"did not stop within {ABORT_WAIT:g}s of the abort; left behind")
            return out
        out.value, out.exc = box.get("value"), box.get("exc")
        return out

    def _watch(self, finished: threading.Event, abort: threading.Event, status: str, out: Supervised) -> None:
        next_tick = time.monotonic() + self.interval
        stop_deadline: float | None = None  # a drained stop: the agent's CLI may end it cleanly until then
        while not finished.is_set() and not abort.is_set():
            finished.wait(max(0.0, min(0.1, next_tick - time.monotonic())))
            if stop_deadline is not None and not finished.is_set() and time.monotonic() >= stop_deadline:
                out.stop_how = (f"the agent did not end at a safe point within {self.grace:g}s; "
                                "its process group was killed")
                abort.set()
                break
            if not finished.is_set() and time.monotonic() >= next_tick:
                next_tick += self.interval
                self.beat(status)
                if self.on_tick is not None and out.stop_reason is None:
                    out.stop_reason = self.on_tick(self.task_id) or None
                    if out.stop_reason and self.grace <= 0:
                        out.stop_how = "the agent's process group was killed (its CLI cannot end it cleanly)"
                        abort.set()  # the CLI cannot end the agent itself: kill it now
                    elif out.stop_reason:
                        self.stop_request.ask(out.stop_reason)
                        stop_deadline = time.monotonic() + self.grace
        if out.stop_reason and finished.is_set() and out.stop_how is None:
            out.stop_how = "the agent ended at its next safe point (it read the stop request)"

    def _wait_for_end(self, finished: threading.Event, abort: threading.Event, out: Supervised) -> bool:
        """After an abort the adapter kills the agent's process group; more Ctrl-C cannot skip that, but an
        adapter that ignores the abort is given up on (False) after ABORT_WAIT seconds."""
        deadline = time.monotonic() + ABORT_WAIT
        while not finished.is_set():
            try:
                with sigterm_as_interrupt():
                    finished.wait(0.1)
            except (KeyboardInterrupt, Interrupt) as exc:
                out.interrupted = out.interrupted or ("SIGTERM" if isinstance(exc, Interrupt) else "Ctrl-C")
                abort.set()
            if abort.is_set() and time.monotonic() > deadline and not finished.is_set():
                return False
        return True
