"""`git nerve run`, `git nerve validate` and `git worker run`: workflows and wrapped agents."""

from __future__ import annotations

import sys

import click

from ..text import json_safe
from .common import CONTEXT_SETTINGS, echo, echo_json, style, warn


def _progress(kind: str, data: dict) -> None:
    """One line on stderr per step, so stdout stays the summary (or the JSON)."""
    if kind == "start":
        echo(f"run: {data['workflow']} on {data['task']} (at most {data['max_rounds']} agent runs)", err=True)
    elif kind == "role_start":
        echo(f"  {data['role']} ({data['adapter']}) ...", err=True)
    elif kind == "role_end":
        detail = f": {data['detail']}" if data["status"] != "ok" and data["detail"] else ""
        echo(f"  #{data['round']} {data['role']}: {data['status']} in {data['duration_s']:.1f}s{detail}", err=True)


@click.command("run", context_settings=CONTEXT_SETTINGS)
@click.argument("workflow")
@click.option("--task", "task", metavar="TASK", help="Run on TASK instead of the worktree's own task.")
@click.option("--max-rounds", "max_rounds", type=click.IntRange(min=1), metavar="N",
              help="Stop after N agent runs (default: the workflow's own limit).")
@click.option("--adapter", "adapter", metavar="NAME",
              help="Run every role on the built-in adapter NAME (claude, codex, gemini, ...; default: nerve.toml [run] adapter, else the workflow's own).")
@click.option("--sandbox", "sandbox", type=click.Choice(["auto", "bwrap", "none"]), default=None,
              help="The box around each agent process (default: nerve.toml [run] sandbox, else auto: bwrap when usable).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def run(workflow: str, task: str | None, max_rounds: int | None, adapter: str | None, sandbox: str | None,
        as_json: bool) -> None:
    """Run WORKFLOW on a task, in the task's worktree.

    WORKFLOW is a name (.nerve/workflows/NAME.py in this checkout, else a
    built-in such as `develop`) or an installed `package.module:attribute`.
    Each role's result is appended to the task's thread as a round; agents
    read the thread with `git nerve thread`. Ctrl-C stops the running agent
    and its process group and records that.

    \b
    Exit codes: 0 the workflow completed; 1 it failed, hit the round limit
    or was stopped; 2 bad input; 3 the task is not in a runnable state;
    130 interrupted.
    """
    from ..steer.hook import stop_hook
    from ..workflow.runner import run_task

    hook = stop_hook()  # between rounds, and on every heartbeat tick while an agent runs (a stop kills it)
    result = run_task(workflow, task=task, max_rounds=max_rounds, adapter=adapter, sandbox=sandbox,
                      between_rounds=hook, on_tick=hook,
                      on_event=None if as_json else _progress)
    if as_json:
        echo_json(result.as_dict())
    else:
        lines = result.summary()
        colour = {"completed": "green", "interrupted": "yellow"}.get(result.outcome, "red")
        echo(style(lines[0], fg=colour, bold=True))
        for line in lines[1:]:
            echo(line)
    sys.exit(result.exit_code)


