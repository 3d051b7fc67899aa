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
   (:func:`~git_nerve.bus.shared.deliver_posts`), and this machine's rows follow the reviews and merges other
   machines made of its tasks (:mod:`git_nerve.bus.followed`). ``rebuild`` forgets the cache first and reads every chain
   from its start;
5. archive the finished claims due (:mod:`.archive`).

No git runs while the bus transaction is open: every chain is read first.
"""

from __future__ import annotations

import json
import time

from .. import clock, locks
from ..bus import shared as cache
from ..bus import told
from ..bus.followed import follow
from ..bus.connection import Bus
from ..errors import GitError
from ..git import refs, remote_refs
from . import archive, lease, records, vet
from .move_git import refuse_if_moved

NERVE = "refs/nerve/"
SYNCED_AT = "synced_at"
UNREACHABLE_SINCE = "unreachable_since"
LAST_ERROR = "last_error"
#: why the last sync failed when the store was reached: "policy" (the host's rules refused it), "refused"
#: (another failure it answered), "auth" (PostgreSQL refused this machine's credentials); unset: out of reach
DOWN_KIND = "down_kind"


def export(state, bus: Bus, *, over: str | None = None) -> int:
    """This machine's records since its last batch, appended to its log ref as one commit; how many. ``over``: a
    log of this machine's name on the remote that this clone did not write (:func:`_own_log`): the commit keeps
    it as a second parent (a fast-forward there; nothing of it overwritten), moving the log even with nothing new."""
    ref = records.LOGS + state.machine
    tip = refs.resolve(state.cwd, ref)
    cursor = records.decode_cursor(remote_refs.read_files(state.cwd, [tip], records.CURSOR_FILE)[0]) if tip else {}
    new, after = cache.local_events(bus.conn, state.machine, cursor)
    if not new and not over and not lease.beat_due(bus.conn, state.machine, state.config.lease):
        return 0
    if not new:  # nothing happened here, but the others judge this machine's leases by its log moving
        beat = records.ALIVE_STREAM
        after[beat] = cursor.get(beat, 0) + 1
        new = [{"id": f"{state.machine}:{beat}{after[beat]}", "machine": state.machine, "ts": clock.now(), "task": None,
                "kind": records.ALIVE, "payload": {}}]
    base = tip
    if over and base is None:  # the first parent is this clone's own chain: start one
        base = remote_refs.write_record(state.cwd, {records.CURSOR_FILE: records.encode_cursor({}, state.instance)},
                                        None, f"nerve log {state.machine}: start")
    sha = remote_refs.write_record(
        state.cwd, {records.LOG_FILE: records.encode_batch(new),
                    records.CURSOR_FILE: records.encode_cursor(after, state.instance)},
        base, f"nerve log {state.machine}: {len(new)} events", keep=(over,) if over else ())
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
    quiet = lease.unpublished_for(bus.conn, state.machine)  # before this sync publishes: what a taker could judge
    exported = export(state, bus)
    listed, adv = remote_refs.ls_remote(state.cwd, state.remote, NERVE + "*")
    if not listed.ok:
        _failed(state, bus, listed)
    local = remote_refs.local_refs(state.cwd, NERVE)
    refuse_if_moved(state.cwd, state.remote, adv, local)  # moved to another store: this clone's nerve.toml is old
    _own_name(state, bus, adv)  # another clone uses this machine's name: HeldElsewhere, nothing pushed
    own = records.LOGS + state.machine
    mine = local.get(own)
    if own in adv and adv[own] != mine and not (mine and refs.is_ancestor_quiet(state.cwd, adv[own], mine)):
        exported = _own_log(state, bus, own, adv[own], exported)
        local = remote_refs.local_refs(state.cwd, NERVE)
        mine = local.get(own)
    if mine and adv.get(own) != mine:
        # leased on the value ls-remote just read (only this clone writes its log: a lost lease means the log moved
        # meanwhile; the next sync keeps what moved it as a second parent (_own_log), never adopts it)
        pushed = remote_refs.cas_push(state.cwd, state.remote, [(own, mine, adv.get(own))])
        if not pushed.ok:
            _failed(state, bus, pushed)
        adv[own] = mine
        with bus.write() as conn:
            cache.ensure(conn)
            lease.published(conn, state.machine, mine)
            lease.renewing(conn, state.config.lease, state.config.background)  # signs of life publish from now on
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
    ingested, claims, followed = ingest(state, bus, rebuild=rebuild, live=set(live), local=local, quiet=quiet)
    archived = archive.archive(state, bus, live, adv.get(records.FINISHED + state.machine))
    report = {"backend": "git", "machine": state.machine, "remote": state.remote, "exported": exported,
              "ingested": ingested, "claims": claims, "archived": len(archived), "pruned": pruned, "fetched": fetched,
              "followed": [{"task": t, "state": st, "machine": m} for t, st, m in followed],
              "seconds": round(time.monotonic() - started, 3)}
    refused = archive.refused_lately(bus, state.config.lease)
    if refused:
        report["archive_refused"] = refused
    return report


def _own_name(state, bus: Bus, adv: dict[str, str]) -> None:
    """This machine's name is claimed by this clone (:mod:`.identity`): checked when the remote's claim differs
    from the one this clone last checked, claimed when the remote has none (a clone that joined before names
    were claimed). HeldElsewhere when another clone holds it."""
    from . import identity

    ref = records.MACHINES + state.machine
    if adv.get(ref) is not None and cache.get_meta(bus.conn, "name_claim") == adv[ref]:
        return
    try:
        identity.claim(state.cwd, state.remote, state.machine, state.instance, advertised=adv.get(ref), known=True)
    except GitError:
        return  # the remote refuses such refs (or went): the name stays unchecked this time, the sync goes on
    tip = refs.resolve(state.cwd, ref)
    if tip:
        with bus.write() as conn:
            cache.ensure(conn)
            cache.set_meta(conn, "name_claim", tip)


def _own_log(state, bus: Bus, own: str, remote_tip: str, exported: int) -> int:
    """The remote's log of this machine does not continue this clone's. Written by this clone (its instance, or
    a move that named none; its cursor within what this bus has produced: this clone lost its ref, or a move
    copied it): take it, then export again from its cursor (what it lacks is still in the bus: nothing lost, and
    the ids keep anything from being ingested twice). Anything else this clone did not write (another clone of
    the same name, a forged log): never adopted: the next batch goes on from this clone's own tip and keeps the
    other as a second parent (the push stays a fast-forward, nothing is overwritten); kept with the refused
    records (:mod:`.vet`: `git nerve sync` reports it once). How many events were exported."""
    peer = records.PEERS + state.machine  # where a sync fetches every log to: this machine's own is never read
    res = remote_refs.fetch(state.cwd, state.remote, [f"+{own}:{peer}"])
    if not res.ok:
        _failed(state, bus, res)
    data = remote_refs.read_files(state.cwd, [remote_tip], records.CURSOR_FILE)[0]
    writer, cursor = records.cursor_instance(data), records.decode_cursor(data)
    produced = cache.produced(bus.conn)
    if writer in (None, state.instance) and all(v <= produced.get(k, 0) for k, v in cursor.items()
                                                 if k != records.ALIVE_STREAM):
        res = remote_refs.fetch(state.cwd, state.remote, [f"+{own}:{own}"])
        if not res.ok:
            _failed(state, bus, res)
        return export(state, bus)  # (what the first export made was replaced: exported again)
    by = f"instance {writer[:16]}" if writer else "no instance"
    with bus.write() as conn:
        cache.ensure(conn)
        vet.keep(conn, f"log:{remote_tip}", None, state.machine,
                 f"{state.remote}'s {own} ({remote_tip[:12]}, {by}, cursor {json.dumps(cursor)[:80]}) was not written by "
                 "this clone: not adopted; this machine's log goes on from its own and keeps it as a second parent "
                 "(another clone with this machine's name? `git config nerve.machine`)", json.dumps(cursor)[:2000])
    return exported + export(state, bus, over=remote_tip)


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
           local: dict[str, str] | None = None, quiet: float | None = None) -> tuple[int, int, list]:
    """Every other machine's new events, every changed claim and every new archive entry into the cache, and the
    rows of this machine's tasks another machine reviewed or merged moved as the claims say
    (:func:`git_nerve.bus.followed.follow`): (new events, claims updated, [(task, state, machine)] followed). ``live``: the claims the remote has (None: every copy here); a copy of a claim the
    remote archived is never read back (it would bring an earlier state back). ``local``: the refs/nerve/ refs.
    ``quiet``: seconds this machine's log had not reached the remote when the sync began (None: cannot tell)."""
    local = remote_refs.local_refs(state.cwd, NERVE) if local is None else local
    with bus.write() as conn:
        cache.ensure(conn)
        if rebuild:
            cache.clear(conn)
            vet.forget(conn)  # a rebuild judges every record anew
        peers = _peers(state, local)
        seen_logs = {m: cache.get_meta(conn, f"log:{m}") for m in peers}
        finished = archive.tips(state.cwd, local)
        seen_finished = {m: cache.get_meta(conn, f"finished:{m}") for m in finished}
    batches = _batches(state, peers, seen_logs)
    claim_tips = {ref[len(records.CLAIMS):]: sha for ref, sha in local.items() if ref.startswith(records.CLAIMS)}
    if live is not None:
        claim_tips = {t: sha for t, sha in claim_tips.items() if t in live}
    found = _entries(state, finished, seen_finished)
    for task in [t for t in claim_tips if t in found and _archived_since(state, claim_tips[t], found[t])]:
        del claim_tips[task]  # archived after the listing, before the fetch: this copy is older than the archive
    cached = cache.claims_of(bus.conn, [*claim_tips, *found])  # only the tasks this sync may change
    archived = [e for task, e in found.items() if task not in claim_tips and _newer(e, cached.get(task))]
    changed = {t: sha for t, sha in claim_tips.items() if t not in cached or cached[t].tip != sha}
    puts, refused = _judge(state, bus, changed, cached, quiet)
    new_events = 0
    with bus.write() as conn:
        cache.ensure(conn)
        for key, task, machine, why, rec in refused:
            vet.keep(conn, key, task, machine, why, rec)
        for machine, tip in peers.items():
            lease.observe(conn, machine, tip)
        for machine, (tip, events) in batches.items():
            new_events += cache.add_events(conn, vet.sound(conn, machine, events))
            cache.set_meta(conn, f"log:{machine}", tip)
        puts += [(e.record, e.tip) for e in archived if vet.form_fault(e.record, e.record.task) is None]
        for rec, tip in puts:
            if rec is not None:
                cache.put_claim(conn, cache.Claim(rec.task, rec.owner, rec.machine, rec.state, rec.verb, rec.seq,
                                                  tip, rec.ts))
        for machine, tip in finished.items():
            cache.set_meta(conn, f"finished:{machine}", tip)
        cache.deliver_posts(conn, state.machine)  # other machines' posts and notes to tasks held here join
        woken = told.deliver(conn, bus.path.parent, state.machine)  # their threads and inboxes
        followed = follow(conn, state.machine, clock.now())  # reviews and merges made elsewhere: rows follow
        cache.set_meta(conn, SYNCED_AT, repr(clock.now()))
        cache.set_meta(conn, cache.MACHINE, state.machine)
        cache.set_meta(conn, UNREACHABLE_SINCE, None)
        cache.set_meta(conn, LAST_ERROR, None)
        cache.set_meta(conn, DOWN_KIND, None)
    told.mark(bus.path.parent, woken)  # again after the commit, as `git nerve tell` does
    return new_events, len(puts), followed


