"""`git worker takeover TASK` (shared mode): a task whose holding machine's lease ran out becomes this
machine's: its claim moves here by compare-and-set (the old holder is fenced off: its transitions and done's
push are refused from then on), then the task is spawned here, on its branch when the remote has it (done
pushed it; adopted, so git-nerve never deletes it), else from the integration branch. What was said to the task
and not delivered yet (notes, stops, posts: other machines' and this one's own) is delivered here at once, each
once (issue 36); the takeover is recorded on the row (whom from, its branch on the remote then), so that `done`
archives what the fenced holder pushed after it (:func:`..owned.taken_from`).

``[shared] takeover = "idle"`` / ``"auto"`` in nerve.toml: `git nerve sync` does the same by itself for the tasks
the setting names (:func:`auto_takeover`)."""

from __future__ import annotations

from ..bus import told, workers
from ..errors import InvalidTransition, UsageError
from ..git import remote as gitremote
from . import owned
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
    from ..bus import shared as cache

    _refuse_earlier_row(repo, task_id)  # before the claim moves: a refusal leaves it to the other machines
    seen = cache.claim(repo.bus.conn, task_id)
    holder = seen.owner if seen is not None else None
    before = state.take(repo.bus, task_id)
    remote = repo.settings.remote
    branch = f"{repo.settings.branch_prefix}{task_id}"
    tip = gitremote.branch_tip(repo.cwd, remote, branch) if remote else None
    res = spawn(repo, task_id, description=f"taken over ({before})", adopt=tip is not None)
    owned.record_takeover(repo, task_id, holder, before, tip)
    told.deliver_held(repo.bus, state.machine)  # what was said to it and not delivered: here, once, at once
    return before, res


def _refuse_earlier_row(repo: Repo, task_id: str) -> None:
    """InvalidTransition when this machine still has a row of ``task_id`` from before (it held the task and was
    fenced off, worker/fencing.py): spawning it again here would meet that row, and its local branch may lack what
    the later holder pushed. Taking a task back onto the machine fenced off from it is not there yet."""
    w = workers.get(repo.bus.conn, task_id)
    if w is not None and w.state != "COMPLETED":
        raise InvalidTransition(
            f"this machine has an earlier row of {task_id} ({w.state}: it held the task and was fenced off); its work "
            f"here is under refs/nerve/archive/{task_id}. Taking a task back onto a machine fenced off from it is not "
            "supported yet: take it over from another machine; nothing changed here")


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
        if workers.get(repo.bus.conn, task_id) is not None:
            continue  # fenced off from it earlier (see _refuse_earlier_row): left to the other machines
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
