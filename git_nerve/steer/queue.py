"""`git worker merge --all`: every APPROVED task merged in approval order, steerable as a queue.

The queue is the APPROVED tasks at the start, oldest approval first, except
that tasks the conflict radar saw in a conflict go after those in none. Before
each merge (and once more when the queue is empty) it drains the
``merge-all`` consumer:

* ``stop`` ends the queue (the merge under way, if any, has finished);
  the tasks left stay APPROVED;
* ``skip <task>`` takes a task out of the pending queue;
* ``add <task>`` puts an APPROVED task (back) in, at its approval position.

Each message gets one outbox line saying what it did (written with the
cursor move, in one transaction) and one line on ``say`` (stderr).

A merge that conflicts (the task goes back to WORKING), fails its
``--check``, or finds its task no longer APPROVED is reported and the queue
goes on; any other error (git, the bus) ends the queue. Only one
``merge --all`` runs per repository at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import clock
from ..bus import workers
from ..bus.driver import Connection
from ..errors import CheckFailed, ConflictError, ExitCode, InvalidTransition, NerveError
from .drain import QUEUE_CONSUMER, Ack, Batch, DrainResult, drain, line, stop_acks
from .queue_shared import shared_queue

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: merge failures that concern one task only: the queue goes on
TASK_FAILURES = (ConflictError, CheckFailed, InvalidTransition)

Say = Callable[[str], None]


@dataclass
class QueueResult:
    merged: list[tuple[str, Any]] = field(default_factory=list)  #: (task, lifecycle.MergeResult), in merge order
    failed: list[tuple[str, NerveError]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  #: taken out by `skip`, still APPROVED
    pending: list[str] = field(default_factory=list)  #: left in the queue when it stopped or broke off
    stopped: str | None = None  #: the stop's outbox line
    error: NerveError | None = None  #: the error that ended the queue
    lines: list[str] = field(default_factory=list)  #: the outbox lines this run wrote

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return int(self.error.exit_code)
        if self.failed:
            return int(self.failed[0][1].exit_code)
        if self.stopped:
            return int(ExitCode.FAILURE)
        return int(ExitCode.OK)

    def summary(self) -> str:
        parts = [f"merged {len(self.merged)} task(s)" + (f": {', '.join(t for t, _ in self.merged)}" if self.merged else "")]
        if self.failed:
            parts.append(f"failed: {', '.join(t for t, _ in self.failed)}")
        if self.skipped:
            parts.append(f"skipped: {', '.join(self.skipped)}")
        if self.pending:
            parts.append(f"left APPROVED: {', '.join(self.pending)}")
        if self.stopped:
            parts.append(self.stopped)
        return "; ".join(parts)


class Queue:
    """The pending tasks, ordered by approval time; changed only by drained messages.

    Tasks the conflict radar last saw conflicting with another live task or
    with the integration branch go after the ones that conflict with nothing
    (``risky``), so a clean task never waits behind one likely to bounce."""

    def __init__(self, approved: list[workers.Worker], risky: set[str] | frozenset[str] = frozenset(),
                 lookup: Callable[[Connection, str], Any] | None = None):
        self.risky = frozenset(risky)
        self.lookup = lookup or workers.get  #: a task's row by id (across machines: other machines' claims too)
        self.pending: list[tuple[tuple[bool, float], str]] = sorted((self._key(w), w.task_id) for w in approved)
        self.merged: set[str] = set()
        self.skipped: list[str] = []
        self._planned: tuple[list[tuple[float, str]], list[str]] | None = None

    @property
    def tasks(self) -> list[str]:
        return [t for _, t in self.pending]

    def respond(self, conn: Connection, batch: Batch) -> list[Ack]:
        """Plan the batch's effect (inside the drain's transaction) and say what each message does."""
        if batch.stop is not None:
            return stop_acks(batch)
        pending, skipped = list(self.pending), list(self.skipped)
        acks: list[Ack] = []
        for m in batch.commands:
            target = m.target or ""
            queued = [p for p in pending if p[1] == target]
            if m.kind == "skip":
                if queued:
                    pending.remove(queued[0])
                    skipped.append(target)
                    head = f"skip {target}: taken out of the merge queue"
                elif target in self.merged:
                    head = f"skip {target}: already merged by this queue, nothing to do"
                else:
                    head = f"skip {target}: not in the merge queue, nothing to do"
            else:
                w = self.lookup(conn, target)
                if queued:
                    head = f"add {target}: already in the merge queue"
                elif w is None or w.state != "APPROVED":
                    head = f"add {target}: it is {w.state if w else 'gone'}, not APPROVED; not queued"
                else:
                    pending.append((self._key(w), target))
                    pending.sort()
                    if target in skipped:
                        skipped.remove(target)
                    head = f"add {target}: put in the merge queue (position {pending.index((self._key(w), target)) + 1})"
            acks.append(Ack(m, line(head, m)))
        self._planned = (pending, skipped)
        return acks

    def adopt(self) -> None:
        """Make the plan of the last drain real (it committed)."""
        if self._planned is not None:
            self.pending, self.skipped = self._planned
            self._planned = None

    def pop(self) -> str:
        return self.pending.pop(0)[1]

    def take(self, task_id: str) -> None:
        """Across machines: the shared store handed this task to this run (out of pending, wherever it was)."""
        self.pending = [p for p in self.pending if p[1] != task_id]

    def _key(self, w: workers.Worker) -> tuple[bool, float]:
        return (w.task_id in self.risky, _order(w))


def _risky(repo: Any) -> set[str]:
    """Tasks in a conflict, by the radar brought up to date with the branch tips (pairs whose
    tips did not move come from its cache; worktrees are not looked at again)."""
    from ..radar import notify, scan

    try:
        result = scan.recompute(repo, changed=[])
        notify.after(repo, result)  # what it found new or gone is told, as by every recompute (else never)
    except NerveError:
        result = scan.cached(repo.paths.common_dir)
    return {t for p in result.pairs if p.kind == "conflict" for t in (p.a, p.b)}


def _order(w: workers.Worker) -> float:
    return w.approved_at if w.approved_at is not None else w.state_changed_at


def _say_drained(result: DrainResult, say: Say) -> None:
    for text in result.lines:
        say(text)
    for note in result.notes:
        say(f'note: "{note.text}" (queued at {clock.iso(note.ts)})')


def _merge_batch(repo: Any, group: list[str], check: str, delete_branch: bool, force: bool, result: QueueResult,
                 queue: Queue, say: Say, on_merged, on_failed) -> bool:
    """One batch: one check (bisected on failure), the failing tasks sent back, the rest merged.
    False when an error must end the queue."""
    from ..errors import CheckFailed
    from ..git import refs
    from ..worker import lifecycle
    from .batch import run_batch

    def failed(task_id: str, exc: NerveError) -> None:
        result.failed.append((task_id, exc))
        if on_failed:
            on_failed(task_id, exc)

    try:
        verdict = run_batch(repo, group, check, say)
    except NerveError as exc:
        result.error = exc
        result.pending = group + queue.tasks
        return False
    for task_id, output in verdict.failing.items():
        comment = f"merge queue: `{check}` failed with this task in the batch; fix it and ask for review again.\n{output}"
        lifecycle.request_changes(repo, task_id, comment=comment[-4000:], by="merge-queue")
        failed(task_id, CheckFailed(f"--check `{check}` failed with {task_id} in the batch; the task is back to WORKING",
                                    details=[output[-2000:]]))
    integration = repo.settings.integration
    moved = refs.resolve(repo.cwd, lifecycle.integration_ref(repo, integration, fetch=False)) != verdict.onto
    # the passing set was checked as a whole on verdict.onto; if the branch moved since, check each again
    leftovers = list(verdict.conflicting)
    for task_id in verdict.passing + leftovers:
        again = check if moved or task_id in verdict.conflicting else None
        if not _merge_one(repo, task_id, delete_branch, again, force, result, queue, on_merged, on_failed):
            return False
    return True


def _finish_cleanups(repo: Any, delete_branch: bool, force: bool, result: QueueResult, say: Say,
                     on_merged: Callable[[str, Any], None] | None) -> None:
    """A merge --all killed between a task's COMPLETED and its cleanup: finish that first."""
    from ..worker import lifecycle

    for task_id in lifecycle.unfinished_cleanups(repo):
        try:
            merged = lifecycle.merge(repo, task_id, delete_branch=delete_branch, force=force)
        except NerveError as exc:
            say(f"{task_id}: merged, but its cleanup did not finish: {exc.message}")
            continue
        result.merged.append((task_id, merged))
        if on_merged:
            on_merged(task_id, merged)


