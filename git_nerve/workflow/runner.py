"""Running a workflow on a task: `git nerve run`.

The loop (:mod:`.loop`'s :class:`Runner`): ask the steering hook (``between_rounds``) whether to stop, ask the
moderator for the next role (or the end), enforce the round limit, run the role's adapter in the task's
worktree, extract its typed meta, and append the result to the task's thread as a round:

* role: the role's name; content: the agent's raw output (or the error);
* metadata: the extracted meta plus the exit facts ``adapter``,
  ``duration_s``, ``workflow`` and, on failure, ``error`` (the adapter error
  kind), ``exit_code``, ``timeout_s`` or ``extract_error``.

While an agent runs (on a worker thread) this thread records a heartbeat
every ``heartbeat_interval`` seconds and calls ``on_tick``, which may return
a reason to stop the agent (:mod:`.supervise`). Ctrl-C (and SIGTERM) abort the running agent,
kill its process group and record an ``aborted`` round.

This module is the entry point (``run``, ``run_task``) and re-exports the names used from it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..bus import rounds
from ..bus.connection import Bus
from ..errors import NerveError, UsageError
from .adapters.base import StartFrame
from .loop import EventHook, Runner, StopHook, footer
from .result import EXIT_CODES, RoundReport, RunResult
from .spec import Workflow, problems
from .supervise import ABORT_WAIT, STOP_GRACE


def run(workflow: Workflow, *, bus: Bus, start: StartFrame, **options: Any) -> RunResult:
    """Run ``workflow`` for ``start.task_id``; see :class:`Runner` for the options."""
    found = problems(workflow)
    if found:
        raise UsageError(f"workflow {workflow.name or '?'} is not valid", details=found)
    return Runner(workflow, bus=bus, start=start, **options).run()


# -- from a command line --------------------------------------------------------------------


RUNNABLE = ("ASSIGNED", "WORKING", "CONFLICTED")


def on_adapter(workflow: Workflow, name: str | None) -> Workflow:
    """``workflow`` with every role on the built-in adapter ``name`` (unchanged when None)."""
    if not name:
        return workflow
    from dataclasses import replace

    from .adapters import by_name

    chosen = by_name(name)
    return replace(workflow, roles={k: replace(r, adapter=chosen) for k, r in workflow.roles.items()})


def run_task(
    name: str,
    *,
    task: str | None = None,
    cwd: str | Path | None = None,
    max_rounds: int | None = None,
    adapter: str | None = None,
    sandbox: str | None = None,
    between_rounds: StopHook | None = None,
    on_tick: StopHook | None = None,
    on_event: EventHook | None = None,
) -> RunResult:
    """`git nerve run NAME [--task T] [--max-rounds N] [--adapter A] [--sandbox S]`: everything from discovery to the
    summary. ``sandbox`` (else nerve.toml [run] sandbox, default auto) is the box around each agent process."""
    from ..context import resolve_task
    from ..errors import InvalidTransition
    from ..locks import LockTimeout, hold
    from ..worker import lifecycle
    from ..worker.settings import heartbeat_interval
    from ..worker.transitions import get as get_worker
    from . import config as nerve_config
    from .loader import load

    repo = lifecycle.open_repo(cwd)
    try:
        task_id = resolve_task(repo.paths.git_dir, task)
        w = get_worker(repo.bus, task_id)
        workdir = Path(w.worktree)
        toplevel = repo.paths.toplevel or workdir
        workflow = load(name, toplevel, common_dir=repo.paths.common_dir)  # a repository's file: once trusted
        found = problems(workflow)
        if found:
            raise UsageError(f"workflow {name} is not valid ({workflow.source})", details=found)
        cfg, skipped = nerve_config.trusted(nerve_config.load(toplevel), repo.paths.common_dir, toplevel)
        for line in skipped:
            print(f"warning: {line}", file=sys.stderr)
        workflow = on_adapter(workflow, adapter or cfg.run.adapter)
        if w.state not in RUNNABLE:
            raise InvalidTransition(f"cannot run a workflow on {task_id}: it is {w.state} (runs need {', '.join(RUNNABLE)})")
        if not workdir.is_dir():
            raise UsageError(f"the worktree of {task_id} is missing ({workdir}); run `git worker spawn {task_id}` to recreate it")
        interval, box = heartbeat_interval(repo.config), _box_settings(cfg.run, sandbox)
        try:
            with hold(repo.lock_path(f"run-{task_id}"), timeout=0, what=f"the run lock of {task_id}"):
                if w.state == "ASSIGNED":
                    lifecycle.start(repo, task_id)
                start = StartFrame(
                    task_id=task_id, workflow=workflow.name, content=w.description, workdir=str(workdir),
                    branch=w.branch, base=w.base, first_round=rounds.last_round(repo.bus.conn, task_id) + 1,
                    test_command=cfg.run.test_command or "", **box,
                )
                return run(
                    workflow, bus=repo.bus, start=start, config=cfg, max_rounds=max_rounds, heartbeat_interval=interval,
                    between_rounds=between_rounds, on_tick=on_tick, on_event=on_event,
                )
        except LockTimeout:
            raise NerveError(f"another `git nerve run` is working on {task_id}; wait for it or stop it first") from None
    finally:
        repo.close()


def _box_settings(run_cfg, sandbox: str | None) -> dict[str, Any]:
    """The StartFrame's box fields: which box (``--sandbox``, else [run] sandbox; :func:`.sandbox.choose`),
    its network and what else it hides."""
    from .sandbox import choose

    return {"sandbox": choose(sandbox or run_cfg.sandbox), "network": run_cfg.network != "none",
            "hide": tuple(run_cfg.hide)}


__all__ = ["ABORT_WAIT", "EXIT_CODES", "STOP_GRACE", "EventHook", "RoundReport", "RunResult", "Runner", "StopHook", "footer",
           "run", "run_task"]
