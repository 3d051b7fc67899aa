"""`git nerve mcp`: the MCP server over stdio, and its registration with agent CLIs.

The SDK is imported only when the server actually starts (nothing of it on any
other command's path, let alone the hooks')."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, NerveGroup, echo, echo_json, options, warn

CLI_NAMES = ("claude", "codex", "gemini", "qwen", "opencode")


@click.group("mcp", cls=NerveGroup, context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@options("nerve mcp")
@click.pass_context
def mcp(ctx: click.Context, task: str | None) -> None:
    """Serve the Model Context Protocol on stdin/stdout for this worktree's task.

    Tools: thread, post, heartbeat, state, done, knowledge_query, conflicts,
    notes, note_acted. An agent CLI starts it (see `git nerve mcp install`);
    started inside a task's worktree it speaks for that task. Elsewhere in a
    repository set up with `git nerve init` it starts too, and its task tools
    answer with an error saying so (knowledge_query still works). Outside a
    git repository, or before `git nerve init`: one line, exit 2.
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..mcptools import tools

    binding = tools.bind(None, task)
    from ..mcptools import front  # the SDK loads only now, behind the front's quick initialize

    front.serve(binding)


@mcp.command("install", context_settings=CONTEXT_SETTINGS)
@click.argument("clis", nargs=-1, metavar="[CLI]...")
@click.option("--scope", type=click.Choice(["user", "project"]), default="user", show_default=True,
              help="user: the CLI's own per-user config (every repository, every worktree); project: the "
                   "CLI's project file at the top of this checkout.")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def install(clis: tuple[str, ...], scope: str, as_json: bool) -> None:
    """Register `git nerve mcp` with agent CLIs (claude, codex, gemini, qwen, opencode).

    Without names: the CLIs found on PATH. Each gets an entry named `nerve` in
    its own configuration format; `git nerve mcp uninstall` removes exactly
    what this added and nothing else (recorded in <git-common-dir>/nerve/mcp.json).
    A configuration file that does not parse is refused, never rewritten.
    """
    from ..mcptools import install as inst

    results = inst.install(list(clis), scope=scope)
    _report(results, as_json)


@mcp.command("uninstall", context_settings=CONTEXT_SETTINGS)
@click.argument("clis", nargs=-1, metavar="[CLI]...")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def uninstall(clis: tuple[str, ...], as_json: bool) -> None:
    """Remove what `git nerve mcp install` added (all of it, or only for the CLIs named)."""
    from ..mcptools import install as inst

    results = inst.uninstall(list(clis))
    _report(results, as_json)


def _report(results, as_json: bool) -> None:
    if as_json:
        echo_json([r.as_dict() for r in results])
    else:
        if not results:
            echo("nothing to do")
        for r in results:
            (warn if r.action == "refused" else echo)(r.line())
    if any(r.action == "refused" for r in results):
        raise SystemExit(2 if all(r.action == "refused" for r in results) else 1)


COMMANDS = [mcp]
