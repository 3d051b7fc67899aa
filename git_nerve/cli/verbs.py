"""What the agent's `git worker start` and `done` and an orchestrator's `git worker status --json` and `show T
--json` do and print,
without click (issue 27: an agent runs them often, and click's import and the commands' registration cost more
than the command). Their click commands (cli/worker.py) and entry.py's fast path (plain arguments only: anything
else is click's) both call these. Errors are raised: the caller reports them (common.run_mapped, the one place).
Also what `git worker` commands share that needs no click: a task's row, a state change's line, the radar's
recompute after a verb."""

from __future__ import annotations

from .opening import _repo
from .plain import json_out as echo_json
from .plain import line as echo
from .plain import paint
from .plain import warning as warn
from .status_rows import settings_or_none


def row(repo, task_id: str) -> dict:
    from ..bus import workers
    from ..worker.status import row as status_row

    return status_row(workers.get(repo.bus.conn, task_id), settings_or_none(repo))


def radar_after(repo, tasks: list[str] | None) -> None:
    """What the radar compares changed (done, merge, cancel): its recompute starts in the background."""
    from ..radar import background

    background.after(repo, tasks)


def state_line(outcome, verb_done: str, task_id: str, comment: str | None = None) -> None:
    if outcome.changed:
        echo(f"{verb_done}: {task_id} ({outcome.previous} -> {paint(str(outcome.current), bold=True)})")
    else:
        echo(f"{verb_done}: {task_id} (already {outcome.current}"
             + ("; the comment is in its thread)" if comment and comment.strip() else ")"))
    if getattr(outcome, "holder", None):  # another machine's task (PostgreSQL): its row follows there
        echo(f"  Held by machine {outcome.holder}: its row" + (" and the agent's thread" if comment and comment.strip() else "")
             + " follow at its next sync")


def task_of(repo, explicit: str | None) -> str:
    from ..context import resolve_task

    return resolve_task(repo.paths.git_dir, explicit)


def run_start(task: str | None, as_json: bool) -> None:
    from ..worker import lifecycle
    from .prep import warn_setup

    with _repo(create=False) as repo:
        task_id = task_of(repo, task)
        outcome = lifecycle.start(repo, task_id)
        warn_setup(repo, task_id)
        if not outcome.changed:
            warn(f"{task_id} is already WORKING")
        if as_json:
            echo_json(row(repo, task_id))
        else:
            state_line(outcome, "Started", task_id)


def run_done(task: str | None, skip_rebase: bool, allow_empty: bool, as_json: bool) -> None:
    from ..errors import ConflictError
    from ..worker import lifecycle

    with _repo(create=False) as repo:
        task_id = task_of(repo, task)
        try:
            res = lifecycle.done(repo, task_id, skip_rebase=skip_rebase, allow_empty=allow_empty)
        except ConflictError as exc:
            if as_json:
                echo_json({**row(repo, task_id), "conflicts": exc.files})
            raise
        radar_after(repo, [task_id])
        if as_json:
            echo_json({**row(repo, task_id), "rebased": res.rebased, "pushed": res.pushed, "tip": res.tip})
            return
        if res.already:
            echo(f"Ready for review: {task_id} (already)")
            return
        if res.rebased:
            echo(f"Rebased {len(res.rewritten)} commit(s) onto the integration branch")
        if res.pushed:
            echo("Pushed")
        echo(f"Ready for review: {task_id}")


def show_json(repo, task_id: str) -> dict:
    """What `git worker show T --json` prints: a task another machine holds (shared mode) as the cache has it,
    else its row, its whole message history and what was told about it."""
    from .. import clock
    from ..shared.status import elsewhere
    from ..steer import tell as steer_tell
    from ..worker import lifecycle
    from ..worker.status import row as status_row
    from .prep import prep_fields

    view = elsewhere(repo.bus, task_id)
    if view is not None:
        return view
    w, msgs = lifecycle.show(repo, task_id)
    told = steer_tell.about(repo.bus, task_id)
    return {"worker": {**status_row(w, settings_or_none(repo)), **prep_fields(repo, w)},
            "messages": [{"id": m.id, "ts": clock.iso(m.ts), "kind": m.kind, "payload": m.payload} for m in msgs],
            "inbox": [e.as_dict() for e in told]}


def run_show_json(task_id: str) -> None:
    with _repo(create=False) as repo:
        echo_json(show_json(repo, task_id))


def run_status_json(stale: bool) -> None:
    from .status_rows import status_rows

    with _repo() as repo:
        echo_json(status_rows(repo, (), stale)[0])


def plain_args(command: str, args: list[str]) -> dict | None:
    """The keyword arguments of ``run_<command>`` from plain arguments (each flag at most once; ``--task`` with a
    value that is not an option); None for anything else (help, an unknown option, a stray argument): click's
    path reads those, the documented way."""
    flags = {"start": {"--json": "as_json"},
             "done": {"--json": "as_json", "--skip-rebase": "skip_rebase", "--allow-empty": "allow_empty"},
             "status": {"--json": "as_json", "--stale": "stale"}, "show": {"--json": "as_json"}}.get(command)
    if flags is None:
        return None
    kw: dict = {name: False for name in flags.values()}
    if command in ("start", "done"):
        kw["task"] = None
    if command == "show":
        kw["task_id"] = None
    it = iter(args)
    for a in it:
        name, eq, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if a in flags and not kw[flags[a]]:
            kw[flags[a]] = True
        elif name == "--task" and "task" in kw and kw["task"] is None:
            value = inline if eq else next(it, None)
            if not value or (not eq and value.startswith("-")):
                return None
            kw["task"] = value
        elif "task_id" in kw and kw["task_id"] is None and a and not a.startswith("-"):
            kw["task_id"] = a
        else:
            return None
    if command in ("status", "show") and not kw.pop("as_json"):
        return None  # the table or text: click's path (its colours, --watch)
    if kw.get("task_id", "") is None:
        return None  # show without a task id: click's usage error
    return kw


RUN = {"start": run_start, "done": run_done, "status": run_status_json, "show": run_show_json}
