"""`git nerve sync` on the git remote: publish this machine's events, fetch everyone's, fill the bus's cache.

1. export: the bus records written since the last batch (messages, thread rounds, notes, acknowledgements)
   become one commit on ``refs/nerve/log/<machine>`` (its ``cursor.json`` says up to which id of each table,
   read back from that ref, so a kill between the ref and anything else exports nothing twice);
2. ``ls-remote refs/nerve/*`` (one round trip): what the remote has; push this machine's log when the remote's
   is behind (leased on the value read: only this machine writes it); offline, the batches wait in the ref;
3. only when the remote advertises a claim, an archive or another machine's log this clone has not got: fetch
   ``refs/nerve/claims/*`` (mirrors), ``refs/nerve/finished/*`` and every machine's log into
   ``refs/nerve/peers/*`` (nothing changed: no fetch at all); copies of claims the remote archived are dropped;
4. ingest, in one bus transaction: each other machine's new batches (events keyed by id: never twice), every
   live claim whose tip changed and every new archive entry (an ``alive`` beat only moves the lease: never an
   event), and the posts other machines made to a task held here appended to its thread
   (:func:`~git_nerve.bus.shared.deliver_posts`). ``rebuild`` forgets the cache first and reads every chain
   from its start;
5. archive the finished claims due (:mod:`.archive`).

No git runs while the bus transaction is open: every chain is read first.
"""

from __future__ import annotations

import time

from .. import clock, locks
from ..bus import shared as cache
from ..bus import told
from ..bus.connection import Bus
from ..errors import GitError
from ..git import refs, remote_refs
from . import archive, lease, records
from .move_git import refuse_if_moved

NERVE = "refs/nerve/"
SYNCED_AT = "synced_at"
UNREACHABLE_SINCE = "unreachable_since"
LAST_ERROR = "last_error"


def export(state, bus: Bus) -> int:
    """This machine's records since its last batch, appended to its log ref as one commit; how many."""
    ref = records.LOGS + state.machine
    tip = refs.resolve(state.cwd, ref)
    cursor = records.decode_cursor(remote_refs.read_files(state.cwd, [tip], records.CURSOR_FILE)[0]) if tip else {}
    new, after = cache.local_events(bus.conn, state.machine, cursor)
    if not new and not lease.beat_due(bus.conn, state.machine, state.config.lease):
        return 0
    if not new:  # nothing happened here, but the others judge this machine's leases by its log moving
        beat = records.ALIVE_STREAM
        after[beat] = cursor.get(beat, 0) + 1
        new = [{"id": f"{state.machine}:{beat}{after[beat]}", "machine": state.machine, "ts": clock.now(), "task": None,
                "kind": records.ALIVE, "payload": {}}]
    sha = remote_refs.write_record(
        state.cwd, {records.LOG_FILE: records.encode_batch(new), records.CURSOR_FILE: records.encode_cursor(after)},
        tip, f"nerve log {state.machine}: {len(new)} events")
    if not refs.update(state.cwd, ref, sha, tip, "git-nerve: log batch"):
        return 0  # another export of this machine got there first: it carries the same records
    with bus.write() as conn:
        cache.ensure(conn)
        lease.beaten(conn, state.machine, sha)
    return len(new)


def sync(state, bus: Bus, *, rebuild: bool = False) -> dict:
    """Export, push, fetch, ingest (see the module), one sync at a time per repository; a report. An
    unreachable remote: the cache stays, its time of first failure is kept for `status`, and a GitError says
    so (exported batches wait for the next sync)."""
    from .background import lock_paths

    with locks.hold(lock_paths(state.config.common_dir)[0], timeout=120, what="the sync lock"):
        return _sync(state, bus, rebuild=rebuild)