def _batches(state, peers: dict[str, str], seen_logs: dict) -> dict[str, tuple[str, list[dict]]]:
    """{machine: (its log's tip, the events of its batches since the tip the cache read)} of each moved log."""
    batches: dict[str, tuple[str, list[dict]]] = {}
    for machine, tip in peers.items():
        since = seen_logs.get(machine)
        if since == tip:
            continue
        if since and not refs.is_ancestor(state.cwd, since, tip):
            since = None  # a chain that does not continue what was seen: read it whole (ids keep it exact)
        shas = remote_refs.chain(state.cwd, tip, since, first_parent=True)  # a log kept past a foreign one: its own
        batches[machine] = (tip, [e for data in remote_refs.read_files(state.cwd, shas, records.LOG_FILE)
                                  for e in records.decode_batch(data) if records.is_record(e)])
    return batches


def _judge(state, bus: Bus, changed: dict[str, str], cached: dict, quiet: float | None) -> tuple[list, list]:
    """Each changed claim judged record by record (:mod:`.vet`): ([(the last record accepted, its commit)],
    [(key, task, machine, reason, record)] refused). A claim never seen before is judged by its tip's form alone
    (one read for all of them); one seen before by every record since (a chain that does not continue it: every
    record of it, against what was accepted)."""
    first = [t for t in changed if t not in cached]
    puts, refused = [], []
    for task, data in zip(first, remote_refs.read_files(state.cwd, [changed[t] for t in first], records.CLAIM_FILE)):
        rec = records.decode(data)
        why = vet.form_fault(rec, task)
        if why:
            refused.append((changed[task], task, getattr(rec, "machine", None), why,
                            rec if rec is not None else (data or b"")[:2000].decode("utf-8", "replace")))
        else:
            puts.append((rec, changed[task]))
    silence = lambda: quiet  # noqa: E731  (as it was before this sync published anything)
    for task in (t for t in changed if t in cached):
        c, tip = cached[task], changed[task]
        since = c.tip if refs.is_ancestor_quiet(state.cwd, c.tip, tip) else None
        rec, sha, bad = vet.accepted(state.cwd, tip, task, state.machine, vet.claim_record(c), since,
                                     silence, state.config.lease)
        refused += [(s, task, getattr(r, "machine", None), why, r) for s, r, why in bad]
        if sha is not None and sha != c.tip:
            puts.append((rec, sha))
    return puts, refused


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


