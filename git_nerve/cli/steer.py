"""`git nerve tell`, `git nerve outbox` and `git worker merge [--all]`: steering running work."""

from __future__ import annotations

import json

import click

from ..text import json_safe
from ..trust import DEFAULT_CHECK
from .common import CONTEXT_SETTINGS, echo, echo_json, warn


@click.command("tell", context_settings=CONTEXT_SETTINGS)
@click.argument("message")
@click.option("--task", "task", metavar="TASK", help="Address TASK's runs (default: this worktree's task).")
@click.option("--all", "all_tasks", is_flag=True, help="Address every task's runs and the merge queue.")
@click.option("--kind", "kind", metavar="[stop|skip|add|note]", help="Say what MESSAGE is instead of reading it from the text.")
@click.option("--json", "as_json", is_flag=True, help="Print the queued message as JSON.")
def tell(message: str, task: str | None, all_tasks: bool, kind: str | None, as_json: bool) -> None:
    """Queue MESSAGE for running work and say where it went (its id: #N; --json for scripts).

    \b
    The kind is read from the start of the text unless --kind says it:
      stop ...          the run ends before its next agent starts (`git nerve run`),
                        the agent is stopped (`git worker run`), or the merge queue
                        ends after the merge under way (`git worker merge --all`)
      skip TASK         take TASK out of the merge queue
      add TASK          put an APPROVED TASK (back) in the merge queue
      anything else     a note: appended at once to the task's thread (role
                        `human`), where the agents read it with `git nerve thread`

    \b
    Without --task or --all a message goes to this worktree's task; outside a
    task's worktree, `stop` goes to the merge queue. skip and add always go to
    the merge queue. Each consumer acts on a message once and answers in
    `git nerve outbox`. A note waits in the thread for the next run; a stop
    with nothing running is refused (exit 3, nothing queued): it reaches a
    `git nerve run` / `git worker run` of the task, or a `git worker merge --all`.

    \b
    In shared mode, --task TASK for a task another machine holds goes into
    this machine's log; the holder queues it (a note joins the thread) at
    its next sync, once, and shows who acted on it (`--json`: id null, the
    holding machine, pending true). A stop told that way is queued there
    whether or not a run is going on. --all stays on this machine.
    """
    from ..steer.tell import tell_here

    told = tell_here(message, task=task, all_tasks=all_tasks, kind=kind)
    from ..paths import discover
    from .opening import listen

    listen(discover().common_dir)  # PostgreSQL shared mode: this clone's listener, when none runs
    waits = _no_mid_run(told)
    if as_json:
        echo_json({**told.as_dict(), **({"waits": waits} if waits else {})})
        return
    echo(told.describe())
    if waits:
        echo(waits)


def _no_mid_run(told) -> str | None:
    """One line when the task's running agent CLI has no point to take a note or a stop mid-run (README table)."""
    if told.kind not in ("note", "stop") or told.scope != "task" or told.machine is not None or not told.task_id:
        return None
    from ..paths import discover
    from ..steer.notes_hook import MID_RUN, STOPS_ITSELF
    from ..workflow.runlog import running_adapter

    name = running_adapter(discover().common_dir, told.task_id)
    if name is None or name in (MID_RUN if told.kind == "note" else STOPS_ITSELF):
        return None
    if told.kind == "note":
        return f"{name} has no mid-run hook: the note waits for its next round (or its `git nerve notes` / MCP call)"
    if name in MID_RUN:
        return f"{name} cannot end itself mid-run: its hook refuses its tool calls from the next one on, and the " \
               "runner ends it at its next tick"
    return f"{name} has no mid-run hook: the runner ends it at its next tick"


