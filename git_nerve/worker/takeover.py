"""`git worker takeover TASK` (shared mode): a task whose holding machine's lease ran out becomes this
machine's: its claim moves here by compare-and-set (the old holder is fenced off: its transitions and done's
push are refused from then on), then the task is spawned here, on its branch when the remote has it (done
pushed it; adopted, so git-nerve never deletes it), else from the integration branch.

``[shared] takeover = "idle"`` / ``"auto"`` in nerve.toml: `git nerve sync` does the same by itself for the tasks
the setting names (:func:`auto_takeover`)."""

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
    return _take(repo, state, task_id)


def _take(repo: Repo, state, task_id: str) -> tuple[str, SpawnResult]:
    before = state.take(repo.bus, task_id)
    remote = repo.settings.remote
    branch = f"{repo.settings.branch_prefix}{task_id}"
    on_remote = bool(remote) and gitremote.has_branch(repo.cwd, remote, branch)
    return before, spawn(repo, task_id, description=f"taken over ({before})", adopt=on_remote)


def auto_takeover(repo: Repo, *, say=None) -> list[dict]:
    """After a sync (``[shared] takeover = "idle"`` or ``"auto"``): every task the setting lets this machine take
    over (:meth:`~git_nerve.shared.gitremote.GitRemoteState.takeable`) claimed by compare-and-set and spawned
    here, as `git worker takeover` does. Of several machines syncing at once exactly one wins each task; the
    others skip it. What was taken: ``{"task", "from", "state"}`` each. ``say``: one line per task not taken
    for another reason than a lost race (its spawn failed: rerun `git worker takeover`)."""
    from .. import shared
    from ..bus import shared as cache
    from ..errors import HeldElsewhere, NerveError

    state = shared.for_bus(repo.bus)
    if not state.active:
        return []
    taken = []
    for task_id in state.takeable(repo.bus):
        c = cache.claim(repo.bus.conn, task_id)
        try:
            before, _res = _take(repo, state, task_id)
        except HeldElsewhere:
            continue  # another machine took it first (or its holder came back): the compare-and-set said so
        except NerveError as exc:
            if say is not None:
                say(f"could not take over {task_id}: {exc.message} (`git worker takeover {task_id}` finishes it)")
            continue
        taken.append({"task": task_id, "from": c.owner if c else None, "state": before})
    return taken
