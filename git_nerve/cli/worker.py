"""`git worker ...`: one task = one branch = one worktree.

Orchestrator commands take a TASK-ID; agent commands (start, done, heartbeat,
fail) find their task from the worktree they run in, or --task.
"""

from __future__ import annotations

import sys
import time

import click

from .. import __version__
from .common import (
    CONTEXT_SETTINGS,
    NerveGroup,
    echo,
    echo_json,
    option,
    options,
    warn,
)
from .tasks import (_repo, _row, print_cleanup, radar_after, run_merge)
from .verbs import state_line as _state_line
from ..trust import DEFAULT_CHECK

EXIT_CODES = """\b
Exit codes:
  0 ok              2 usage or bad input    3 invalid transition
  4 git error       5 database error        6 conflict
  7 --check failed, or a pre-push hook refused the merge's push (merge)
  8 shared mode: another machine holds the task (named)
  9 kept: the door could not prove git-nerve made it; nothing removed
"""


@click.group(cls=NerveGroup, context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="git worker")
def worker() -> None:
    """Run many agents on one repository: one task = one branch = one worktree.

    \b
    Orchestrator:  spawn, status, show, approve, request-changes, merge, cancel, retry, setup
    Agent:         start, heartbeat, done, fail, run   (inside the task's worktree)
    """


def _task(repo, explicit: str | None) -> str:
    from ..context import resolve_task

    return resolve_task(repo.paths.git_dir, explicit)


def _outcome_json(repo, outcome, task_id: str) -> dict:
    if outcome.holder:  # another machine's task (PostgreSQL): the claim as moved here
        return {"task_id": task_id, "state": outcome.current, "machine": outcome.holder, "changed": outcome.changed}
    return _row(repo, task_id)


task_option = option("worker start", "task")  # the agent verbs' --task, as the table spells it
json_option = option("worker start", "as_json")


# -- orchestrator ---------------------------------------------------------------------


@worker.command(context_settings=CONTEXT_SETTINGS)
@options("worker spawn")
def spawn(task_id: str, description: str, from_ref: str | None, no_fetch: bool, adopt: bool, wait: bool,
          as_json: bool) -> None:
    """Create TASK_ID's branch and worktree and assign it (-> ASSIGNED).

    A branch <prefix>TASK_ID that already exists (yours, here or on the remote) is refused (exit 2) unless
    --adopt: then the task works on it, and git-nerve never deletes it (merge --delete-branch,
    cancel --cleanup and retry keep it, locally and on the remote).

    The new worktree gets the ignored files .worktreeinclude (and nerve.toml's [worktree] include) names,
    the clone_dirs, a NERVE_PORT block, then runs [worktree] setup in the background (--wait waits; its
    log: <git-common-dir>/nerve/setup/TASK_ID.log). Beyond [worktree] max_live or max_total_bytes the
    spawn is refused (exit 2), naming what to clean up.
    """
    from .spawning import run_spawn

    run_spawn(task_id, description, from_ref, no_fetch, adopt, wait, as_json)


@worker.command(context_settings=CONTEXT_SETTINGS)
@options("worker status")
def status(states: tuple[str, ...], stale: bool, watch: bool, interval: float, as_json: bool) -> None:
    """Dashboard of all workers."""
    from ..worker.states import parse

    try:
        wanted = tuple(parse(s).value for s in states)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--state") from None
    from .worker_view import print_status

    with _repo() as repo:
        if not watch:
            print_status(repo, wanted, stale, as_json)
            return
        try:
            while True:
                if sys.stdout.isatty():
                    click.echo("\x1b[H\x1b[2J", nl=False)
                print_status(repo, wanted, stale, as_json)
                sys.stdout.flush()
                time.sleep(interval)
        except KeyboardInterrupt:
            return


@worker.command(context_settings=CONTEXT_SETTINGS)
@options("worker show")
def show(task_id: str | None, as_json: bool) -> None:
    """A task's state, its whole message history (failed agent launches included) and what was told about it
    (`git nerve tell`). TASK_ID defaults to the task of the worktree you are in."""
    from .verbs import SHOW_WHICH, task_of
    from .worker_view import show_task

    with _repo(create=False) as repo:
        show_task(repo, task_of(repo, task_id, SHOW_WHICH), as_json)


