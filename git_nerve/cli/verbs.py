"""What the agent's `git worker start` and `done` and an orchestrator's `git worker status --json`, `show T
--json` and `conflicts` (the radar's reader) do and print, without click (issue 27: an agent runs them often, and
click's import and the commands' registration cost more than the command). Their click commands (cli/worker.py,
cli/radar.py) and entry.py's fast path (plain arguments only: anything else is click's) both call these. Errors
are raised: the caller reports them (common.run_mapped, the one place). Also what `git worker` commands share that
needs no click: a task's row, a state change's line, the radar's recompute after a verb."""

from __future__ import annotations

from .opening import _repo
from .plain import json_out as echo_json
from .plain import line as echo
from .plain import paint
from .plain import warning as warn
from .status_rows import settings_or_none, usage_view


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


def task_of(repo, explicit: str | None, how_to_name: str = "pass --task TASK") -> str:
    from ..context import resolve_task

    return resolve_task(repo.paths.git_dir, explicit, how_to_name)


#: what `git worker show` outside a task's worktree asks for
SHOW_WHICH = "pass TASK_ID (a task id)"


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


def run_done(task: str | None, skip_rebase: bool, allow_empty: bool, as_json: bool,
             replace_remote: bool = False) -> None:
    from ..errors import ConflictError
    from ..worker import lifecycle

    with _repo(create=False) as repo:
        task_id = task_of(repo, task)
        try:
            res = lifecycle.done(repo, task_id, skip_rebase=skip_rebase, allow_empty=allow_empty,
                                 replace_remote=replace_remote)
        except ConflictError as exc:
            if as_json:
                echo_json({**row(repo, task_id), "conflicts": exc.files})
            raise
        radar_after(repo, [task_id])
        for line in res.kept:  # one `kept: ...` line each, as a repair's
            import sys

            from ..text import clean

            sys.stderr.write(clean(line) + "\n")
        if as_json:
            echo_json({**row(repo, task_id), "rebased": res.rebased, "pushed": res.pushed, "tip": res.tip,
                       **({"kept": res.kept} if res.kept else {})})
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
    from ..worktree_prep.secrets import redactor

    w, msgs = lifecycle.show(repo, task_id)
    told = steer_tell.about(repo.bus, task_id)
    masking = redactor(repo.bus.conn, task_id, w.worktree)  # what an agent wrote, masked (git_nerve/redact.py)
    return {"worker": {**status_row(w, settings_or_none(repo)), **prep_fields(repo, w)},
            "trust_flags": lifecycle.trust_flags(repo, w),
            "messages": [{"id": m.id, "ts": clock.iso(m.ts), "kind": m.kind, "payload": masking.value(m.payload)}
                         for m in msgs],
            "inbox": [masking.value(e.as_dict()) for e in told],
            "usage": usage_view(repo.bus.conn, task_id)}


def run_show_json(task_id: str | None) -> None:
    with _repo(create=False) as repo:
        echo_json(show_json(repo, task_of(repo, task_id, SHOW_WHICH)))


def run_status_json(stale: bool) -> None:
    from .status_rows import status_rows

    with _repo() as repo:
        echo_json(status_rows(repo, (), stale)[0])


class Recompute(Exception):
    """`git worker conflicts --json` in the warm reader (``recompute=False``) when the radar's last result must be
    recomputed first: raised before anything is printed, so the reader refuses and the command runs itself (a
    recompute is long git work: the single-threaded reader would hold every other command behind it)."""


def run_conflicts(refresh: bool, as_json: bool, recompute: bool = True) -> None:
    """What `git worker conflicts` does and prints: the radar's last result, recomputed first (and the agents told
    of new conflicts) when asked (``refresh``), never computed, or stale (other machines' footprints changed);
    only the pairs of tasks still live. ``recompute=False``: :class:`Recompute` instead of recomputing."""
    from ..bus import workers
    from ..radar import remote, scan
    from ..worker.lifecycle import open_repo

    with open_repo(ingest=False) as repo:  # the pairs come from git and radar.json, not from the spooled commits
        result = scan.cached(repo.paths.common_dir)
        if refresh or result.at is None or remote.stale(repo.paths.common_dir, repo.bus.conn):
            if not recompute:
                raise Recompute("the radar needs a recompute")
            from ..radar import notify  # only a recompute tells anyone

            result = scan.recompute(repo)
            notify.after(repo, result)
        live = {w.task_id for w in workers.all_workers(repo.bus.conn, states=scan.LIVE)}
        result = scan.among(result, live | _live_elsewhere(repo.bus.conn))
        if as_json:
            echo_json(result.as_dict())
        else:
            _print_pairs(result)


def _print_pairs(result) -> None:
    from .. import clock

    if not result.pairs:
        echo("no overlaps between live workers")
    for p in sorted(result.pairs, key=lambda p: (p.kind != "conflict", p.a, p.b)):
        kind = paint("CONFLICT", fg="red", bold=True) if p.kind == "conflict" else paint("overlap ", fg="yellow")
        theirs = _label(p.b, result.integration) + (f" (machine {p.machine})" if p.machine else "")
        echo(f"{kind}  {_label(p.a, result.integration)} <-> {theirs}: {_where(p)}")
    echo(f"computed {clock.ago(result.at)} ago" if result.at else "")


def _label(t: str, integration: str | None) -> str:
    from ..radar.cache import INTEGRATION

    return f"integration ({integration})" if t == INTEGRATION else t


def _where(pair) -> str:
    parts = []
    for f in pair.files:
        if f in pair.conflicts:
            ranges = pair.conflicts[f]
            lines = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)
            parts.append(f"{f} (lines {lines} of {pair.a})" if lines else f"{f}")
        else:
            parts.append(f"{f} (merges cleanly)")
    return ", ".join(parts)


def _live_elsewhere(conn) -> set[str]:
    """Shared mode: the live tasks other machines hold, as the last sync saw them."""
    from ..bus import shared
    from ..radar.remote import LIVE_CLAIMS, machine_here

    here = machine_here(conn)
    return {c.task_id for c in shared.claims(conn) if c.owner != here and c.state in LIVE_CLAIMS} if here else set()


def plain_args(command: str, args: list[str], *, served: bool = False) -> dict | None:
    """The keyword arguments of ``run_<command>`` from plain arguments, as the one table of options reads them
    (:func:`git_nerve.options.plain`: each option at most once, ``--task`` with a value that is not an option);
    None for anything else (help, an unknown option, a stray argument): click's path reads those, the documented
    way. ``served``: in the warm reader, where `conflicts --json` may not recompute (:class:`Recompute`)."""
    if command not in RUN:
        return None
    from ..options import plain

    kw = plain(f"worker {command}", args)
    if kw is None:
        return None
    if command == "conflicts":  # exactly `conflicts --json`: the text and --refresh are click's path
        return {"refresh": False, "as_json": True, "recompute": not served} if kw["as_json"] else None
    if command in ("status", "show") and not kw.pop("as_json"):
        return None  # the table or text: click's path (its colours, --watch)
    return kw


RUN = {"start": run_start, "done": run_done, "status": run_status_json, "show": run_show_json,
       "conflicts": run_conflicts}
