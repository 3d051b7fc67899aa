"""`git worker conflicts`: the conflict radar (its click command; what it does and prints: :func:`.verbs.run_conflicts`)."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, options
from .status_rows import marks_at
from .verbs import run_conflicts


@click.command("conflicts", context_settings=CONTEXT_SETTINGS)
@options("worker conflicts")
def conflicts(refresh: bool, as_json: bool) -> None:
    """Which live workers would collide: with each other, or with the integration branch.

    Compares every pair of live workers (ASSIGNED to APPROVED), committed work
    and uncommitted changes alike, by merging them in memory; no checkout is
    touched. CONFLICT pairs would not merge; overlap pairs change the same
    files but merge cleanly. A commit in a worker recomputes its pairs in the
    background; without --refresh the last result is shown with its age.
    """
    run_conflicts(refresh, as_json)  # the same body as the click-free `conflicts --json` (entry.py, the warm reader)


def marks(common_dir) -> dict[str, list[str]]:
    """Per task, what `git worker status` says of it: ``conflict: t2``, ``overlap: t3``."""
    return marks_at(common_dir)[0]


WORKER_COMMANDS = [conflicts]