@click.command("outbox", context_settings=CONTEXT_SETTINGS)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until Ctrl-C.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with --follow: one object per line).")
def outbox(follow: bool, as_json: bool) -> None:
    """Told messages and their acknowledgements, oldest first.

    A message nobody has read yet is listed as `queued`; once an agent has it,
    a line says it was delivered (to whom), then which consumer acted on it
    and what it did (its text, kind and the time it was queued). --json: each
    object's "status" is queued, delivered or acknowledged.

    In shared mode it also lists each note, stop or post left here for a
    task another machine held (`told elsewhere`), with where it was delivered
    ("delivered on two (inbox #3)"), that it is pending, or why it was not
    (--json: "status" pending, delivered or not delivered, and "machine").
    """
    from ..steer import outbox as box

    bus = box.open_here(create=follow)
    if bus is None:
        if as_json:
            echo_json([])
        return
    try:
        if not follow:
            found = box.lines(bus)
            if as_json:
                echo_json([box.as_dict(line) for line in found])
            for line in [] if as_json else found:
                echo(box.render(line))
            return
        try:
            for line in box.follow(bus):
                if as_json:  # one JSON line: escaped as JSON does, never by echo's text escaping
                    click.echo(json_safe(json.dumps(box.as_dict(line), ensure_ascii=False)))
                else:
                    echo(box.render(line))
        except KeyboardInterrupt:
            return
    finally:
        bus.close()


@click.command("merge", context_settings=CONTEXT_SETTINGS)
@click.argument("task_id", required=False)
@click.option("--all", "all_tasks", is_flag=True, help="Merge every APPROVED task in approval order, as a steerable queue.")
@click.option("--delete-branch", is_flag=True, help="Also delete the task's branch (local and remote) once merged.")
@click.option("--check", metavar="[CMD]", is_flag=False, flag_value=DEFAULT_CHECK,
              help="Run CMD on the merge result first; if it fails nothing moves. A bare --check runs nerve.toml's "
                   "[run] test_command, only once you trusted it (git nerve trust; else exit 7, nothing merged).")
@click.option("--force", is_flag=True, help="Archive uncommitted changes in the worker's worktree and remove it anyway.")
@click.option("--batch", type=click.IntRange(min=1), default=1, metavar="N",
              help="With --all and --check: check N tasks at once with one run; a failing batch is bisected.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def merge(task_id: str | None, all_tasks: bool, delete_branch: bool, check: str | None, force: bool, batch: int,
          as_json: bool) -> None:
    """Merge approved work into the integration branch (APPROVED -> COMPLETED).

    Give TASK_ID, or --all: every APPROVED task, oldest approval first. While the queue
    runs, `git nerve tell "skip TASK"` takes a task out, `git nerve tell
    "add TASK"` puts an APPROVED one back and `git nerve tell stop` ends the
    queue after the merge under way; each is answered in `git nerve outbox`
    and on stderr. A merge that conflicts or fails --check is reported and the
    queue goes on; the exit code is then that of the first failure (1 when
    the queue was stopped). Tasks the conflict radar saw in a conflict go
    after the others. With --batch N, N tasks are merged in memory and
    checked with one run; a failing batch is bisected, the task(s) that break
    the check go back to WORKING with its output in their thread, and the
    rest are merged.

    Shared mode on PostgreSQL: TASK_ID may be a task another machine holds
    (its pushed branch is merged from here; the holder's row follows at its
    next sync), and --all is the queue of every machine's APPROVED tasks in
    approval order: runs on several machines at once each take the next task
    no other run holds, so each task is merged once.
    """
    from ..errors import UsageError
    from . import tasks

    if (task_id is None) == (not all_tasks):
        raise UsageError("give a TASK_ID or --all (not both)")
    if batch > 1 and not (all_tasks and check):
        raise UsageError("--batch needs --all and --check (it batches the check runs)")
    from ..worker.lifecycle import parse_check

    parse_check(check)  # an empty --check is a usage error before anything opens
    if not all_tasks:
        tasks.run_merge(task_id, delete_branch=delete_branch, check=check, force=force, as_json=as_json)
        return
    _merge_all(tasks, delete_branch=delete_branch, check=check, force=force, batch=batch, as_json=as_json)


