"""`git nerve sync`: several machines' shared state (shared mode, `git nerve init --shared`)."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, echo, echo_json


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--rebuild", is_flag=True, help="Forget the cached view and read every machine's refs again.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def sync(rebuild: bool, as_json: bool) -> None:
    """Publish this machine's events and fetch every machine's tasks and events (shared mode).

    Events this machine wrote go to refs/nerve/log/<machine> on the remote; every claim and every other
    machine's log are fetched into the bus as a cache (each event once). Offline: exit 4, the events wait.
    """
    from ..shared.status import run_sync

    report = run_sync(rebuild=rebuild)
    if as_json:
        echo_json(report)
        return
    if report["backend"] == "local":
        echo("not in shared mode (nothing to sync): `git nerve init --shared` turns it on")
        return
    echo(f"synced with {report['remote']} as {report['machine']}: {report['exported']} events published, "
         f"{report['ingested']} ingested, {report['claims']} claims updated ({report['seconds']} s)")


COMMANDS = [sync]
