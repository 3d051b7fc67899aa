"""What the front ends ask of shared mode: a sync of the current repository, every machine's rows for
`git worker status`."""

from __future__ import annotations


from .. import clock
from ..bus import shared as cache
from ..bus import told, workers
from ..bus.connection import Bus
from ..paths import discover
from . import for_bus, open_state

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any


def run_sync(cwd=None, *, rebuild: bool = False, tell: bool = False) -> dict:
    """`git nerve sync` of the repository at ``cwd``: a report (see :func:`.sync.sync`). ``tell``: a person reads
    it (the command, not a background sync): the records other machines published that were refused and not
    reported yet go into it (``rejected``), each once."""
    paths = discover(cwd)
    state = open_state(paths.common_dir)
    bus = Bus(paths.bus_path)
    try:
        report = state.sync(bus, rebuild=rebuild)
        if tell:
            told_now = refused_now(bus)
            if told_now:
                report["rejected"] = told_now
        return report
    finally:
        bus.close()


def refused_now(bus: Bus) -> list[dict]:
    """The refused records not reported yet (:func:`.vet.new_rejections`), each reported once from now on."""
    from .vet import new_rejections

    return new_rejections(bus)


def run_watch(report, cwd=None) -> None:
    """`git nerve sync --watch` of the repository at ``cwd`` (the git remote: polling, :mod:`.poll`; PostgreSQL:
    LISTEN/NOTIFY); returns only by KeyboardInterrupt, which SIGTERM raises too (a sync under way on the git
    remote finishes first)."""
    import signal

    from ..errors import UsageError
    from .poll import Guard

    paths = discover(cwd)
    state = open_state(paths.common_dir)
    if not state.watches:
        raise UsageError("sync --watch keeps the view of several machines fresh: this repository is not in shared mode "
                         "(`git nerve init --shared` turns it on)")
    guard = Guard()
    previous = {s: signal.signal(s, guard.signal) for s in (signal.SIGINT, signal.SIGTERM)}
    bus = Bus(paths.bus_path)
    try:
        state.watch(bus, report, guard=guard)
    finally:
        bus.close()
        for s, handler in previous.items():
            signal.signal(s, handler)


def shared_rows(bus: Bus, rows: list[dict[str, Any]], states: tuple[str, ...] = ()) -> str | None:
    """In shared mode: each row gets the machine holding its task, the tasks only other machines have are
    added (from the cache of the last sync, with the heartbeat, description and branch their holders published:
    ``heartbeat_at`` the heartbeat's epoch seconds), every row says how fresh the view is; the freshness line.
    None (rows untouched) without shared mode."""
    state = for_bus(bus)
    if not state.active:
        return None
    fresh = state.freshness(bus)
    claims = {c.task_id: c for c in cache.claims(bus.conn)}
    words = cache.holders_words(bus.conn, state.config.machine, clock.now())  # their heartbeats, descriptions
    here = {r["task_id"] for r in rows}
    for r in rows:
        c = claims.get(r["task_id"])
        r["machine"] = c.owner if c else state.config.machine
        if c is not None and c.owner != state.config.machine:  # taken over: the holder's word, this row fenced off
            r.update(state=c.state, elsewhere=True, fenced=r["state"])
    for c in claims.values():
        if c.task_id in here or (states and c.state not in states):
            continue
        said = words.get(c.task_id, {})
        rows.append({"task_id": c.task_id, "state": c.state, "machine": c.owner, "branch": said.get("branch"),
                     "worktree": None, "description": said.get("description") or "",
                     "last_heartbeat": clock.iso(said.get("last_heartbeat")),
                     "heartbeat_at": said.get("last_heartbeat"),
                     "last_transition": {"verb": c.verb, "by": c.machine, "seq": c.seq},
                     "stale": False, "radar": [], "radar_stale": False, "elsewhere": True})
    for r in rows:
        r["view"] = fresh
    return fresh


def refused_line(bus: Bus) -> str | None:
    """`git worker status`'s warning of the records other machines published that this machine refused (they
    changed nothing here: :mod:`.vet`); None when there are none."""
    from ..text import clean_line
    from .vet import rejections

    kept = rejections(bus.conn)
    if not kept:
        return None
    last = kept[-1]
    what = f"{last['machine'] or 'a machine'}'s record of {last['task'] or '-'}" if last["task"] else (
        f"a record of {last['machine'] or 'a machine'}")
    return clean_line(f"{len(kept)} record(s) from other machines refused here (they changed nothing), the last: "
                      f"{what}: {last['reason']} (`git nerve sync --rebuild` judges them again)")


def elsewhere(bus: Bus, task_id: str) -> dict[str, Any] | None:
    """A task only another machine has (shared mode), as the last sync saw it: its claim and the events its
    machines published about it; None for a task of this machine, or without shared mode."""
    if workers.get(bus.conn, task_id) is not None:
        return None
    c = cache.claim(bus.conn, task_id)
    if c is None:
        return None
    state = for_bus(bus)
    if not state.active:
        return None
    return {"task_id": c.task_id, "state": c.state, "machine": c.owner, "view": state.freshness(bus),
            "last_transition": {"verb": c.verb, "by": c.machine, "seq": c.seq, "at": clock.iso(c.ts)},
            "events": [{"id": e[0], "machine": e[1], "ts": clock.iso(e[2]), "kind": e[4], "payload": e[5]}
                       for e in cache.events(bus.conn, task_id)],
            "told": [sent_dict(x) for x in told.sent(bus.conn, state.machine, task_id)]}


def sent_dict(x) -> dict[str, Any]:
    """One note, stop or post this machine left for a task another machine held (:func:`git_nerve.bus.told.sent`)."""
    return {"id": x.id, "ts": clock.iso(x.ts), "task": x.task_id, "kind": x.what, "text": x.text, "status": x.status,
            "machine": x.machine, "delivered": x.delivered}
