"""The git remote's side of a move (:mod:`.move`): its mark, freezing its claims, reading everything it holds,
and writing everything into it.

* The mark: ``refs/nerve/moved/store``, a record commit whose ``moved.json`` names where the repository's
  shared state is now (``{"backend": "postgres", "schema": ...}``; ``"git"``: here again, after a move back).
  `git nerve sync` sees it in the ``ls-remote`` it makes anyway, a spawn in the fetch of the archives it makes
  anyway (:mod:`.gitremote`), and refuses with one line (:func:`.judge.moved_off`, exit 2).
* The freeze: the mark first (a compare-and-set of its one ref), then one ``move`` record on top of every live
  claim (and of every archived claim a retry could bring back), each leased at the tip read, in rounds until a
  look finds none left: a transition of a clone still on the old configuration loses its compare-and-set from
  then on and finds the ``move`` record (exit 2); one that landed before is the frozen record's parent.
* The load: one atomic push of every claim (a record on top of what the remote has, when it differs), every
  machine's log (one batch of the events its log does not hold yet, with its cursor) and the mark ``git``
  when the remote had one: all of it lands, or none (a rerun starts again).
"""

from __future__ import annotations

from .. import clock
from ..errors import GitError
from ..git import remote_refs
from . import archive, judge, records

#: attempts at the mark when another move's moved it between the read and the push
ATTEMPTS = 5
#: rounds of the freeze (each freezes every claim not frozen yet; a claim another push moved meanwhile waits
#: for the next round)
ROUNDS = 20
_FETCH = [f"+{records.CLAIMS}*:{records.CLAIMS}*", f"+{records.LOGS}*:{records.PEERS}*",
          f"+{records.FINISHED}*:{records.FINISHED}*", "+refs/nerve/moved/*:refs/nerve/moved/*"]


