"""The drain as a run's stop hook: `git nerve run` (between rounds) and `git worker run` (each tick).

``hook(task_id) -> reason to stop, or None``: it drains the task's consumer
on its own bus connection (a tick runs on the heartbeat thread), says each
outbox line and each note on ``say`` (stderr), and returns the stop line
when a ``stop`` was drained. A bus that cannot be read never stops the work:
the hook says why once and lets the run go on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from .. import clock
from ..bus.connection import Bus
from ..errors import NerveError
from ..text import clean
from .drain import drain, task_consumer

Say = Callable[[str], None]

PREFIX = "steer: "


# -- what "running" means for `git nerve tell stop` (the locks the runs hold) --------------------------------


def run_lock(locks_dir: Path, task_id: str) -> Path:
    """The lock `git nerve run` holds (exclusive) for the whole run of ``task_id``."""
    return Path(locks_dir) / f"run-{task_id}.lock"


def worker_run_lock(locks_dir: Path, task_id: str) -> Path:
    """The lock each `git worker run` of ``task_id`` holds (shared) while its command runs."""
    return Path(locks_dir) / f"worker-run-{task_id}.lock"


def merge_queue_lock(locks_dir: Path) -> Path:
    """The lock `git worker merge --all` holds while it runs."""
    return Path(locks_dir) / "merge-all.lock"



def _stderr(text: str) -> None:
    sys.stderr.write(clean(text) + "\n")  # notes and outbox lines are told text: never raw control codes
    sys.stderr.flush()


def stop_hook(*, cwd: str | Path | None = None, say: Say | None = None) -> Callable[[str], str | None]:
    """A stop hook for the runs of the repository at ``cwd`` (found on first use)."""
    say = say or _stderr
    state: dict[str, object] = {"bus_path": None, "warned": False}

    def hook(task_id: str) -> str | None:
        try:
            if state["bus_path"] is None:
                from ..paths import discover

                state["bus_path"] = discover(cwd).bus_path
            bus = Bus(state["bus_path"])  # type: ignore[arg-type]
            try:
                result = drain(bus, task_consumer(task_id), task_id=task_id)
            finally:
                bus.close()
        except NerveError as exc:  # the bus translates its driver's errors (BusError)
            if not state["warned"]:
                state["warned"] = True
                say(f"{PREFIX}cannot read the inbox ({getattr(exc, 'message', exc)}); the run goes on unsteered")
            return None
        for text in result.lines:
            say(PREFIX + text)
        for note in result.notes:
            say(f'{PREFIX}note for {task_id} (in its thread): "{note.text}" (queued at {clock.iso(note.ts)})')
        return result.stop_message

    return hook


__all__ = ["PREFIX", "stop_hook"]