def _merge_one(repo: Any, task_id: str, delete_branch: bool, check: str | None, force: bool, result: QueueResult,
               queue: Queue, on_merged: Callable[[str, Any], None] | None,
               on_failed: Callable[[str, NerveError], None] | None) -> bool:
    """Merge one task of the queue; False when the queue must end (an error that is not the task's)."""
    from ..worker import lifecycle

    try:
        merged = lifecycle.merge(repo, task_id, delete_branch=delete_branch, check=check, force=force)
    except TASK_FAILURES as exc:
        result.failed.append((task_id, exc))
        if on_failed:
            on_failed(task_id, exc)
        return True
    except NerveError as exc:
        result.failed.append((task_id, exc))
        result.error = exc
        return False
    queue.merged.add(task_id)
    result.merged.append((task_id, merged))
    if on_merged:
        on_merged(task_id, merged)
    return True


def _run_across(repo: Any, across: Any, queue: Queue, result: QueueResult, say: Say,
                merge_one: Callable[[str], bool]) -> None:
    """The queue across machines: before each merge the drain (stop, skip, add act on this run), then the next
    APPROVED task of any machine no other run holds, in approval order (``SKIP LOCKED``), held through its merge.
    A task this run tried is not taken again unless `add` puts it back."""
    tried: set[str] = set()
    while True:
        drained = drain(repo.bus, QUEUE_CONSUMER, respond=queue.respond)
        queue.adopt()
        result.lines.extend(drained.lines)
        _say_drained(drained, say)
        tried -= set(queue.tasks)  # put back by `add`
        if drained.stop:
            result.stopped = drained.stop_message
            break
        with across.next(sorted(tried | set(queue.skipped))) as task_id:
            if task_id is None:
                queue.pending = []  # every APPROVED task is merged, taken by another machine's run, or left here
                break
            tried.add(task_id)
            queue.take(task_id)
            if not merge_one(task_id):
                break
    result.skipped = list(queue.skipped)
    result.pending = queue.tasks


