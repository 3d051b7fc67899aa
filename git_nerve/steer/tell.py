"""`git nerve tell`: queue a message for running work; and what was told about a task.

Where a message goes:

* ``skip <task>`` / ``add <task>``: the merge queue (`git worker merge --all`);
  they take no ``--task``/``--all``;
* ``--task T``: task T's runs (`git nerve run`, `git worker run`);
* ``--all``: every task's runs and the merge queue;
* neither: the task of the worktree the command runs in; outside a task's
  worktree a ``stop`` goes to the merge queue and a note is refused (it would
  reach no thread).

Shared mode (issue 24): ``--task T`` for a task another machine holds leaves the message in this
machine's log instead (:mod:`.remote`); the holder queues it in its inbox at its sync, once. A
message without ``--task`` (``--all``, this worktree's task, the merge queue) stays on this machine.

A ``stop`` reaches only what runs when it is told: `tell_here` (the command) and the
console pass ``locks_dir``, and then a stop with nothing running is refused (exit 3,
nothing queued) instead of lying in wait for a later run. "Running" means: for a task, a
`git nerve run` of it (its run lock) or a `git worker run` of it (a shared lock of its
own); for the merge queue, a `git worker merge --all` (the merge queue lock); ``--all``
needs at least one of those.

A note is appended at once to the thread of each task it addresses (role
``human``), so the agents read it with `git nerve thread` whether or not a
consumer runs. Bad input (empty message, unknown kind or task) raises
:class:`UsageError` before anything is written: nothing is queued.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
from pathlib import Path

from .. import clock
from ..bus import rounds, steer, told, workers
from ..bus.connection import Bus
from ..errors import InvalidTransition, UsageError
from ..locks import is_held
from .hook import merge_queue_lock, run_lock, worker_run_lock
from . import delivery, pending, remote
from .drain import QUEUE_CONSUMER, task_consumer
from .parse import COMMANDS, parse

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: the role of the rounds `tell` appends to a thread
ROLE = told.ROLE
#: tasks a note to every task no longer reaches
FINISHED = ("COMPLETED", "FAILED")


@dataclass(frozen=True)
class Told:
    """A queued message, and the thread rounds its note became."""

    id: int
    ts: float
    kind: str
    scope: str
    text: str
    task_id: str | None = None
    target: str | None = None
    rounds: tuple[tuple[str, int], ...] = ()  #: (task, round) per thread the note was appended to
    machine: str | None = None  #: shared mode: the machine holding the task, which queues it at its sync

    def as_dict(self) -> dict[str, Any]:
        held = {"id": None, "machine": self.machine, "pending": True} if self.machine is not None else {}
        return {
            "id": self.id, "ts": clock.iso(self.ts), "kind": self.kind, "scope": self.scope, "task": self.task_id,
            "target": self.target, "text": self.text,
            "rounds": [{"task": t, "round": n} for t, n in self.rounds], **held,
        }

    def describe(self) -> str:
        """One line for people: what was queued, for whom, and what happens next."""
        if self.machine is not None:
            return (f"{self.kind} for {self.task_id}, held by machine {self.machine}: pending delivery, it is queued "
                    f"there when {self.machine} syncs, or on the machine that takes the task over (`git nerve outbox` "
                    f"here says where it was delivered)")
        if self.kind in ("skip", "add"):
            what = f"{self.kind} {self.target} for the merge queue (git worker merge --all)"
        elif self.scope == "all":
            what = f"{self.kind} for every task and the merge queue"
        elif self.scope == "queue":
            what = f"{self.kind} for the merge queue (git worker merge --all)"
        else:
            what = f"{self.kind} for {self.task_id}"
        if self.kind == "note":
            where = ", ".join(f"{t} #{n}" for t, n in self.rounds)
            return f"queued #{self.id}: {what}; added to the thread ({where})"
        return f"queued #{self.id}: {what}; it takes effect when the next consumer drains it"


def _unknown(conn, task_id: str, hint: str = "") -> UsageError:
    near = workers.get_by_key(conn, task_id)
    mean = f" (did you mean {near.task_id!r}?)" if near is not None and near.task_id != task_id else ""
    return UsageError(f"unknown task {task_id!r}{mean}{hint}")


def _checked(text: str, task: str | None, all_tasks: bool, kind: str | None):
    """The message stripped and parsed, or the UsageError that refuses it before anything is written."""
    if "\0" in text:
        raise UsageError("the message must not contain NUL characters")
    text = text.strip()
    if not text:
        raise UsageError('empty message: say what you want, e.g. `git nerve tell --task t1 "stop"`')
    if task is not None and all_tasks:
        raise UsageError("--task and --all exclude each other")
    addressed = task is not None or all_tasks
    parsed = parse(text, kind, commands=("stop",) if addressed else COMMANDS)
    if parsed.kind in ("skip", "add") and addressed:
        raise UsageError(f"{parsed.kind} steers the merge queue (git worker merge --all); it takes no --task or --all")
    return text, parsed


def tell(
    bus: Bus,
    text: str,
    *,
    task: str | None = None,
    all_tasks: bool = False,
    kind: str | None = None,
    here_task: str | None = None,
    locks_dir: Path | None = None,
) -> Told:
    """Queue ``text``; see the module docstring for where it goes. ``here_task``: the worktree's task.
    ``locks_dir``: refuse a stop that nothing running would act on (see the module docstring)."""
    text, parsed = _checked(text, task, all_tasks, kind)
    ts = clock.now()
    with bus.write() as conn:
        task_id: str | None = None
        if parsed.kind in ("skip", "add"):
            scope = "queue"
            if workers.get(conn, parsed.target or "") is None:
                hint = "" if parsed.explicit else "; to send the text as a note, pass --kind note and --task"
                raise _unknown(conn, parsed.target or "", hint)
        elif all_tasks:
            scope = "all"
        elif task is not None or here_task is not None:
            scope, task_id = "task", task if task is not None else here_task
            if workers.get(conn, task_id) is None:
                held = remote.holder(conn, task_id) if task is not None else None
                if held is None:
                    raise _unknown(conn, task_id)
                told_id = remote.leave(conn, task_id, kind=parsed.kind, text=text, ts=ts, machine=held)
                return Told(told_id, ts, parsed.kind, scope, text, task_id, machine=held)
        elif parsed.kind == "stop":
            scope = "queue"
        else:
            raise UsageError("a note needs a task: pass --task TASK or --all, or run this inside a task's worktree")

        if parsed.kind == "stop" and locks_dir is not None:
            _refuse_idle_stop(conn, locks_dir, scope, task_id)
        readers: list[str] = []
        if parsed.kind == "note":
            if scope == "all":
                readers = [w.task_id for w in workers.all_workers(conn) if w.state not in FINISHED]
                if not readers:
                    raise UsageError("no task is live (every task is COMPLETED or FAILED): the note would reach no thread")
            else:
                readers = [task_id]
        message_id = steer.enqueue(conn, scope=scope, kind=parsed.kind, text=text, ts=ts, task_id=task_id,
                                   target=parsed.target)
        hooked = pending.addressed(conn, scope=scope, kind=parsed.kind, task_id=task_id)
        pending.mark(bus.path.parent, hooked)  # before the commit, and again after it (see steer.pending)
        appended = tuple(
            (t, rounds.append(conn, t, role=ROLE, content=text, metadata={"inbox_id": message_id}, ts=ts))
            for t in readers
        )
    pending.mark(bus.path.parent, hooked)
    return Told(message_id, ts, parsed.kind, scope, text, task_id, parsed.target, appended)


def task_running(locks_dir: Path, task_id: str) -> bool:
    return is_held(run_lock(locks_dir, task_id)) or is_held(worker_run_lock(locks_dir, task_id))


def _refuse_idle_stop(conn, locks_dir: Path, scope: str, task_id: str | None) -> None:
    if scope == "task":
        canonical = workers.get(conn, task_id or "").task_id  # type: ignore[union-attr]
        if not task_running(locks_dir, canonical):
            raise InvalidTransition(f"nothing to stop: no `git nerve run` or `git worker run` of {canonical} is running "
                                    "(nothing was queued)")
    elif scope == "queue":
        if not is_held(merge_queue_lock(locks_dir)):
            raise InvalidTransition("nothing to stop: no `git worker merge --all` is running (nothing was queued; "
                                    "to stop a task's run: git nerve tell --task TASK stop)")
    elif not is_held(merge_queue_lock(locks_dir)) and not any(
            task_running(locks_dir, w.task_id) for w in workers.all_workers(conn) if w.state not in FINISHED):
        raise InvalidTransition("nothing to stop: no run and no `git worker merge --all` is running (nothing was queued)")


def tell_here(
    text: str, *, task: str | None = None, all_tasks: bool = False, kind: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Told:
    """`git nerve tell` from ``cwd``: its repository's bus, its worktree's task."""
    from .. import context
    from ..paths import discover

    paths = discover(cwd)
    here = context.read(paths.git_dir) if task is None and not all_tasks else None
    bus = Bus(paths.bus_path)
    try:
        result = tell(bus, text, task=task, all_tasks=all_tasks, kind=kind, here_task=here.task_id if here else None,
                    locks_dir=paths.nerve_dir / "locks")
    finally:
        bus.close()
    if result.machine is not None:  # shared mode: a sync in the background carries it, as a post's does
        from ..shared import open_state

        state = open_state(paths.common_dir)
        if state.active and state.config.background:
            from ..shared.background import spawn

            spawn(paths.common_dir, state.config.cwd)
    return result


# -- what was told about a task (`git worker show`) ------------------------------------------


@dataclass(frozen=True)
class Entry:
    message: steer.InboxMessage
    answers: tuple[steer.OutboxLine, ...]  #: the outbox lines of the consumers that concern the task
    expected: tuple[str, ...]  #: those consumers
    note: Any = None  #: a note's :class:`~git_nerve.steer.delivery.NoteStatus` (queued, delivered, acted on)

    @property
    def status(self) -> str:
        """A note's delivery (queued, delivered to whom, acted on), or which consumers acted on it and which have yet to."""
        if self.message.kind == "note":
            return self.note.describe() if self.note is not None else "in the thread"
        acted = {a.consumer for a in self.answers}
        parts = []
        done = [c for c in self.expected if c in acted]
        if done:
            parts.append("acted on by " + ", ".join(done))
        waiting = [c for c in self.expected if c not in acted]
        if waiting:
            parts.append("waiting for " + ", ".join(waiting))
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        m = self.message
        return {
            "id": m.id, "ts": clock.iso(m.ts), "scope": m.scope, "kind": m.kind, "target": m.target, "text": m.text,
            "status": self.status,
            **({"delivery": self.note.as_dict()} if self.note is not None else {}),
            "outbox": [{"ts": clock.iso(a.ts), "consumer": a.consumer, "text": a.text} for a in self.answers],
        }


def about(bus: Bus, task_id: str) -> list[Entry]:
    """Every message concerning ``task_id`` (for it, for every task since it exists, or naming it), oldest first."""
    conn = bus.conn
    w = workers.get(conn, task_id)
    found = steer.about_task(conn, task_id, all_since=w.assigned_at if w else None)
    answers = steer.outbox_for(conn, [m.id for m in found])
    notes = delivery.statuses(conn, task_id, found)
    entries = []
    for m in found:
        expected = {"task": (task_consumer(task_id),), "all": (task_consumer(task_id), QUEUE_CONSUMER)}.get(
            m.scope, (QUEUE_CONSUMER,))
        entries.append(Entry(m, tuple(a for a in answers if a.inbox_id == m.id and a.consumer in expected), expected,
                             notes.get(m.id)))
    return entries


__all__ = ["ROLE", "Entry", "Told", "about", "tell", "tell_here"]