def _archived_since(state, copy: str, e) -> bool:
    """Is this machine's copy of a claim (the remote listed it live) an earlier point of the chain archive entry
    ``e`` ends? The claim was archived between the sync's listing and its fetch, which brought the archive but
    not the claim. A retry's live claim goes on from the archived tip (not before it), so it never counts."""
    return copy != e.tip and refs.is_ancestor_quiet(state.cwd, copy, e.tip)


def _newer(e, c) -> bool:
    """Does archive entry ``e`` of a task without a live claim say more than the cache's claim ``c``?"""
    return c is None or (c.tip != e.tip and e.record.seq >= c.seq)


def _peers(state, local: dict[str, str]) -> dict[str, str]:
    """{machine: its fetched log tip} for every machine but this one."""
    return {ref[len(records.PEERS):]: sha for ref, sha in local.items()
            if ref.startswith(records.PEERS) and ref[len(records.PEERS):] != state.machine}


def note_failure(bus: Bus, message: str, kind: str | None) -> None:
    """A sync (or a listener's connection) failed: the view is stale from now on, and `status` says why
    (``kind``: see :data:`DOWN_KIND`; None: out of reach)."""
    with bus.write() as conn:
        cache.ensure(conn)
        if cache.get_meta(conn, UNREACHABLE_SINCE) is None:
            cache.set_meta(conn, UNREACHABLE_SINCE, repr(clock.now()))
        cache.set_meta(conn, LAST_ERROR, message)
        cache.set_meta(conn, DOWN_KIND, kind)


