"""`git worker conflicts`: the conflict radar."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, echo, echo_json, style
from .status_rows import marks_at


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


@click.command("conflicts", context_settings=CONTEXT_SETTINGS)
@click.option("--refresh", is_flag=True, help="Recompute every pair now (looks at every worktree's uncommitted work).")
@click.option("--json", "as_json", is_flag=True, help="Print the pairs as JSON.")
def conflicts(refresh: bool, as_json: bool) -> None:
    """Which live workers would collide: with each other, or with the integration branch.

    Compares every pair of live workers (ASSIGNED to APPROVED), committed work
    and uncommitted changes alike, by merging them in memory; no checkout is
    touched. CONFLICT pairs would not merge; overlap pairs change the same
    files but merge cleanly. A commit in a worker recomputes its pairs in the
    background; without --refresh the last result is shown with its age.
    """
    from .. import clock
    from ..radar import remote, scan
    from ..worker.lifecycle import open_repo

    with open_repo(ingest=False) as repo:  # the pairs come from git and radar.json, not from the spooled commits
        result = scan.cached(repo.paths.common_dir)
        if refresh or result.at is None or remote.stale(repo.paths.common_dir, repo.bus.conn):
            from ..radar import notify  # only a recompute tells anyone

            result = scan.recompute(repo)
            notify.tell(repo, result.new_conflicts, result.integration)
        from ..bus import workers

        live = {w.task_id for w in workers.all_workers(repo.bus.conn, states=scan.LIVE)}
        result = scan.among(result, live | _live_elsewhere(repo.bus.conn))
        if as_json:
            echo_json(result.as_dict())
            return
        if not result.pairs:
            echo("no overlaps between live workers")
        for p in sorted(result.pairs, key=lambda p: (p.kind != "conflict", p.a, p.b)):
            kind = style("CONFLICT", fg="red", bold=True) if p.kind == "conflict" else style("overlap ", fg="yellow")
            theirs = _label(p.b, result.integration) + (f" (machine {p.machine})" if p.machine else "")
            echo(f"{kind}  {_label(p.a, result.integration)} <-> {theirs}: {_where(p)}")
        echo(f"computed {clock.ago(result.at)} ago" if result.at else "")


def _live_elsewhere(conn) -> set[str]:
    """Shared mode: the live tasks other machines hold, as the last sync saw them."""
    from ..bus import shared
    from ..radar.remote import LIVE_CLAIMS, machine_here

    here = machine_here(conn)
    return {c.task_id for c in shared.claims(conn) if c.owner != here and c.state in LIVE_CLAIMS} if here else set()


def marks(common_dir) -> dict[str, list[str]]:
    """Per task, what `git worker status` says of it: ``conflict: t2``, ``overlap: t3``."""
    return marks_at(common_dir)[0]


WORKER_COMMANDS = [conflicts]