def _sync(state, bus: Bus, *, rebuild: bool) -> dict:
    started = time.monotonic()
    exported = export(state, bus)
    listed, adv = remote_refs.ls_remote(state.cwd, state.remote, NERVE + "*")
    if not listed.ok:
        _failed(state, bus, listed)
    local = remote_refs.local_refs(state.cwd, NERVE)
    refuse_if_moved(state.cwd, state.remote, adv, local)  # moved to another store: this clone's nerve.toml is old
    own = records.LOGS + state.machine
    mine = local.get(own)
    if own in adv and adv[own] != mine and not (mine and refs.is_ancestor_quiet(state.cwd, adv[own], mine)):
        exported = _adopt_own_log(state, bus, own)
        local = remote_refs.local_refs(state.cwd, NERVE)
        mine = local.get(own)
    if mine and adv.get(own) != mine:
        # leased on the value ls-remote just read (only this machine writes its log: a lost lease is a sync of
        # this machine from another clone, whose batches the next sync adopts)
        pushed = remote_refs.cas_push(state.cwd, state.remote, [(own, mine, adv.get(own))])
        if not pushed.ok:
            _failed(state, bus, pushed)
        adv[own] = mine
    fetched = rebuild or _behind(state, adv, local)
    if fetched:
        res = remote_refs.fetch(state.cwd, state.remote, [f"+{records.CLAIMS}*:{records.CLAIMS}*",
                                                          f"+{records.LOGS}*:{records.PEERS}*",
                                                          f"+{records.FINISHED}*:{records.FINISHED}*"])
        if not res.ok:
            _failed(state, bus, res)
        local = remote_refs.local_refs(state.cwd, NERVE)
    live = {ref[len(records.CLAIMS):]: sha for ref, sha in adv.items() if ref.startswith(records.CLAIMS)}
    pruned = archive.prune_mirrors(state.cwd, local, set(live))
    ingested, claims = ingest(state, bus, rebuild=rebuild, live=set(live), local=local)
    archived = archive.archive(state, bus, live, adv.get(records.FINISHED + state.machine))
    report = {"backend": "git", "machine": state.machine, "remote": state.remote, "exported": exported,
              "ingested": ingested, "claims": claims, "archived": len(archived), "pruned": pruned, "fetched": fetched,
              "seconds": round(time.monotonic() - started, 3)}
    refused = archive.refused_lately(bus, state.config.lease)
    if refused:
        report["archive_refused"] = refused
    return report


def _adopt_own_log(state, bus: Bus, own: str) -> int:
    """The remote's log of this machine is not one this clone wrote (a move wrote it there, or this clone lost its
    ref): take it, then export again from its cursor (what it lacks is still in the bus: nothing lost, and the
    ids keep anything from being ingested twice)."""
    res = remote_refs.fetch(state.cwd, state.remote, [f"+{own}:{own}"])
    if not res.ok:
        _failed(state, bus, res)
    return export(state, bus)


def _behind(state, adv: dict[str, str], local: dict[str, str]) -> bool:
    """Does the remote advertise a claim, an archive or another machine's log this clone has not got (the
    cheap "nothing changed" check: one ls-remote, no fetch)?"""
    for ref, sha in adv.items():
        if ref.startswith((records.CLAIMS, records.FINISHED)):
            if local.get(ref) != sha:
                return True
        elif ref.startswith(records.LOGS) and ref != records.LOGS + state.machine:
            if local.get(records.PEERS + ref[len(records.LOGS):]) != sha:
                return True
    return False


