"""Fencing on return (shared mode): this machine learns that a task it has was taken over by another one.

It learns it from the claim chain, as the bus's cache last saw it (:func:`git_nerve.bus.shared.held_elsewhere`):
after a `git nerve sync`, after a compare-and-set of its own that the remote refused (the claim is fetched
then), at the start of every `git worker` command (``cli/tasks._repo``) and at each `git worker heartbeat` of
the task (its fast path: one query of the cache; the background sync only fills the cache, it runs below this
floor, so the next command or heartbeat fences). For
each such task with a live row here (ASSIGNED, WORKING, CONFLICTED, IN_REVIEW, APPROVED), in this order:

1. its running agent is asked to stop, through the steer path every stop takes (a ``stop`` in the task's inbox
   and its notes-pending marker: `git nerve run` / `git worker run` and the agent's notes hook end the run at
   the next safe point); nothing is killed here, no process is looked for;
2. its work is archived under this machine's own archive ref of the task (``refs/nerve/archive/<task>``, the
   archive every removal makes, :func:`git_nerve.worker.archive.archive`): the branch's commits (pushed or not),
   earlier tips, and the worktree's uncommitted and untracked files as a snapshot. Nothing is removed: the
   worktree and the branch stay as they are ("cannot tell" means keep);
3. its row becomes FAILED (messages ``state_change`` by ``fence`` and ``task_failed`` with the reason "taken over
   by machine X" and the archive ref), locally only: the claim is the other machine's now.

From then on every verb of the task here is refused with exit 8 naming the holder (:func:`refuse_fenced`,
called by ``transitions.get`` and before every transition), and so are done's and merge's pushes, which carry
the claim; the pre-push hook refuses a plain push from the task's worktree (``hooks/pre_push.py``, from the
cache).
"""

from __future__ import annotations

from dataclasses import dataclass
import sys

from .. import clock
from ..bus import messages, shared as cache, workers
from ..bus.connection import Bus
from ..errors import GitError, HeldElsewhere
from ..fs import notes_marker, set_marker
from .states import State

VERB = "fence"
#: local states a fence moves to FAILED (a FAILED or COMPLETED row has nothing running and moves no more)
LIVE = (State.ASSIGNED.value, State.WORKING.value, State.CONFLICTED.value, State.IN_REVIEW.value,
        State.APPROVED.value)


@dataclass(frozen=True)
class Fenced:
    task_id: str
    holder: str
    previous: str
    archive: str | None
    #: why the archive could not be made (the work stays in the worktree and on the branch, untouched)
    archive_error: str | None = None

    def describe(self) -> str:
        kept = (f"its work is archived under {self.archive}" if self.archive else
                f"its work could not be archived ({self.archive_error}); the worktree and branch are kept as they are"
                if self.archive_error else "it held no work to archive")
        return (f"fenced: task {self.task_id} was taken over by machine {self.holder}; its run here was asked to stop, "
                f"{kept}, and it is FAILED here (was {self.previous})")


class _Site:
    """What the archive needs of a repository (cwd, bus, settings, paths), for a caller that has only the bus."""

    def __init__(self, bus: Bus, cwd):
        from ..git import config as gitconfig
        from ..paths import discover
        from .settings import load

        self.bus = bus
        self.paths = discover(cwd)
        top = self.paths.toplevel
        self.cwd = top if top is not None and top.is_dir() else self.paths.common_dir
        self.settings = load(self.paths, gitconfig.read(self.cwd))


def fence_returned(bus: Bus, repo=None, *, say=None) -> list[Fenced]:
    """Fence off every task of this machine whose claim another machine holds (see the module); what was fenced.
    Cheap when there is none (one query of the cache). ``repo``: the command's Repo, else one is made from the
    bus's repository. ``say``: where each fence's line goes (stderr by default)."""
    lost = [row for row in cache.held_elsewhere(bus.conn) if row[1] in LIVE]
    if not lost:
        return []
    from .. import shared

    state = shared.for_bus(bus)
    if not state.active:
        return []
    lost = [row for row in cache.held_elsewhere(bus.conn, state.config.machine) if row[1] in LIVE]
    site = repo if repo is not None else (_Site(bus, state.config.cwd) if lost else None)
    done = []
    for task_id, _local, holder, _claimed in lost:
        f = _fence(site, bus, task_id, holder)
        if f is not None:
            done.append(f)
            (say or _stderr)(f.describe())
    return done


def _stderr(line: str) -> None:
    print(f"git-nerve: {line}", file=sys.stderr)


def _fence(site, bus: Bus, task_id: str, holder: str) -> Fenced | None:
    w = workers.get(bus.conn, task_id)
    if w is None or w.state not in LIVE:
        return None
    from ..bus import steer  # here: only a fence needs it, and every `git worker` command imports this module

    why = f"taken over by machine {holder}"
    ts = clock.now()
    with bus.write() as conn:  # 1. the stop, as `git nerve tell --task T stop` queues it
        steer.enqueue(conn, scope="task", kind="stop", text=f"stop: {why}", ts=ts, task_id=w.task_id)
        set_marker(notes_marker(site.paths.nerve_dir, w.task_id))
    set_marker(notes_marker(site.paths.nerve_dir, w.task_id))
    ref, error = None, None
    try:  # 2. everything the task holds here, under this machine's archive ref of it
        from . import archive

        ref = archive.archive(site, w, force=True)
    except GitError as exc:
        error = exc.message
    with bus.write() as conn:  # 3. FAILED here, locally only (the claim is the holder's)
        now = workers.get(conn, task_id)
        if now is None or now.state not in LIVE:
            return None
        if not workers.set_state(conn, task_id, now.state, State.FAILED.value, clock.now()):
            return None
        messages.publish(conn, task_id, "state_change", {"from": now.state, "to": State.FAILED.value, "by": VERB}, ts)
        messages.publish(conn, task_id, "task_failed", {"reason": why, "by": VERB, "holder": holder, "archive": ref}, ts)
    return Fenced(task_id, holder, now.state, ref, error)


def refuse_fenced(bus: Bus, task_id: str) -> None:
    """HeldElsewhere (exit 8) naming the holder when this machine has a row of ``task_id`` but the claim, as last
    seen, is another machine's (after fencing it, when that had not happened yet). Nothing without shared mode."""
    if not cache.held_elsewhere(bus.conn, task_id=task_id):
        return
    from .. import shared

    state = shared.for_bus(bus)
    if not state.active:
        return
    row = next(iter(cache.held_elsewhere(bus.conn, state.config.machine, task_id=task_id)), None)
    if row is None:
        return
    if row[1] in LIVE:
        fence_returned(bus)
    raise held(row[0], row[2], row[3])


def held(task_id: str, holder: str, claimed: str) -> HeldElsewhere:
    return HeldElsewhere(f"task {task_id} is held by machine {holder} ({claimed}): it was taken over, this machine is "
                         f"fenced off (its work here is under refs/nerve/archive/{task_id}); nothing changed here")


def after_refusal(bus: Bus, task_id: str) -> None:
    """A claim of ``task_id`` this machine tried was refused: the remote's word into the cache, then fence what
    it shows taken over (the caller raises its HeldElsewhere after)."""
    from .. import shared

    state = shared.for_bus(bus)
    if not state.active:
        return
    try:
        state.learn(bus, task_id)
    except GitError:
        return
    fence_returned(bus)


__all__ = ["Fenced", "LIVE", "VERB", "after_refusal", "fence_returned", "held", "refuse_fenced"]
