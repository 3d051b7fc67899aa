"""`git nerve thread` and `git nerve post`: a task's conversation, pulled on demand."""

from __future__ import annotations

import sys

import click

from ..errors import UsageError
from ..thread.select import DEFAULT_BUDGET
from .common import CONTEXT_SETTINGS, echo, echo_json, options
from .thread_print import print_view


@click.command("thread", context_settings=CONTEXT_SETTINGS)
@options("nerve thread", budget=str(DEFAULT_BUDGET))
def thread(thread_id: str | None, before: str | None, budget: str, as_json: bool) -> None:
    """Show a task's thread within a budget.

    THREAD_ID is a task id; inside a worker's worktree it defaults to that
    worktree's task. Without --before: the task's briefing (what `git worker
    spawn` was given: its description, branch, base and worktree; always
    shown, its description cut only when it alone exceeds the budget), round 1,
    then the newest rounds going back until the budget is reached; a line `... K messages omitted (use
    --before M to load) ...` marks what was left out. With --before N: the
    rounds before N going back, ending with a hint when older rounds remain.

    Where the repository has a knowledge index, the default view ends with
    `... where to look: PATH:START-END, ... ...`: the files `git nerve
    knowledge query` ranks first for the task's description.
    """
    from ..thread import service

    view = service.show(
        thread_id,
        before=None if before is None else service.parse_positive("--before", before, "a round id"),
        budget=service.parse_positive("--budget", budget, "a number of characters"),
    )
    print_view(view, before, as_json)


@click.command("post", context_settings=CONTEXT_SETTINGS)
@click.argument("content", required=False, metavar="[CONTENT | -]")
@click.option("--task", "task", metavar="TASK", help="The task whose thread to post to (default: this worktree's).")
@click.option("--role", "role", required=True, metavar="ROLE", help="Who speaks: tester, reviewer, ...")
@click.option(
    "--meta", "meta", multiple=True, metavar="KEY=VALUE",
    help="Metadata; the value is read as a YAML scalar (true, 3, 0.5 stay typed). Repeatable.",
)
@click.option("--meta-json", "meta_json", metavar="JSON", help="Metadata as a JSON object (--meta keys override it).")
@click.option("--json", "as_json", is_flag=True, help="Print {thread, round} as JSON.")
def post(content: str | None, task: str | None, role: str, meta: tuple[str, ...], meta_json: str | None, as_json: bool) -> None:
    """Append a round to a task's thread and print its round id.

    The content is CONTENT, or standard input when CONTENT is `-` or absent
    and standard input is not a terminal.

    In shared mode, a post to a task another machine holds goes into this
    machine's log; the holder appends it to the thread at its next sync
    (`--json`: round null, the holding machine, pending true).
    """
    from ..thread import service

    metadata = service.parse_metadata(meta, meta_json)
    service.check_role(role)
    if content == "-" or (content is None and sys.stdin is not None and not sys.stdin.isatty()):
        content = _read_stdin()
    elif content is None:
        raise UsageError("no content: pass CONTENT, or `-` to read it from standard input")
    thread_id, number, machine = service.post_here(task, role=role, content=content, metadata=metadata)
    if machine is not None:  # a task another machine holds: its holder numbers the round
        if as_json:
            echo_json({"thread": thread_id, "round": None, "machine": machine, "pending": True})
        else:
            echo(f"posted to the thread of {thread_id}, held by machine {machine}: it becomes a round there when "
                 f"{machine} syncs (`git nerve thread {thread_id}` shows it after that sync and the next one here)")
        return
    if number is None:  # from inside an agent's box: its spool, a round once git-nerve takes it in
        if as_json:
            echo_json({"thread": thread_id, "round": None, "pending": True})
        else:
            echo(f"posted to the thread of {thread_id} through the box's spool: it becomes a round when git-nerve "
                 "takes it in (at once, outside the box)")
        return
    if as_json:
        echo_json({"thread": thread_id, "round": number})
    else:
        echo(str(number))


def _read_stdin() -> str:
    if sys.stdin is None:
        raise UsageError("no standard input to read the content from")
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text-only stdin: already decoded
        return sys.stdin.read()
    data = stream.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"standard input is not valid UTF-8 (byte {exc.start})") from exc


COMMANDS = [thread, post]
