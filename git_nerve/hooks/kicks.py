"""What a hook starts and never waits for: the knowledge index, the conflict radar's recompute, and (shared mode)
the background sync that renews this machine's leases."""

from __future__ import annotations

import sys

from ..bus import workers
from .common import Where, guarded, load_site_packages, open_bus, site_loaded

KNOWLEDGE_FILE = "knowledge.yaml"
INDEX_FILE = "knowledge.db"  # (knowledge/trigger.INDEX_FILE; imported from there only when a sync is scheduled)
#: the live states the radar compares (git_nerve.radar.scan.LIVE; that module imports pygit2)
RADAR_STATES = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")


def knowledge_here(where: Where) -> bool:
    """Whether this commit refreshes the knowledge index (knowledge/trigger.enabled: a knowledge.yaml here, or the
    repository has an index; the default once a spawn made a task's view)."""
    return where.toplevel is not None and (
        (where.toplevel / KNOWLEDGE_FILE).is_file() or (where.common_dir / "nerve" / INDEX_FILE).is_file())


def _import_trigger():
    try:
        from ..knowledge import trigger
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("git_nerve") or not sys.flags.no_site or site_loaded():
            raise
        load_site_packages()
        from ..knowledge import trigger
    return trigger


def schedule_knowledge(where: Where, files: list[str], hook: str) -> None:
    """Ask the knowledge index to re-read ``files``; it must not make git wait."""
    if not files or where.toplevel is None:
        return

    def go() -> None:
        _import_trigger().schedule(where.toplevel, where.git_dir, where.common_dir, files)

    guarded(hook, "knowledge index not scheduled", go)


def radar(where: Where, task_id: str) -> None:
    """Start the radar's recompute of this task's pairs (never waited on); print what it found last time."""
    from ..radar import background

    if where.toplevel is None:
        return
    from ..bus import shared

    with open_bus(where.common_dir, ingest=False) as bus:  # the runner ingests: the request is not held up
        others = [w for w in workers.all_workers(bus.conn, states=RADAR_STATES) if w.task_id != task_id]
        # shared mode: the recompute also publishes this task's footprint for the other machines' radars
        elsewhere = not others and shared.get_meta(bus.conn, shared.MACHINE) is not None
    if others or elsewhere:  # alone, there is nothing to collide with but the integration branch: `git worker conflicts`
        background.request(where.common_dir, where.toplevel, [task_id])  # coalesced: one runner at a time


def renew_lease(where: Where) -> None:
    """Shared mode: a commit in a task's worktree is a sign of life of this machine: once its records have not
    reached the shared store for a tenth of the lease, start the background sync that publishes them (the commit
    among them), so that it keeps its tasks while it works (issue 36; never waited on)."""
    if where.toplevel is None:
        return
    from ..bus import shared

    with open_bus(where.common_dir, ingest=False) as bus:
        if not shared.renewal_due(bus.conn):
            return
        from ..shared.background import renew  # only then: it loads the shared package

        renew(bus.conn, where.common_dir, where.toplevel)