def _merge_all(tasks, *, delete_branch: bool, check: str | None, force: bool, batch: int, as_json: bool) -> None:
    import sys

    from ..errors import CheckFailed
    from ..steer.queue import merge_all

    with tasks._repo(create=False) as repo:
        from ..worker.lifecycle import check_command

        check = check_command(repo, check)  # a bare --check: [run] test_command, once trusted
        flags = tasks.approved_trust_flags(repo)  # read before the queue moves the integration branch

        def merged(task_id: str, res) -> None:
            for w in [*flags.get(task_id, []), *res.warnings]:
                warn(w)
            if not as_json:
                tasks.print_merge(task_id, res)

        def failed(task_id: str, exc) -> None:
            files = getattr(exc, "files", None)
            echo(f"merge {task_id} failed: {exc.message}" + (f" (files: {', '.join(files)})" if files else ""), err=True)
            for detail in exc.details if isinstance(exc, CheckFailed) else []:  # a check's or a pre-push gate's own words
                echo(f"  {detail}", err=True)

        result = merge_all(repo, delete_branch=delete_branch, check=check, force=force, batch=batch,
                           say=lambda text: echo(f"steer: {text}", err=True), on_merged=merged, on_failed=failed)
        tasks.radar_after(repo, None)
        if as_json:
            echo_json({
                "merged": [tasks.merge_json(repo, t, res) for t, res in result.merged],
                "failed": [{"task_id": t, "error": e.message, "exit_code": int(e.exit_code),
                            **({"files": e.files} if getattr(e, "files", None) else {})} for t, e in result.failed],
                "skipped": result.skipped, "pending": result.pending, "stopped": result.stopped,
                "outbox": result.lines, "exit_code": result.exit_code,
            })
        elif not (result.merged or result.failed or result.skipped or result.pending or result.stopped):
            echo("nothing to merge: no task is APPROVED")
        else:
            echo(result.summary())
        if result.error is not None:
            echo(f"error: {result.error.message}", err=True)
            for detail in result.error.details:
                echo(detail, err=True)
    sys.exit(result.exit_code)


@click.command("notes", context_settings=CONTEXT_SETTINGS)
@click.option("--hook", "hook_cli", metavar="CLI", help="Answer an agent CLI's hook (claude, gemini, qwen, copilot, codex, opencode): hook JSON on stdin, "
              "the CLI's answer on stdout; never fails (errors: one line on stderr, exit 0).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def notes(hook_cli: str | None, as_json: bool) -> None:
    """Hand over the notes this worktree's task has not read yet (and mark them delivered).

    \b
    The person's notes (`git nerve tell --task T "..."`) reach a running agent
    at its next safe point: Claude Code, Gemini CLI, Qwen Code, Copilot CLI,
    Codex and opencode (through a plugin) run `git nerve notes --hook CLI`
    after each tool call (Codex also before one; the adapter installs it for
    the run) and the notes are added to the model's next request; a queued
    `stop` ends Claude Code, Gemini CLI and opencode there (Qwen Code, Copilot
    CLI and Codex: every later tool call is refused, their hooks cannot end
    them). Agents without hooks, and people, run `git nerve notes`. `git nerve
    outbox` and `git worker show` say who read each note (which process, when)
    and when it was acted on (the task's next commit).
    """
    import os
    import sys

    from ..steer import notes_hook

    if hook_cli:
        sys.exit(notes_hook.main(["--hook", hook_cli]))
    got = notes_hook.collect(os.getcwd(), reader="git nerve notes", via="prompt", pid=notes_hook.agent_pid())
    if got["task"] is None:
        from ..errors import UsageError

        raise UsageError("not in a task's worktree: run `git nerve notes` inside the worktree of a task")
    if as_json:
        echo_json(got)
        return
    if got["stop"]:
        echo(f"stop: {got['stop']}")
    echo(got["text"] or f"no new notes for {got['task']}")


COMMANDS = [tell, outbox, notes]
WORKER_COMMANDS = [merge]
