"""What the runner records through steering (the one steer entry point it uses besides its stop hook,
``steer.delivery``): notes a commit has acted on, and a stopped run's outbox line with where its uncommitted
work went (``worker.archive.keep_uncommitted``)."""

from __future__ import annotations

import logging
from pathlib import Path

from ..bus.connection import Bus
from ..errors import NerveError
from .adapters.base import StartFrame
from .result import RunResult

log = logging.getLogger("git_nerve.workflow")


def settle_notes(bus: Bus, task_id: str) -> None:
    """Notes delivered to the agents that a commit since has acted on (see steer.delivery)."""
    from ..steer import delivery

    try:
        delivery.settle(bus, task_id)
    except NerveError as exc:
        log.warning("could not record notes acted on: %s", exc.message)


def _archive(start: StartFrame) -> tuple[tuple | None, str]:
    from ..worker import archive

    try:
        kept = archive.keep_uncommitted(start.workdir, Path(start.workdir), start.task_id,
                                        "uncommitted work when its run was stopped")
    except NerveError as exc:
        log.warning("could not archive the uncommitted work of %s: %s", start.task_id, exc.message)
        return None, f"its uncommitted work could NOT be archived ({exc.message}); it is still in {start.workdir}"
    if kept is None:
        return None, "nothing uncommitted was left"
    ref, sha, files = kept
    return kept, (f"uncommitted work ({len(files)} file(s): {', '.join(files[:5])}) kept under {ref} "
                  f"({sha[:12]}) and left in the worktree")


def keep_stopped_work(bus: Bus, start: StartFrame, stop_how: str | None, result: RunResult) -> None:
    """A stopped run loses nothing: uncommitted work is kept under the task's archive ref (the worktree
    is left as it is), and the outbox says how the agent ended and where its work is."""
    from ..steer import delivery

    kept, where = _archive(start)
    how = stop_how
    if how is None:
        reader = delivery.stop_reached(bus.conn, start.task_id)
        how = f"the agent ended at its next safe point ({reader} answered the stop)" if reader else None
    if how is None and kept is None and "NOT" not in where:
        return  # stopped between agents with nothing uncommitted: the stop's own outbox line says it all
    how = how or "the run stopped before its next agent started"
    try:
        delivery.stop_obeyed(bus, start.task_id, how=f"{how}; {where}")
    except NerveError as exc:
        log.warning("could not record the stop in the outbox: %s", exc.message)
    if kept is not None or "NOT" in where:  # where the work is belongs in the run's own answer
        result.reason = f"{result.reason}; {where}" if result.reason else where
