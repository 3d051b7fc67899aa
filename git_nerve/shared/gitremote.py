"""The git remote as the shared store: one claim ref per task, moved by compare-and-set pushes.

``refs/nerve/claims/<task>`` is a chain of record commits (:mod:`.records`), one per transition. A transition
pushes a new record on top of the tip this clone last saw, with ``--force-with-lease=<ref>:<that tip>``: the
remote takes exactly one of racing pushes. The local copy of the ref is only a mirror of the remote's value
(the lease's expectation); it moves after the remote took the push, or by a fetch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import clock
from ..bus import shared as cache
from ..bus.connection import Bus
from ..errors import GitError, HeldElsewhere, UsageError
from ..git import refs, remote_refs
from . import RemoteStore, archive, lease, records, vet
from .judge import ANY_MACHINE, AUTO_STATES
from .judge import already as _already
from .judge import held as _held
from .judge import refusal as _refusal
from .judge import moved_claim, ours_to_take, taken_here
from .move_git import refuse_local_mark
from .config import SharedConfig

#: compare-and-set attempts when only this clone's mirror was behind the remote
ATTEMPTS = 3


@dataclass(frozen=True)
class Pending:
    """A claim record made and not pushed yet: push ``update`` (alone, or atomically with a branch)."""

    ref: str
    sha: str
    tip: str | None
    record: records.Record

    @property
    def update(self) -> tuple[str, str, str | None]:
        return (self.ref, self.sha, self.tip)


class GitRemoteState(RemoteStore):
    rides_push = True  # a claim's move rides done's and merge's own pushes (``Pending.update``, ``Held.ride``)

    def __init__(self, config: SharedConfig):
        super().__init__(config)
        self.remote = config.remote or "origin"

    # -- claims --------------------------------------------------------------------------------------------
    def claim(self, bus: Bus, task_id: str, expected: str | None, new: str, verb: str, *, take: bool = False,
              holder: str | None = None, by_any: bool = False) -> None:
        """Move ``task_id``'s claim from ``expected`` (None: a new task) to ``new`` on the remote, before the
        local bus moves. ``take``: this machine becomes the holder (spawn, takeover); ``holder``: the machine
        a takeover takes it from (another taker that got there first wins, even in the same state); ``by_any``:
        a review or merge of a task another machine holds (:mod:`.gitremote_hold`). Idempotent: a claim that
        already records this very transition by this machine is success."""
        for attempt in range(ATTEMPTS):
            pending = self.prepare(task_id, expected, new, verb, take=take, holder=holder, fresh=attempt > 0,
                                   by_any=by_any)
            if pending is None:
                return
            res = remote_refs.cas_push(self.cwd, self.remote, [pending.update])
            unsure = res.maybe_landed  # sent, and no answer came
            took = self.landed_anyway(pending) if unsure else None
            if res.ok or took:
                self.landed(bus, pending)
                return
            if not res.stale:
                raise self._failed(res, task_id, expected, unsure=unsure and took is None)
            # only the mirror was behind, or another machine won: the next attempt asks the remote first
        raise GitError(f"could not move the claim of {task_id} on {self.remote}: it kept moving; nothing changed here")

    def prepare(self, task_id: str, expected: str | None, new: str, verb: str, *, take: bool = False,
                holder: str | None = None, fresh: bool = False, by_any: bool = False) -> Pending | None:
        """The record commit of this transition on top of the claim as last seen (asked of the remote when
        that forbids it, or at once when ``fresh``), ready to push; None when the claim already records it;
        HeldElsewhere when the remote's claim forbids it. A claim the remote archived (:mod:`.archive`) goes on
        from its archived tip, created anew."""
        ref = records.CLAIMS + task_id
        for asked in ((True,) if fresh else (False, True)):
            tip, base, current = self._claim_now(ref, task_id, expected, asked)
            if current is not None and current.verb == records.MOVE:  # frozen by a move to another store
                raise moved_claim(task_id, current)
            if current is not None and _already(current, new, verb, self.machine):
                return None
            if taken_here(current, expected, new, take, self.machine):
                return None  # a task this machine took over (or spawned) is spawned here: nothing to claim
            if current is None and expected is not None and not asked:
                continue  # a task this clone has no copy of the claim of (a clone that just moved here): ask
            refusal = _refusal(task_id, current, expected, take, self.machine, holder,
                               by_any=by_any and verb in ANY_MACHINE)
            if refusal is None:
                break
            if asked:
                raise refusal
        rec = records.Record(task=task_id, state=new, previous=current.state if current else expected, verb=verb,
                             machine=self.machine, owner=self.machine if take or current is None else current.owner,
                             seq=(current.seq + 1) if current else 1, ts=clock.now())
        sha = remote_refs.write_record(self.cwd, {records.CLAIM_FILE: rec.encode()}, base,
                                       f"{verb} {task_id}: {rec.previous or '-'} -> {new} on {self.machine}")
        return Pending(ref, sha, tip, rec)

    def _claim_now(self, ref: str, task_id: str, expected: str | None,
                   asked: bool) -> tuple[str | None, str | None, records.Record | None]:
        """(the remote value to lease, the commit to build on, its record) of the claim as this clone knows it
        (``asked``: as the remote has it now). No claim ref: the archived tip, when the task was archived (the
        archive refs are fetched first for a new task, or when the remote had no claim)."""
        tip = self._fetch_claim(ref, task_id, expected) if asked else refs.resolve(self.cwd, ref)
        if tip is not None:
            return tip, tip, self._judged(task_id, tip)
        if asked or expected is None:
            self._fetch_finished(ref, task_id, expected)
        entry = archive.lookup(self.cwd, task_id)
        return (None, entry.tip, entry.record) if entry else (None, None, None)

    def _fetch_finished(self, ref: str, task_id: str, expected: str | None) -> None:
        """Every machine's archive ref from the remote; then this clone's copy of ``ref`` goes (through the door)
        when an archive keeps it (called when the remote has no such claim, or for a new task)."""
        res = remote_refs.fetch(self.cwd, self.remote, [f"+{records.FINISHED}*:{records.FINISHED}*",
                                                        f"+{records.MOVED}*:{records.MOVED}*"])
        if not res.ok:
            raise self._failed(res, task_id, expected)
        refuse_local_mark(self.cwd)  # moved to another store: a new task is not created here
        stale = refs.resolve(self.cwd, ref)  # (only when the remote said it has no such claim)
        if stale is not None:
            archive.prune_mirrors(self.cwd, {ref: stale, **remote_refs.local_refs(self.cwd, records.FINISHED)}, set())

    def prepare_with_push(self, task_id: str, expected: str | None, new: str, verb: str, remote: str, *,
                          fresh: bool = False) -> Pending | None:
        """:meth:`prepare`, when ``remote`` is the coordination remote (else the claim is pushed on its own);
        ``fresh``: ask the remote first (an earlier push of this task's may have landed without an answer)."""
        return self.prepare(task_id, expected, new, verb, fresh=fresh) if remote == self.remote else None

    def landed_anyway(self, pending: Pending) -> bool | None:
        """After a push that failed without the remote refusing it (the answer lost: the connection dropped after
        the remote took it): did ``pending`` land? True / False as the remote says now, None when it cannot be
        asked (the outcome stays unknown)."""
        try:
            tip = self._fetch_claim(pending.ref, pending.record.task, pending.record.previous)
        except GitError:
            return None
        return tip == pending.sha

    def landed(self, bus: Bus, pending: Pending) -> None:
        """The remote took ``pending``: the mirror and the cache follow."""
        self._mirror(pending.ref, pending.sha, pending.tip)
        with bus.write() as conn:
            cache.ensure(conn)
            cache.put_claim(conn, _cached(pending.record, pending.sha))
            cache.set_meta(conn, cache.MACHINE, self.machine)
        if self.config.background:  # publish this transition's messages (and what the hooks queued) soon
            from .background import spawn

            spawn(self.config.common_dir, self.cwd)

    def lost(self, pending: Pending) -> bool | None:
        """A push carrying ``pending`` failed: HeldElsewhere when the claim moved on the remote (the race was
        lost); True when the remote has the claim after all (it took the push, the answer was lost: the mirror
        follows), or already records this very transition (an earlier push whose answer was lost); None when
        the remote cannot be asked; else False (the push failed for its own reason, which the caller says)."""
        rec = pending.record
        try:
            tip = self._fetch_claim(pending.ref, rec.task, rec.previous)
        except GitError:
            return None
        if tip == pending.sha:
            return True
        if tip != pending.tip:
            current = self._judged(rec.task, tip)
            if current is not None and current.verb == records.MOVE:
                raise moved_claim(rec.task, current)
            if current is not None and _already(current, rec.state, rec.verb, self.machine):
                return True
            if current is not None and (current.state, current.owner) == (rec.previous, self.machine):
                return False  # moved there only by records this machine refuses (:mod:`.vet`): the rerun goes on
            if current is not None:
                raise _held(rec.task, current)
        return False

    def learn(self, bus: Bus, task_id: str) -> records.Record | None:
        """The claim of ``task_id`` as this clone's mirror now holds it (a refused compare-and-set fetched it)
        into the cache, so that what follows (fencing a task taken over) sees the remote's word; the record."""
        tip = refs.resolve(self.cwd, records.CLAIMS + task_id)
        rec = self._judged(task_id, tip)
        if tip is None:  # archived: the remote has no claim ref of it any more (:mod:`.archive`)
            entry = archive.lookup(self.cwd, task_id)
            tip, rec = (entry.tip, entry.record) if entry else (None, None)
        if rec is not None and tip is not None:
            with bus.write() as conn:
                cache.ensure(conn)
                cache.put_claim(conn, _cached(rec, tip))
                cache.set_meta(conn, cache.MACHINE, self.machine)
        return rec

    def _judged(self, task_id: str, tip: str | None) -> records.Record | None:
        """The claim at ``tip`` as this machine accepts it: the last record of its chain every check of
        :mod:`.vet` passed (a peer's record that fails changes nothing here)."""
        if tip is None:
            return None
        return vet.accepted(self.cwd, tip, task_id, self.machine, silence=self._silence, lease=self.config.lease)[0]

    def _silence(self) -> float | None:
        from ..bus.connection import Bus

        try:
            with Bus(self.config.common_dir / "nerve" / "bus.db") as bus:
                return lease.unpublished_for(bus.conn, self.machine)
        except Exception:  # noqa: BLE001 - cannot tell: judged as never published
            return None

    def _record(self, sha: str | None) -> records.Record | None:
        if sha is None:
            return None
        return records.decode(remote_refs.read_files(self.cwd, [sha], records.CLAIM_FILE)[0])

    def _mirror(self, ref: str, new: str, old: str | None) -> None:
        if not refs.update(self.cwd, ref, new, old, "git-nerve: claim pushed"):
            refs.update(self.cwd, ref, new, refs.resolve(self.cwd, ref), "git-nerve: claim pushed")

    def _fetch_claim(self, ref: str, task_id: str, expected: str | None) -> str | None:
        res = remote_refs.fetch(self.cwd, self.remote, [f"+{ref}:{ref}"])
        if not res.ok:
            if "couldn't find remote ref" in res.output:
                return None
            raise self._failed(res, task_id, expected)
        return refs.resolve(self.cwd, ref)

    def _failed(self, res: remote_refs.RemoteResult, task_id: str, expected: str | None, *,
                unsure: bool = False) -> GitError:
        state = f"{task_id} is still {expected}" if expected else f"{task_id} was not created"
        if unsure:
            return GitError(f"the claim of {task_id} was sent to {self.remote} but no answer came back ({res.message}), "
                            f"and {self.remote} could not be asked since: it may have landed. Nothing changed here "
                            f"({state} here); run the same command again: it reads {self.remote} first and finishes it")
        if res.unreachable:
            return GitError(f"cannot reach {self.remote} (shared mode: every transition is agreed there): "
                            f"{res.message}; nothing changed here ({state})")
        how = " by policy (its rules, not a race or the network)" if res.policy else ""
        return GitError(f"{self.remote} refused the claim of {task_id}{how}: {res.message}; nothing changed here ({state})")

    def take(self, bus: Bus, task_id: str) -> str:
        """Take over ``task_id`` (it becomes ASSIGNED to this machine) once its holder's lease ran out, as
        judged here (:mod:`.lease`); the state it had. HeldElsewhere while the lease holds or cannot be judged."""
        c = cache.claim(bus.conn, task_id)
        if c is None:
            raise UsageError(f"no task {task_id!r} in the shared view (`git nerve sync` first, then `git worker status`)")
        if ours_to_take(task_id, c.owner, c.state, self.machine):
            return c.state
        silent, limit = lease.silent_for(bus.conn, c.owner), self.config.lease
        if silent is None or silent < limit:
            seen = "was never seen to move" if silent is None else f"moved {silent:.0f} s ago"
            raise HeldElsewhere(f"task {task_id} is held by machine {c.owner}, whose log {seen} (lease: {limit:.0f} s "
                                "of this machine's clock); nothing changed here")
        self.claim(bus, task_id, c.state, "ASSIGNED", "takeover", take=True, holder=c.owner)
        return c.state

    def takeable(self, bus: Bus) -> list[str]:
        """The tasks ``[shared] takeover`` lets a sync take over (see :mod:`.config`): another machine's, in a state
        the setting names, whose holder's log has not moved for the lease on this machine's clock. Oldest
        transition first. None under ``takeover = "manual"``."""
        states = AUTO_STATES.get(self.config.takeover, ())
        if not states:
            return []
        silent: dict[str, float | None] = {}
        due = []
        for c in sorted(cache.claims(bus.conn), key=lambda c: (c.ts, c.task_id)):
            if c.owner == self.machine or c.state not in states:
                continue
            if c.owner not in silent:
                silent[c.owner] = lease.silent_for(bus.conn, c.owner)
            quiet = silent[c.owner]
            if quiet is not None and quiet >= self.config.lease:
                due.append(c.task_id)
        return due

    def hold(self, bus: Bus, task_id: str, verb: str):
        """A review or merge of ``task_id`` made from this machine (any machine may: issue 36): its claim as the
        remote has it now, moved by compare-and-set (:mod:`.gitremote_hold`)."""
        from .gitremote_hold import hold

        return hold(self, bus, task_id, verb)

    # -- sync and the cached view ----------------------------------------------------------------------------
    def sync(self, bus: Bus, *, rebuild: bool = False) -> dict:
        from .sync import sync

        return sync(self, bus, rebuild=rebuild)

    def watch(self, bus: Bus, report, *, guard=None) -> None:
        """`git nerve sync --watch`: sync, then look again as often as the host bears (:mod:`.poll`)."""
        from .poll import watch

        watch(self, bus, report, guard=guard)

    def freshness(self, bus: Bus) -> str:
        from .sync import freshness

        return freshness(bus)


def _cached(rec: records.Record, sha: str) -> cache.Claim:
    return cache.Claim(rec.task, rec.owner, rec.machine, rec.state, rec.verb, rec.seq, sha, rec.ts)
