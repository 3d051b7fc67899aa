"""Finished tasks' claims move into an archive, so that the remote keeps few claim refs (shared mode).

Once a claim's chain ends in COMPLETED or FAILED, a sync archives it: this machine appends one batch commit to
its own archive ref, ``refs/nerve/finished/<machine>`` (first parent: its previous batch, or an empty start;
the other parents: the archived claims' tips, so every record stays reachable; ``finished.jsonl``: each task,
its final tip and last record), and pushes it in one atomic push with the deletion of those claim refs, each
leased at the tip read (:func:`git_nerve.git.destroy.archive_finished_claims`, the one door). Of two machines
archiving the same claim exactly one push lands; the other changes nothing (its archive ref stays).

Who archives: the machine that made the final transition (its background sync does it at once), or any machine
once that one's lease ran out on its own clock (a machine lost after finishing work). A claim is live again
when a retry moves an archived FAILED task: its new record's parent is the archived tip (the chain stays one
line) and it is created on the remote anew; a live claim ref always wins over an archive entry, and of several
entries of one task the highest ``seq``. A host that refuses the push (``receive.denyDeletes``, a hook) is noted
in the cache and not asked again for a lease's time: the claims stay live, the sync report quotes its words.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from ..bus import shared as cache
from ..bus.connection import Bus
from ..git import destroy, refs, remote_refs
from . import lease, records

#: claims archived by one sync at most, in one push (a batch commit has that many parents more; the push as many
#: deletions). git deletes refs on a remote at a few ms each (measured: 500 in 2 s on 2 loaded cores), so a backlog
#: (a team turning shared mode's archiving on with thousands of finished tasks) drains over several syncs, each
#: bounded, rather than in one sync of half a minute
BATCH = 250
#: the cache's note of the host refusing an archive push (``receive.denyDeletes``, a hook): its words, and when
REFUSED = "archive_refused"


@dataclass(frozen=True)
class Entry:
    tip: str
    record: records.Record


def entries(cwd, tip: str, since: str | None = None, *, task: str | None = None) -> list[Entry]:
    """The archive entries of one archive ref from after ``since`` (None: its start) to ``tip``, oldest first
    (``task``: that task's only; the other lines are not even parsed)."""
    shas = remote_refs.chain(cwd, tip, since, first_parent=True)
    mark = f'"task": {json.dumps(task)}'.encode() if task is not None else None
    out = []
    for data in remote_refs.read_files(cwd, shas, records.FINISHED_FILE):
        if mark is not None:
            data = b"\n".join(ln for ln in (data or b"").splitlines() if mark in ln)
        out += [Entry(t, rec) for t, rec in records.decode_finished(data) if task is None or rec.task == task]
    return out


def newest(found: list[Entry], best: dict[str, Entry] | None = None) -> dict[str, Entry]:
    """{task: its entry with the highest seq}."""
    best = {} if best is None else best
    for e in found:
        old = best.get(e.record.task)
        if old is None or e.record.seq > old.record.seq:
            best[e.record.task] = e
    return best


def tips(cwd, local: dict[str, str] | None = None) -> dict[str, str]:
    """{machine: its archive ref's tip here}."""
    local = remote_refs.local_refs(cwd, records.FINISHED) if local is None else local
    return {ref[len(records.FINISHED):]: sha for ref, sha in local.items() if ref.startswith(records.FINISHED)}


def lookup(cwd, task_id: str) -> Entry | None:
    """The archived claim of ``task_id`` as this clone's archive refs hold it (None: never archived)."""
    best: dict[str, Entry] = {}
    for tip in tips(cwd).values():
        newest(entries(cwd, tip, task=task_id), best)
    return best.get(task_id)


def prune_mirrors(cwd, local: dict[str, str], live: set[str]) -> int:
    """Delete this clone's copies of claims the remote no longer has and an archive ref here keeps (through the
    door); a copy no archive keeps (a claim deleted by hand) stays. ``local``: every refs/nerve/ ref here, updated."""
    gone = [(ref, sha) for ref, sha in local.items()
            if ref.startswith(records.CLAIMS) and ref[len(records.CLAIMS):] not in live]
    if not gone:
        return 0
    keepers = list(tips(cwd, local).values())
    try:
        if not destroy.drop_claim_mirrors(cwd, gone, keepers):
            return 0
    except destroy.Refused:
        return 0  # cannot tell: kept
    for ref, _ in gone:
        local.pop(ref, None)
    return len(gone)


def due(state, bus: Bus, live: dict[str, str]) -> list[cache.Claim]:
    """The finished claims this machine archives now: still live on the remote at the tip the cache holds, and
    finished by this machine, or by one whose lease ran out here."""
    silent: dict[str, float | None] = {}
    out = []
    for task, c in sorted(cache.claims_of(bus.conn, live).items()):
        if c.state not in records.FINISHED_STATES or live[task] != c.tip:
            continue
        if c.machine != state.machine:
            if c.machine not in silent:
                silent[c.machine] = lease.silent_for(bus.conn, c.machine)
            quiet = silent[c.machine]
            if quiet is None or quiet < state.config.lease:
                continue
        out.append(c)
    return out


def archive(state, bus: Bus, live: dict[str, str], finished: str | None = None) -> list[str]:
    """Archive the claims :func:`due` names, at most :data:`BATCH` (one push; the rest at the next syncs; see the
    module); the tasks archived. A push refused (another machine archived or moved one first, or the host said
    no) changes nothing: the next sync judges again. ``live`` and ``finished`` (this machine's archive ref): the
    values the remote advertised to this sync, which the push leases (claims at any other value wait; an archive
    ref here that is not the remote's value archives nothing)."""
    todo = due(state, bus, live)
    if not todo or refused_lately(bus, state.config.lease):
        return []
    cwd, ref = state.cwd, records.FINISHED + state.machine
    old = refs.resolve(cwd, ref)
    if old != finished:
        return []  # this clone's copy is not what the remote has: the next sync (after its fetch) archives
    batch = todo[:BATCH]
    recs = [records.decode(d) for d in remote_refs.read_files(cwd, [c.tip for c in batch], records.CLAIM_FILE)]
    kept = [(c.tip, r) for c, r in zip(batch, recs) if r is not None]
    if not kept:
        return []
    base = old or remote_refs.write_record(cwd, {records.FINISHED_FILE: b""}, None, f"nerve finished {state.machine}: start")
    new = remote_refs.write_record(cwd, {records.FINISHED_FILE: records.encode_finished(kept)}, base,
                                   f"nerve finished {state.machine}: {len(kept)} claims archived",
                                   keep=tuple(tip for tip, _ in kept))
    claims = [(records.CLAIMS + r.task, tip) for tip, r in kept]
    try:
        res = destroy.archive_finished_claims(cwd, state.remote, ref, new, old, claims)
    except destroy.Refused:
        return []  # cannot tell that the archive keeps them: the claims stay
    if not res.ok:
        if res.refused:  # the host's own no (not a race lost, not a remote out of reach)
            _refused(bus, res.message)
        return []
    _landed(state, bus, ref, new, old, claims)
    return [r.task for _, r in kept]


def _landed(state, bus: Bus, ref: str, new: str, old: str | None, claims: list[tuple[str, str]]) -> None:
    """The archive push landed: this clone's archive ref follows, the cache notes the batch as read (it knows
    those claims already), this clone's copies of the claims go."""
    refs.update(state.cwd, ref, new, old, "git-nerve: finished claims archived")
    with bus.write() as conn:
        cache.ensure(conn)
        cache.set_meta(conn, REFUSED, None)
        if cache.get_meta(conn, f"finished:{state.machine}") == old:
            cache.set_meta(conn, f"finished:{state.machine}", new)
    here = remote_refs.local_refs(state.cwd, records.CLAIMS)
    try:
        destroy.drop_claim_mirrors(state.cwd, [(r, t) for r, t in claims if here.get(r) == t], [new])
    except destroy.Refused:
        pass  # the copies stay; the next sync prunes them


def _refused(bus: Bus, message: str) -> None:
    with bus.write() as conn:
        cache.ensure(conn)
        cache.set_meta(conn, REFUSED, json.dumps({"mono": time.monotonic(), "message": message}))


def refused_lately(bus: Bus, wait: float) -> str | None:
    """The host's words when it refused an archive push less than ``wait`` seconds ago (this machine's monotonic
    clock): archiving waits that long rather than pushing in vain at every sync; the claims stay live."""
    try:
        note = json.loads(cache.get_meta(bus.conn, REFUSED) or "null")
        since = time.monotonic() - float(note["mono"])
    except (ValueError, TypeError, KeyError):
        return None
    return str(note.get("message") or "refused") if 0 <= since < wait else None