def ingest(state, bus: Bus, *, rebuild: bool = False, live: set[str] | None = None,
           local: dict[str, str] | None = None) -> tuple[int, int]:
    """Every other machine's new events, every changed claim and every new archive entry into the cache: (new
    events, claims updated). ``live``: the claims the remote has (None: every copy here); a copy of a claim the
    remote archived is never read back (it would bring an earlier state back). ``local``: the refs/nerve/ refs."""
    local = remote_refs.local_refs(state.cwd, NERVE) if local is None else local
    with bus.write() as conn:
        cache.ensure(conn)
        if rebuild:
            cache.clear(conn)
        peers = _peers(state, local)
        seen_logs = {m: cache.get_meta(conn, f"log:{m}") for m in peers}
        finished = archive.tips(state.cwd, local)
        seen_finished = {m: cache.get_meta(conn, f"finished:{m}") for m in finished}
    batches: dict[str, tuple[str, list[dict]]] = {}
    for machine, tip in peers.items():
        since = seen_logs.get(machine)
        if since == tip:
            continue
        if since and not refs.is_ancestor(state.cwd, since, tip):
            since = None  # a chain that does not continue what was seen: read it whole (ids keep it exact)
        shas = remote_refs.chain(state.cwd, tip, since)
        events = [e for data in remote_refs.read_files(state.cwd, shas, records.LOG_FILE)
                  for e in records.decode_batch(data) if e["machine"] == machine and records.is_record(e)]
        batches[machine] = (tip, events)
    claim_tips = {ref[len(records.CLAIMS):]: sha for ref, sha in local.items() if ref.startswith(records.CLAIMS)}
    if live is not None:
        claim_tips = {t: sha for t, sha in claim_tips.items() if t in live}
    found = _entries(state, finished, seen_finished)
    cached = cache.claims_of(bus.conn, [*claim_tips, *found])  # only the tasks this sync may change
    archived = [e for task, e in found.items() if task not in claim_tips and _newer(e, cached.get(task))]
    changed = {t: sha for t, sha in claim_tips.items() if t not in cached or cached[t].tip != sha}
    recs = dict(zip(changed, remote_refs.read_files(state.cwd, list(changed.values()), records.CLAIM_FILE)))
    new_events = 0
    with bus.write() as conn:
        cache.ensure(conn)
        for machine, tip in peers.items():
            lease.observe(conn, machine, tip)
        for machine, (tip, events) in batches.items():
            new_events += cache.add_events(conn, events)
            cache.set_meta(conn, f"log:{machine}", tip)
        puts = [(records.decode(data), changed[task]) for task, data in recs.items()]
        puts += [(e.record, e.tip) for e in archived]
        for rec, tip in puts:
            if rec is not None:
                cache.put_claim(conn, cache.Claim(rec.task, rec.owner, rec.machine, rec.state, rec.verb, rec.seq,
                                                  tip, rec.ts))
        for machine, tip in finished.items():
            cache.set_meta(conn, f"finished:{machine}", tip)
        cache.deliver_posts(conn, state.machine)  # other machines' posts and notes to tasks held here join
        woken = told.deliver(conn, bus.path.parent, state.machine)  # their threads and inboxes
        cache.set_meta(conn, SYNCED_AT, repr(clock.now()))
        cache.set_meta(conn, cache.MACHINE, state.machine)
        cache.set_meta(conn, UNREACHABLE_SINCE, None)
        cache.set_meta(conn, LAST_ERROR, None)
    told.mark(bus.path.parent, woken)  # again after the commit, as `git nerve tell` does
    return new_events, len(puts)


def _entries(state, finished: dict[str, str], seen: dict[str, str | None]) -> dict:
    """{task: its newest archive entry} of the archive batches the cache has not read yet."""
    found: list = []
    for machine, tip in finished.items():
        since = seen.get(machine)
        if since == tip:
            continue
        if since and not refs.is_ancestor(state.cwd, since, tip):
            since = None
        found += archive.entries(state.cwd, tip, since)
    return archive.newest(found)


def _newer(e, c) -> bool:
    """Does archive entry ``e`` of a task without a live claim say more than the cache's claim ``c``?"""
    return c is None or (c.tip != e.tip and e.record.seq >= c.seq)


def _peers(state, local: dict[str, str]) -> dict[str, str]:
    """{machine: its fetched log tip} for every machine but this one."""
    return {ref[len(records.PEERS):]: sha for ref, sha in local.items()
            if ref.startswith(records.PEERS) and ref[len(records.PEERS):] != state.machine}


def _failed(state, bus: Bus, res: remote_refs.RemoteResult) -> None:
    with bus.write() as conn:
        cache.ensure(conn)
        if cache.get_meta(conn, UNREACHABLE_SINCE) is None:
            cache.set_meta(conn, UNREACHABLE_SINCE, repr(clock.now()))
        cache.set_meta(conn, LAST_ERROR, res.message)
    what = "cannot reach" if res.unreachable else "sync refused by"
    raise GitError(f"{what} {state.remote}: {res.message}; this machine's events wait in {records.LOGS}{state.machine} "
                   "and the view stays the cached one")


def freshness(bus: Bus, now: float | None = None, *, store: str = "remote") -> str:
    """"synced 12 s ago", "<store> unreachable since <when>: cached view", or "never synced"."""
    now = clock.now() if now is None else now
    down = cache.get_meta(bus.conn, UNREACHABLE_SINCE)
    if down is not None:
        return f"{store} unreachable since {clock.iso(float(down))}: cached view"
    synced = cache.get_meta(bus.conn, SYNCED_AT)
    if synced is None:
        return "never synced (run `git nerve sync`)"
    return f"synced {max(0, int(now - float(synced)))} s ago"
