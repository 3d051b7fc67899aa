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

``hold(bus, task, verb)``: a review or merge of another machine's task made here (issue 36 on the git remote,
:mod:`.gitremote_hold`: the claim read from the remote, moved by compare-and-set, a merge's riding its push;
PostgreSQL, :mod:`.postgres_hold`: the claim row held locked across the merge). PostgreSQL alone also has
``hold_next(bus, skip)``, the merge queue across machines (``SKIP LOCKED``); where it is missing `merge --all`
merges this machine's tasks. The lifecycle asks for them with ``hasattr`` (the local backend has neither).

Backends: :mod:`.local` (one machine: the SQLite bus alone, today's behaviour), :mod:`.gitremote` (claims
and per-machine logs as refs on the git remote) and :mod:`.postgres` (claims, events and leases in tables of a
PostgreSQL database, issue 29).
"""

from __future__ import annotations

from pathlib import Path

from ..bus.connection import Bus
from .config import SharedConfig, load

TYPE_CHECKING = False  # every command reads [shared] through this package: typing would cost it more than that
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # the interface below is for readers and type checkers; nothing checks it at run time


class SharedState(Protocol):
    config: SharedConfig

    @property
    def active(self) -> bool: ...

    def claim(self, bus: Bus, task_id: str, expected: str | None, new: str, verb: str, *, take: bool = False) -> None: ...

    def prepare_with_push(self, task_id: str, expected: str | None, new: str, verb: str, remote: str, *,
                          fresh: bool = False) -> object | None:
        """A claim to carry in the command's own push to ``remote`` (atomically with the branch it moves), or
        None: nothing to carry (not this store, or already recorded); then :meth:`claim` runs as usual."""
        ...

    def landed(self, bus: Bus, pending: object) -> None: ...

    def lost(self, pending: object) -> None: ...

    def learn(self, bus: Bus, task_id: str) -> object | None:
        """After a refused claim: the store's current word on ``task_id`` into the bus's cache (fencing reads it)."""
        ...

    def take(self, bus: Bus, task_id: str) -> str:
        """Take over a task whose holder's lease ran out (this machine's judgement); the state it had."""
        ...

    def takeable(self, bus: Bus) -> list[str]:
        """The tasks a sync takes over by itself (``[shared] takeover``); [] under "manual"."""
        ...

    def sync(self, bus: Bus, *, rebuild: bool = False) -> dict: ...

    def freshness(self, bus: Bus) -> str: ...


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