def _failed(state, bus: Bus, res: remote_refs.RemoteResult) -> None:
    note_failure(bus, res.message, None if res.unreachable else ("policy" if res.policy else "refused"))
    what = (f"cannot reach {state.remote}" if res.unreachable else f"{state.remote} refused the sync by policy (its rules, "
            "not the network)" if res.policy else f"sync refused by {state.remote}")
    raise GitError(f"{what}: {res.message}; this machine's events wait in {records.LOGS}{state.machine} "
                   "and the view stays the cached one")


def freshness(bus: Bus, now: float | None = None, *, store: str = "remote") -> str:
    """"synced 12 s ago", "<store> unreachable since <when>: cached view", or "never synced"."""
    now = clock.now() if now is None else now
    down = cache.get_meta(bus.conn, UNREACHABLE_SINCE)
    if down is not None:
        kind = cache.get_meta(bus.conn, DOWN_KIND)
        said = (cache.get_meta(bus.conn, LAST_ERROR) or "")[:160]
        how = {"policy": "refused by policy", "refused": "refused", "auth": "refused this machine's credentials"}
        if kind in how:
            return f"{store} {how[kind]} since {clock.iso(float(down))} ({said}): cached view, stale"
        return f"{store} unreachable since {clock.iso(float(down))}: cached view"
    synced = cache.get_meta(bus.conn, SYNCED_AT)
    if synced is None:
        return "never synced (run `git nerve sync`)"
    return f"synced {max(0, int(now - float(synced)))} s ago"