@click.command("validate", context_settings=CONTEXT_SETTINGS)
@click.argument("workflows", nargs=-1, metavar="[WORKFLOW]...")
@click.option("--adapter", "adapter", metavar="NAME",
              help="Check every role on the built-in adapter NAME, as `git nerve run --adapter NAME` would run it.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def validate(workflows: tuple[str, ...], adapter: str | None, as_json: bool) -> None:
    """Check that workflows can run here; one line per problem, exit 1 if any.

    Without WORKFLOW: every .nerve/workflows/*.py of this checkout, or the
    built-ins when there are none. Checks nerve.toml (the extract provider
    is configured), that every role has an adapter, and each adapter against
    the installed CLI: the binary, its version, the flags the adapter uses,
    credentials or login (HTTP adapters: their API key variable is set).
    Notes (not problems) name adapters no CI suite runs against the real CLI
    and agent CLIs with no sandbox or permission layer; `env:` lines name the
    variables each adapter receives and those withheld from it (names only).
    """
    from ..workflow.validate import validate_here

    report = validate_here(names=list(workflows) or None, adapter=adapter)
    if as_json:
        echo_json(report.as_dict())
        sys.exit(0 if report.ok else 1)
    for problem in report.problems:
        echo(problem.line())
    for note in report.notes:
        echo(f"note: {note.line()}")
    if report.ok:
        echo(f"ok: {len(report.workflows)} workflow(s), {report.roles} role(s): {', '.join(report.workflows)}")
    for line in report.environment_lines():
        echo(line)
    sys.exit(0 if report.ok else 1)


@click.command(
    "run", context_settings={**CONTEXT_SETTINGS, "ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--task", "task", metavar="TASK", help="Act on TASK instead of the worktree's own task.")
@click.option("--done", is_flag=True, help="Run `git worker done` afterwards when CMD exits 0.")
@click.option("--role", "role", metavar="ROLE", help="The role of the round recorded in the thread (default: CMD's name).")
@click.option("--sandbox", "sandbox", type=click.Choice(["auto", "bwrap", "none"]), default=None,
              help="The box around CMD (default: nerve.toml [run] sandbox, else auto: bwrap when usable).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stderr when CMD ends.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
def worker_run(task: str | None, done: bool, role: str | None, sandbox: str | None, as_json: bool,
               command: tuple[str, ...]) -> None:
    """Run an agent command in the task's worktree, supervised.

    Starts the task if it is ASSIGNED, sends a heartbeat every
    nerve.heartbeatInterval seconds (git config, default 15) while CMD runs,
    forwards SIGINT/SIGTERM to CMD, appends CMD's exit code and the tail of
    its output to the task's thread, and with --done runs `git worker done`
    when CMD exits 0 and git agrees (a new commit on the branch, a clean
    worktree; otherwise exit 1 with the reason). Exits with CMD's exit code (128+N when signal N ended
    it); when --done itself fails (e.g. a rebase conflict), with its error.
    """
    from ..steer.hook import stop_hook
    from ..workflow.wrap import run_command

    argv = list(command)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    result = run_command(
        argv, task=task, done=done, role=role, on_tick=stop_hook(), sandbox=sandbox,
        stdout=getattr(sys.stdout, "buffer", None), stderr=getattr(sys.stderr, "buffer", None),
    )
    if result.heartbeat_error:
        warn(f"some heartbeats could not be recorded: {result.heartbeat_error}")
    summary = f"run: {argv[0]} exited {result.exit_code} in {result.duration_s:.1f}s; round #{result.round} of {result.task_id}"
    if result.stopped:
        summary += f" (stopped: {result.stopped})"
    if result.done is not None:
        summary += "; done: " + (result.done.outcome.current if result.done.outcome else "already in review")
    if as_json:
        echo_json_err(result.as_dict())
    else:
        echo(summary, err=True)
        if result.not_done:
            warn(result.not_done)
    sys.exit(1 if result.not_done else result.exit_code)


def echo_json_err(data: dict) -> None:
    import json

    click.echo(json_safe(json.dumps(data, indent=2, ensure_ascii=False, default=str)), err=True)


@click.command("usage", context_settings=CONTEXT_SETTINGS)
@click.option("--since", metavar="WHEN", help="Only what was used since WHEN: a date (2026-11-29), a time "
              "(2026-11-29T08:00, UTC unless it says) or an age (30m, 12h, 7d, 2w).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def usage(since: str | None, as_json: bool) -> None:
    """What the agents used: tokens and cost per task, role, model, machine and day.

    Every count is what an agent CLI reported for its rounds (never estimated);
    a cost is the CLI's own, else priced from nerve.toml's [prices."<model>"],
    else unknown ("?"; null in --json), and a total with an unknown part is
    unknown too. In shared mode other machines' rounds are counted as the last
    `git nerve sync` brought them.
    """
    from ..workflow.costs import GROUPS, report_here

    got = report_here(since)
    if as_json:
        echo_json(got)
        return
    if not got["total"]["rounds"]:
        echo("no usage recorded" + (" since then" if since else " yet"))
        return
    echo(f"total: {_usage_text(got['total'])}")
    for name in GROUPS:
        echo(style(f"by {name}:", bold=True))
        for row in got[f"by_{name}"]:
            echo(f"  {str(row[name] if row[name] is not None else '?'):<32} {_usage_text(row)}")


def _usage_text(u: dict) -> str:
    from .status_rows import tokens_text

    cost = u.get("cost_usd")
    cached = f" ({tokens_text(u['cached_input_tokens'])} cached)" if u.get("cached_input_tokens") else ""
    return (f"{tokens_text(u.get('input_tokens'))} in{cached}, {tokens_text(u.get('output_tokens'))} out, "
            + (f"${cost:.4f}" if isinstance(cost, (int, float)) else "$?") + f", {u.get('rounds', 0)} round(s)")


COMMANDS = [run, validate, usage]
WORKER_COMMANDS = [worker_run]