@worker.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task_id")
@click.option("--by", help="Who approves (default: your git user).")
@click.option("--comment", help="Review comment; also added to the task's thread.")
@json_option
def approve(task_id: str, by: str | None, comment: str | None, as_json: bool) -> None:
    """Approve reviewed work (IN_REVIEW -> APPROVED).

    Shared mode on PostgreSQL: also a task another machine holds (its row and
    the agent's thread follow at that machine's next sync)."""
    from ..worker import lifecycle

    with _repo(create=False) as repo:
        outcome = lifecycle.approve(repo, task_id, by=by or repo.config.get("user.name"), comment=comment)
        radar_after(repo, [task_id])
        if as_json:
            echo_json(_outcome_json(repo, outcome, task_id))
        else:
            _state_line(outcome, "Approved", task_id, comment)


@worker.command("request-changes", context_settings=CONTEXT_SETTINGS)
@click.argument("task_id")
@click.option("--comment", help="What to change; also added to the task's thread.")
@click.option("--by", help="Who asks (default: your git user).")
@json_option
def request_changes(task_id: str, comment: str | None, by: str | None, as_json: bool) -> None:
    """Send work back for revision (IN_REVIEW -> WORKING).

    Shared mode on PostgreSQL: also a task another machine holds (its row
    follows and the comment reaches the agent's thread at that machine's next
    sync)."""
    from ..worker import lifecycle

    with _repo(create=False) as repo:
        outcome = lifecycle.request_changes(repo, task_id, comment=comment, by=by or repo.config.get("user.name"))
        if as_json:
            echo_json(_outcome_json(repo, outcome, task_id))
        else:
            _state_line(outcome, "Changes requested", task_id, comment)


@worker.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task_id")
@click.option("--delete-branch", is_flag=True, help="Also delete the task's branch (local and remote) once merged.")
@click.option("--check", metavar="[CMD]", is_flag=False, flag_value=DEFAULT_CHECK,
              help="Run CMD on the merge result first; if it fails nothing moves. A bare --check runs nerve.toml's "
                   "[run] test_command, only once you trusted it (git nerve trust; else exit 7, nothing merged).")
@click.option("--force", is_flag=True, help="Remove the worker's worktree even with uncommitted changes: they "
              "are archived first (files, untracked too, under refs/nerve/archive/<task>; submodule "
              "commits in the submodule's repository). Ignored files (.env, build output) are deleted, never archived: "
              "they are listed.")
@json_option
def merge(task_id: str, delete_branch: bool, check: str | None, force: bool, as_json: bool) -> None:
    """Merge approved work into the integration branch (APPROVED -> COMPLETED)."""
    run_merge(task_id, delete_branch=delete_branch, check=check, force=force, as_json=as_json)





@worker.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task_id")
@click.option("--reason", help="Why the task is cancelled.")
@click.option("--cleanup", is_flag=True, help="Remove the worktree and branch (the tip is archived first).")
@click.option("--force", is_flag=True, help="With --cleanup: remove the worktree even with uncommitted changes, a stopped "
              "rebase or a branch deleted by hand: they are archived first (files, untracked too, under "
              "refs/nerve/archive/<task>; submodule commits in the submodule's repository). Ignored files (.env, "
              "build output) are deleted, never archived: they are listed.")
@json_option
def cancel(task_id: str, reason: str | None, cleanup: bool, force: bool, as_json: bool) -> None:
    """Abort a task (-> FAILED)."""
    from ..worker import lifecycle

    with _repo(create=False) as repo:
        res = lifecycle.cancel(repo, task_id, reason=reason, cleanup=cleanup, force=force)
        radar_after(repo, None)
        for w in res.warnings:
            warn(w)
        if as_json:
            echo_json({**_row(repo, task_id), "archive_ref": res.archive_ref,
                       "worktree_removed": res.removed_worktree, "branch_deleted": res.deleted_branch,
                       "submodule_archives": res.submodule_archives, "ignored_removed": res.ignored_removed,
                       "branch_kept": res.kept})
            return
        _state_line(res.outcome, "Cancelled", task_id)
        print_cleanup(res)


