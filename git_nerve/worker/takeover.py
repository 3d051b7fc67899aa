"""`git worker takeover TASK` (shared mode): a task whose holding machine's lease ran out becomes this
machine's: its claim moves here by compare-and-set (the old holder is fenced off: its transitions and done's
push are refused from then on), then the task is spawned here, on its branch when the remote has it (done
pushed it; adopted, so git-nerve never deletes it), else from the integration branch."""

from __future__ import annotations

from ..errors import UsageError
from ..git import remote as gitremote
from .lifecycle import Repo, SpawnResult, spawn


def takeover(repo: Repo, task_id: str) -> tuple[str, SpawnResult]:
    """(the state the task had, the spawn here)."""
    from .. import shared

    state = shared.for_bus(repo.bus)
    if not state.active:
        raise UsageError("takeover moves a task between machines: it needs shared mode (`git nerve init --shared`)")
    state.sync(repo.bus)  # a fresh view, and this machine's observation of the holder's log
    before = state.take(repo.bus, task_id)
    remote = repo.settings.remote
    branch = f"{repo.settings.branch_prefix}{task_id}"
    on_remote = bool(remote) and gitremote.has_branch(repo.cwd, remote, branch)
    return before, spawn(repo, task_id, description=f"taken over ({before})", adopt=on_remote)