def merge_all(
    repo: Any,
    *,
    delete_branch: bool = False,
    check: str | None = None,
    force: bool = False,
    batch: int = 1,
    say: Say | None = None,
    on_merged: Callable[[str, Any], None] | None = None,
    on_failed: Callable[[str, NerveError], None] | None = None,
) -> QueueResult:
    """Run the merge queue of ``repo`` (a :class:`lifecycle.Repo`); see the module docstring."""
    from ..locks import LockTimeout, hold

    say = say or (lambda text: None)
    result = QueueResult()
    try:
        with hold(repo.lock_path("merge-all"), timeout=0, what="the merge queue lock"):
            from ..worker import lifecycle

            # before any git work of the queue's own (a batch's fetch): what a killed run left is repaired first (a
            # check checkout's unfinished `git worktree add`, whose HEAD 0000... fails every fetch)
            lifecycle.repair_leftovers(repo)
            _finish_cleanups(repo, delete_branch, force, result, say, on_merged)
            across = None if batch > 1 and check else shared_queue(repo)
            if across is not None:  # shared mode on PostgreSQL: every machine's APPROVED tasks
                queue = Queue(across.approved(), lookup=across.lookup)
                _run_across(repo, across, queue, result, say, lambda t: _merge_one(
                    repo, t, delete_branch, check, force, result, queue, on_merged, on_failed))
                return result
            queue = Queue(workers.all_workers(repo.bus.conn, states=("APPROVED",)), _risky(repo))
            while True:
                drained = drain(repo.bus, QUEUE_CONSUMER, respond=queue.respond)
                queue.adopt()
                result.lines.extend(drained.lines)
                _say_drained(drained, say)
                if drained.stop:
                    result.stopped = drained.stop_message
                    break
                if not queue.pending:
                    break
                if batch > 1 and check:
                    group = [queue.pop() for _ in range(min(batch, len(queue.pending)))]
                    if not _merge_batch(repo, group, check, delete_branch, force, result, queue, say, on_merged, on_failed):
                        break
                    continue
                if not _merge_one(repo, queue.pop(), delete_branch, check, force, result, queue, on_merged, on_failed):
                    break
            result.skipped = list(queue.skipped)
            result.pending = queue.tasks
    except LockTimeout:
        from ..locks import holder

        pid = holder(repo.lock_path("merge-all"))
        raise LockTimeout(f"another `git worker merge --all`{f' (pid {pid})' if pid else ''} is running in this "
                          "repository; wait for it, or stop it: `git nerve tell stop` outside a task's worktree") from None
    return result


__all__ = ["TASK_FAILURES", "Queue", "QueueResult", "merge_all"]