@worker.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task_id")
@json_option
def retry(task_id: str, as_json: bool) -> None:
    """Assign a failed task again (FAILED -> ASSIGNED)."""
    from ..worker import lifecycle

    with _repo(create=False) as repo:
        outcome = lifecycle.retry(repo, task_id)
        if as_json:
            echo_json(_row(repo, task_id))
        else:
            _state_line(outcome, "Retrying", task_id)
            echo(f"  Worktree: {outcome.worker.worktree}")


@worker.command("setup", context_settings=CONTEXT_SETTINGS)
@click.argument("task_id")
@click.option("--wait", is_flag=True, help="Return once the setup ended (exit 1 when it failed).")
@json_option
def setup_cmd(task_id: str, wait: bool, as_json: bool) -> None:
    """Run a task's [worktree] setup again in its worktree (a running one is stopped first)."""
    from ..worker import lifecycle
    from .prep import print_prep, refuse_failed_setup

    with _repo(create=False) as repo:
        prep = lifecycle.setup_again(repo, task_id, wait=wait)
        for w in prep.warnings:
            warn(w)
        if as_json:
            echo_json({"task_id": task_id, "setup": prep.setup_state, "setup_log": prep.setup_log})
        else:
            print_prep(prep)
        refuse_failed_setup(prep if wait else None)


# -- agent ---------------------------------------------------------------------------------


@worker.command(context_settings=CONTEXT_SETTINGS)
@options("worker start")
def start(task: str | None, as_json: bool) -> None:
    """Begin work (ASSIGNED -> WORKING; CONFLICTED -> WORKING after `git rebase --abort`). Run inside the task's worktree."""
    from .verbs import run_start

    run_start(task, as_json)


@worker.command(context_settings=CONTEXT_SETTINGS)
@options("worker done")
def done(task: str | None, skip_rebase: bool, allow_empty: bool, replace_remote: bool, as_json: bool) -> None:
    """Finish: rebase onto the integration branch, push, ask for review (-> IN_REVIEW)."""
    from .verbs import run_done

    run_done(task, skip_rebase, allow_empty, as_json, replace_remote)


@worker.command(context_settings=CONTEXT_SETTINGS)
@options("worker heartbeat")
def heartbeat(task: str | None, status_text: str | None, progress: float | None, as_json: bool) -> None:
    """Liveness signal (call every 10-30 s, or let the hooks and `git worker run` do it)."""
    # The console script takes a faster path (no click); this one serves --help and in-process use.
    from ..worker.heartbeat import main

    argv = [*(["--task", task] if task else []), *(["--status", status_text] if status_text else []),
            *(["--progress", str(progress)] if progress is not None else []), *(["--json"] if as_json else [])]
    code = main(argv)
    if code:
        sys.exit(code)


@worker.command(context_settings=CONTEXT_SETTINGS)
@click.argument("reason")
@task_option
@json_option
def fail(reason: str, task: str | None, as_json: bool) -> None:
    """Give up on the task (-> FAILED), saying why."""
    from ..worker import lifecycle

    with _repo(create=False) as repo:
        task_id = _task(repo, task)
        outcome = lifecycle.fail(repo, task_id, reason)
        if as_json:
            echo_json(_row(repo, task_id))
        else:
            _state_line(outcome, "Failed", task_id)


@worker.command("help", context_settings=CONTEXT_SETTINGS)
@click.argument("command", required=False)
@click.pass_context
def help_command(ctx: click.Context, command: str | None) -> None:
    """Show help for git worker or one of its commands."""
    parent = ctx.parent or ctx
    target = worker.get_command(ctx, command) if command else None
    if target is None:
        click.echo(worker.get_help(parent))
    else:
        with click.Context(target, info_name=command, parent=parent) as sub:
            click.echo(target.get_help(sub))


def _register_extra() -> None:
    from . import workflow

    for command in getattr(workflow, "WORKER_COMMANDS", []):
        worker.add_command(command)
    from . import radar, shared, steer

    for command in [*radar.WORKER_COMMANDS, *shared.WORKER_COMMANDS]:
        worker.add_command(command)
    for command in getattr(steer, "WORKER_COMMANDS", []):
        if command.name in worker.commands:  # a feature may extend an existing command (e.g. merge --all)
            worker.commands.pop(command.name)
        worker.add_command(command)


_register_extra()
