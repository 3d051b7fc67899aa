"""post-rewrite's Python part: the hint to a CONFLICTED task, the radar's recompute after a finished rebase,
the knowledge index (the rewrite itself is the shim's spool line)."""

from __future__ import annotations

import sys

from ..bus import workers
from ..worker.states import State
from . import kicks
from ..git import here
from .common import NEXT_AFTER_REBASE, Where, guarded, open_bus, operation_in_progress, worker_context


def parse_rewrites(text: str) -> list[list[str]]:
    """git's post-rewrite input: ``<old-sha> <new-sha> [<extra>]`` per line."""
    pairs = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            pairs.append([parts[0], parts[1]])
    return pairs


def post_rewrite(where: Where, source: str, stdin: str) -> int:
    """The parts of post-rewrite the shim cannot do: the hint to a CONFLICTED task, the knowledge index.

    The rewrite itself is recorded by the shim (see :mod:`git_nerve.bus.spool`).
    """
    hook = "post-rewrite"
    pairs = parse_rewrites(stdin)
    ctx = worker_context(where, hook)
    knowledge = kicks.knowledge_here(where)
    if ctx is not None and guarded(hook, "task state not read", _conflicted_rebase_finished, where, ctx.task_id, source):
        sys.stderr.write(f"git-nerve: {ctx.task_id} is CONFLICTED and its rebase is finished; next: {NEXT_AFTER_REBASE}\n")
    if ctx is not None and source == "rebase" and not (where.git_dir / "rebase-merge" / "patch").exists():
        guarded(hook, "conflict radar not refreshed", kicks.radar, where, ctx.task_id)  # the tip moved
    if knowledge and pairs:
        old_tip = pairs[-1][0]
        files = guarded(hook, "knowledge index not scheduled", lambda: here.diff_names(old_tip, "HEAD"))
        kicks.schedule_knowledge(where, files or [], hook)
    return 0


def _conflicted_rebase_finished(where: Where, task_id: str, source: str) -> bool:
    """True when the next step is ``done --skip-rebase``."""
    # git runs post-rewrite "rebase" as the rebase's last step, before it removes its state
    if not (source == "rebase" or operation_in_progress(where.git_dir) != "rebase"):
        return False
    with open_bus(where.common_dir) as bus:
        w = workers.get(bus.conn, task_id)
    return w is not None and w.state == State.CONFLICTED.value
