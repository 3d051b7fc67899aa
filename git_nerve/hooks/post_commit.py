"""post-commit's Python part: the radar, the knowledge index and (shared mode) the renewal of this machine's
leases (the commit itself is the shim's spool line)."""

from __future__ import annotations

from . import kicks
from ..git import here
from .common import Where, guarded, operation_in_progress, worker_context


def post_commit(where: Where) -> int:
    """The parts of post-commit the shim cannot do: the radar and the knowledge index.

    The commit itself is recorded by the shim (one line in the worktree's
    spool, see :mod:`git_nerve.bus.spool`); the radar's notice is printed by the shim too.
    """
    hook = "post-commit"
    ctx = worker_context(where, hook)
    knowledge = kicks.knowledge_here(where)
    if ctx is None and not knowledge:
        return 0
    if ctx is not None and operation_in_progress(where.git_dir) != "rebase":
        guarded(hook, "conflict radar not refreshed", kicks.radar, where, ctx.task_id)
        guarded(hook, "lease not renewed", kicks.renew_lease, where)
    if knowledge:
        files = guarded(hook, "knowledge index not scheduled", _commit_files)
        kicks.schedule_knowledge(where, files or [], hook)
    return 0


def _commit_files() -> list[str]:
    return here.head_commit_files()
