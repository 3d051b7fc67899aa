"""`git nerve ...`: the repository-wide commands. Each feature's commands live in
their own module under ``git_nerve/cli/`` and are listed here."""

from __future__ import annotations

import click

from .. import __version__
from . import completion as completion_cli
from . import console as console_cli
from . import hooks as hooks_cli
from . import knowledge as knowledge_cli
from . import mcp as mcp_cli
from . import setup as setup_cli
from . import shared as shared_cli
from . import steer as steer_cli
from . import thread as thread_cli
from . import trust as trust_cli
from . import workflow as workflow_cli
from .common import CONTEXT_SETTINGS, NerveGroup


@click.group(cls=NerveGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="git nerve")
def nerve() -> None:
    """Coordinate many AI coding agents on one repository.

    The bus (<git-common-dir>/nerve/bus.db) is the single source of truth;
    `git worker` drives each task's lifecycle, `git nerve` holds the rest.
    """


for _module in (setup_cli, shared_cli, hooks_cli, thread_cli, workflow_cli, steer_cli, knowledge_cli, console_cli, mcp_cli,
                completion_cli, trust_cli):
    for _command in _module.COMMANDS:
        nerve.add_command(_command)


@nerve.command("help")
@click.argument("command", required=False)
@click.pass_context
def help_command(ctx: click.Context, command: str | None) -> None:
    """Show help for git nerve or one of its commands."""
    target = nerve.get_command(ctx, command) if command else None
    parent = ctx.parent or ctx
    if target is None:
        click.echo(nerve.get_help(parent))
    else:
        with click.Context(target, info_name=command, parent=parent) as sub:
            click.echo(target.get_help(sub))