class GitStore:
    """The git remote ``remote`` seen from the clone at ``cwd``, for a move by ``machine``."""

    backend = "git"

    def __init__(self, cwd, remote: str, machine: str):
        self.cwd, self.remote, self.machine = cwd, remote, machine

    def describe(self) -> dict:
        return {"backend": "git", "remote": self.remote}

    def _look(self) -> dict[str, str]:
        """Fetch every refs/nerve/ ref a move reads; {ref: sha} as the remote advertises them."""
        res = remote_refs.fetch(self.cwd, self.remote, _FETCH)
        if not res.ok:
            raise self._failed(res)
        listed, adv = remote_refs.ls_remote(self.cwd, self.remote, "refs/nerve/*")
        if not listed.ok:
            raise self._failed(listed)
        return adv

    def _failed(self, res: remote_refs.RemoteResult) -> GitError:
        what = "cannot reach" if res.unreachable else "refused by"
        return GitError(f"the move: {what} {self.remote}: {res.message}; run the move again")

    def read_mark(self) -> dict | None:
        adv = self._look()
        return self._mark(adv.get(records.MOVED))

    def _mark(self, sha: str | None) -> dict | None:
        return records.decode_mark(remote_refs.read_files(self.cwd, [sha], records.MOVED_FILE)[0]) if sha else None

    def _record(self, rev: str) -> records.Record | None:
        return records.decode(remote_refs.read_files(self.cwd, [rev], records.CLAIM_FILE)[0])

    def freeze(self, target: dict) -> None:
        """Mark this remote moved to ``target`` (a spawn or a sync is refused from then on), then freeze every
        claim, each by its own lease, until a look finds none left unfrozen (see the module)."""
        for _ in range(ATTEMPTS):
            adv = self._look()
            mark_sha = adv.get(records.MOVED)
            if _same_target(self._mark(mark_sha), target):
                break
            sha = remote_refs.write_record(self.cwd, {records.MOVED_FILE: records.encode_mark(
                {**target, "machine": self.machine, "at": clock.now()})}, mark_sha, f"nerve moved to {target['backend']}")
            res = remote_refs.cas_push(self.cwd, self.remote, [(records.MOVED, sha, mark_sha)])
            if res.ok:
                break
            if not res.stale:
                raise self._failed(res)
        else:
            raise GitError(f"the move: the mark on {self.remote} kept moving; run the move again")
        for _ in range(ROUNDS):
            updates = self._freezes(self._look())
            if not updates:
                return
            res = remote_refs.lease_push(self.cwd, self.remote, updates)
            if not res.ok and not res.stale:
                raise self._failed(res)
        raise GitError(f"the move: the claims on {self.remote} kept moving; run the move again")

    def _freezes(self, adv: dict[str, str]) -> list[tuple[str, str, str | None]]:
        """A ``move`` record on top of each claim not frozen yet, leased at its tip (an archived one: absent)."""
        updates = []
        for task, (tip, rec, live) in self._claims(adv).items():
            if rec.verb == records.MOVE or (not live and rec.state == "COMPLETED"):
                continue
            frozen = records.Record(task, rec.state, rec.previous, records.MOVE, self.machine, rec.owner,
                                    rec.seq + 1, clock.now())
            sha = remote_refs.write_record(self.cwd, {records.CLAIM_FILE: frozen.encode()}, tip,
                                           f"move {task}: frozen by {self.machine}")
            updates.append((records.CLAIMS + task, sha, tip if live else None))
        return updates

    def _claims(self, adv: dict[str, str]) -> dict[str, tuple[str, records.Record, bool]]:
        """{task: (its tip, its last record, live?)}: every live claim, and the archived ones without one."""
        live = {ref[len(records.CLAIMS):]: sha for ref, sha in adv.items() if ref.startswith(records.CLAIMS)}
        recs = remote_refs.read_files(self.cwd, list(live.values()), records.CLAIM_FILE)
        out = {t: (sha, r, True) for (t, sha), r in zip(live.items(), map(records.decode, recs)) if r is not None}
        best: dict[str, archive.Entry] = {}
        for ref, tip in adv.items():
            if ref.startswith(records.FINISHED):
                archive.newest(archive.entries(self.cwd, tip), best)
        out.update({t: (e.tip, e.record, False) for t, e in best.items() if t not in out})
        return out

    def dump(self) -> records.Snapshot:
        """Every claim as it was before the freeze, every machine's events and cursor."""
        adv = self._look()
        claims = {}
        for task, (tip, rec, _) in self._claims(adv).items():
            if rec.verb == records.MOVE:  # the record the freeze put on top of it: the claim is its parent's
                rec = self._record(f"{tip}^")
            if rec is not None:
                claims[task] = rec
        events, cursors = {}, {}
        for ref, tip in adv.items():
            if not ref.startswith(records.LOGS):
                continue
            machine = ref[len(records.LOGS):]
            shas = remote_refs.chain(self.cwd, tip)
            events[machine] = [e for data in remote_refs.read_files(self.cwd, shas, records.LOG_FILE)
                               for e in records.decode_batch(data) if e["machine"] == machine and records.is_record(e)]
            cursors[machine] = records.decode_cursor(remote_refs.read_files(self.cwd, [tip], records.CURSOR_FILE)[0])
        return records.Snapshot(claims, events, cursors)

    def load(self, snap: records.Snapshot) -> dict:
        """Write ``snap`` into this remote in one atomic push (see the module); what was written."""
        adv = self._look()
        updates = self._claim_updates(snap, adv)
        written = len(updates)
        updates += self._log_updates(snap, adv)
        mark_sha = adv.get(records.MOVED)
        mark = self._mark(mark_sha)
        if mark is not None and mark.get("backend") != "git":  # a move back here: this remote is the store again
            sha = remote_refs.write_record(self.cwd, {records.MOVED_FILE: records.encode_mark(
                {**self.describe(), "machine": self.machine, "at": clock.now()})}, mark_sha, "nerve moved to git")
            updates.append((records.MOVED, sha, mark_sha))
        if updates:
            res = remote_refs.cas_push(self.cwd, self.remote, updates)
            if not res.ok:
                raise self._failed(res)
        return {"claims_written": written, "logs_written": len(updates) - written}

    def _claim_updates(self, snap: records.Snapshot, adv: dict[str, str]) -> list[tuple[str, str, str | None]]:
        out = []
        for task, rec in sorted(snap.claims.items()):
            ref = records.CLAIMS + task
            tip = adv.get(ref)
            if tip is not None and _same_claim(self._record(tip), rec):
                continue
            sha = remote_refs.write_record(self.cwd, {records.CLAIM_FILE: rec.encode()}, tip,
                                           f"{rec.verb} {task}: moved here by {self.machine}")
            out.append((ref, sha, tip))
        return out

    def _log_updates(self, snap: records.Snapshot, adv: dict[str, str]) -> list[tuple[str, str, str | None]]:
        out = []
        for machine in sorted(set(snap.events) | set(snap.cursors)):
            ref = records.LOGS + machine
            tip = adv.get(ref)
            shas = remote_refs.chain(self.cwd, tip) if tip else []
            have = {e["id"] for data in remote_refs.read_files(self.cwd, shas, records.LOG_FILE)
                    for e in records.decode_batch(data)}
            cursor = snap.cursors.get(machine, {})
            old = records.decode_cursor(remote_refs.read_files(self.cwd, [tip], records.CURSOR_FILE)[0]) if tip else None
            new = [e for e in snap.events.get(machine, []) if e["id"] not in have]
            if not new and old == cursor:
                continue
            sha = remote_refs.write_record(self.cwd, {records.LOG_FILE: records.encode_batch(new),
                                                      records.CURSOR_FILE: records.encode_cursor(cursor)},
                                           tip, f"nerve log {machine}: {len(new)} events moved here")
            out.append((ref, sha, tip))
        return out


def _same_target(mark: dict | None, target: dict) -> bool:
    return mark is not None and all(mark.get(k) == v for k, v in target.items())


def _same_claim(a: records.Record | None, b: records.Record) -> bool:
    keys = ("task", "state", "previous", "verb", "machine", "owner", "seq")
    return a is not None and all(getattr(a, k) == getattr(b, k) for k in keys)


def refuse_if_moved(cwd, remote: str, adv: dict[str, str], local: dict[str, str] | None = None) -> None:
    """`git nerve sync` on this remote: StoreMoved when its mark (in ``adv``, the ls-remote made anyway) names
    another store (the mark is fetched only when it is not here yet)."""
    sha = adv.get(records.MOVED)
    if sha is None:
        return
    here = (local or {}).get(records.MOVED)
    if here != sha:
        remote_refs.fetch(cwd, remote, [f"+{records.MOVED}:{records.MOVED}"])
    refuse_local_mark(cwd, sha)


def refuse_local_mark(cwd, sha: str | None = None) -> None:
    """StoreMoved when the mark (``sha``, else this clone's copy of it) names another store than the git remote."""
    from ..git import refs

    sha = sha or refs.resolve(cwd, records.MOVED)
    if sha is None:
        return
    mark = records.decode_mark(remote_refs.read_files(cwd, [sha], records.MOVED_FILE)[0])
    if mark is not None and mark.get("backend") != "git":
        raise judge.moved_off(mark)
