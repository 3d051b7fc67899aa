"""The shared state of several machines (issue 24), behind one interface so that another backend (PostgreSQL,
issue 29) can follow without touching the commands.

The commands and the lifecycle call only :func:`open_state` and the :class:`SharedState` methods:

* ``claim(task, expected, new, verb)``: the compare-and-set of one transition on the shared store, made before
  the local bus row moves; the loser raises :class:`~git_nerve.errors.HeldElsewhere` (exit 8) naming the
  machine, an unreachable store one line (:class:`~git_nerve.errors.GitError`, exit 4, for the git remote;
  :class:`~git_nerve.errors.DatabaseError`, exit 5, for PostgreSQL); nothing changed.
* ``prepare_with_push`` / ``landed`` / ``lost``: the same compare-and-set carried by a push the command makes
  anyway (done's push of the task branch), so both land or neither; a backend that is not the git remote
  carries nothing and the command's ``claim`` runs as usual.
* ``sync(bus, rebuild=False)``: publish this machine's events, fetch everyone's claims and events into the
  bus's cache (:mod:`git_nerve.bus.shared`), idempotently.
* ``learn(bus, task)``: after a refused claim, the store's word on the task into the cache (fencing reads it).
* ``freshness(bus)``: how fresh the cached view is, for `git worker status`.

What a backend can do beyond that it declares on :class:`SharedState` (callers ask these, never ``hasattr``):
``holds_claims``: ``hold(bus, task, verb)``, a review or merge of another machine's task made here (issue 36 on
the git remote, :mod:`.gitremote_hold`: the claim read from the remote, moved by compare-and-set, a merge's riding
its push; PostgreSQL, :mod:`.postgres_hold`: the claim row held locked across the merge); ``rides_push``: a
claim's move is carried by the command's own git push (the git remote); ``locks_claims``: a merge holds the claim
row locked across its push (PostgreSQL); ``queues_merges``: ``hold_next(bus, skip)``, the merge queue across
machines (PostgreSQL's ``SKIP LOCKED``; without it `merge --all` merges this machine's tasks); ``watches``:
``watch``, `git nerve sync --watch`. The local backend has none of them.

Backends: :mod:`.local` (one machine: the SQLite bus alone, today's behaviour), :mod:`.gitremote` (claims
and per-machine logs as refs on the git remote) and :mod:`.postgres` (claims, events and leases in tables of a
PostgreSQL database, issue 29).
"""

from __future__ import annotations

from pathlib import Path

from ..bus.connection import Bus
from .config import SharedConfig, load


class SharedState:
    """The interface of every backend, and the capabilities each declares (class attributes; a backend sets those it
    has). Nothing here touches a store: :class:`RemoteStore` is the base of the two that are shared."""

    config: SharedConfig
    #: a store several machines share (False: the local bus alone, claims and sync do nothing)
    active: bool = False
    #: :meth:`hold`: a review or merge of another machine's task made here
    holds_claims: bool = False
    #: a claim's move rides the command's own git push (``prepare_with_push``'s ``update``, the hold's ``ride``)
    rides_push: bool = False
    #: a merge holds the task's claim locked across its push (:meth:`hold`), committed when the merge ends
    locks_claims: bool = False
    #: :meth:`hold_next`: the merge queue across machines
    queues_merges: bool = False
    #: :meth:`watch`: `git nerve sync --watch`
    watches: bool = False

    def claim(self, bus: Bus, task_id: str, expected: str | None, new: str, verb: str, *, take: bool = False) -> None:
        raise NotImplementedError

    def prepare_with_push(self, task_id: str, expected: str | None, new: str, verb: str, remote: str, *,
                          fresh: bool = False) -> object | None:
        """A claim to carry in the command's own push to ``remote`` (atomically with the branch it moves), or
        None: nothing to carry (not this store, or already recorded); then :meth:`claim` runs as usual."""
        raise NotImplementedError

    def landed(self, bus: Bus, pending: object) -> None:
        raise NotImplementedError

    def lost(self, pending: object) -> None:
        raise NotImplementedError

    def learn(self, bus: Bus, task_id: str) -> object | None:
        """After a refused claim: the store's current word on ``task_id`` into the bus's cache (fencing reads it)."""
        raise NotImplementedError

    def take(self, bus: Bus, task_id: str) -> str:
        """Take over a task whose holder's lease ran out (this machine's judgement); the state it had."""
        raise NotImplementedError

    def takeable(self, bus: Bus) -> list[str]:
        """The tasks a sync takes over by itself (``[shared] takeover``); [] under "manual"."""
        raise NotImplementedError

    def sync(self, bus: Bus, *, rebuild: bool = False) -> dict:
        raise NotImplementedError

    def freshness(self, bus: Bus) -> str:
        raise NotImplementedError

    def hold(self, bus: Bus, task_id: str, verb: str):
        """``holds_claims``: a context manager yielding the task's claim held (``record``, ``move``, ``ride``)."""
        raise NotImplementedError

    def hold_next(self, bus: Bus, skip: list[str]):
        """``queues_merges``: the next APPROVED claim of any machine held as :meth:`hold` does; None when none."""
        raise NotImplementedError

    def watch(self, bus: Bus, report, *, guard=None) -> None:
        """``watches``: sync, report, and again whenever the store changes; until interrupted."""
        raise NotImplementedError


class RemoteStore(SharedState):
    """What the shared stores (the git remote, PostgreSQL) have alike."""

    active = True
    holds_claims = True
    watches = True

    def __init__(self, config: SharedConfig):
        self.config = config
        self.cwd = config.cwd
        self.machine = config.machine
        self._instance: str | None = None

    @property
    def instance(self) -> str:
        """This clone's instance id (:mod:`.identity`; made once, the first time it is needed)."""
        if self._instance is None:
            from .identity import instance

            self._instance = instance(self.cwd)
        return self._instance


def open_state(common_dir: Path) -> SharedState:
    """The shared state of the repository whose common dir is ``common_dir``, as its nerve.toml chooses."""
    cfg = load(common_dir)
    if cfg.backend == "git":
        from .gitremote import GitRemoteState

        return GitRemoteState(cfg)
    if cfg.backend == "postgres":
        from .postgres import PostgresState

        return PostgresState(cfg)
    from .local import LocalState

    return LocalState(cfg)


def for_bus(bus: Bus) -> SharedState:
    """The shared state of the repository ``bus`` belongs to (``<common-dir>/nerve/bus.db``)."""
    return open_state(bus.path.parent.parent)
