"""`git nerve init` and `git nerve demo`."""

from __future__ import annotations

from pathlib import Path

import click

from .common import CONTEXT_SETTINGS, echo, echo_json, handle_errors, warn


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handle_errors
def init(as_json: bool) -> None:
    """Set up this repository: the bus, the hooks, the integration branch, nerve.toml."""
    from ..init import init as do_init

    report = do_init()
    if as_json:
        echo_json(report.as_dict())
        return
    for w in report.warnings:
        warn(w)
    echo(f"Bus:         {report.bus}")
    if report.integration:
        echo(f"Integration: {report.integration}" + ("  (pinned: git config nerve.integration)" if report.integration_pinned else ""))
    echo(f"Hooks:       {report.hooks}")
    if report.nerve_toml:
        echo(f"Config:      {report.nerve_toml}" + ("  (created)" if report.nerve_toml_created else "  (kept)"))
        if not report.nerve_toml_tracked:
            echo("             not committed yet: every worktree's run reads this file from the main checkout;")
            echo("             commit it so task branches carry it too: git add nerve.toml && git commit -m 'git-nerve config'")


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Build the demo here (default: a new temporary directory, kept so you can look around).")
@handle_errors
def demo(directory: Path | None) -> None:
    """Walk through the whole lifecycle on a throw-away repository.

    Builds a repository with an origin remote, spawns two workers, commits in
    both, and takes them through done, approve and merge, including one real
    rebase conflict and its resolution. Every step runs the real commands.
    """
    from ..demo import run

    run(directory)


COMMANDS = [init, demo]
