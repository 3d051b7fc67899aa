"""PostgreSQL as the shared store (issue 29): claims, every machine's events and leases in tables of a database.

Turned on by ``[shared] backend = "postgres"`` in nerve.toml (``git nerve init --shared postgres``), which also
names this repository's ``schema``: several repositories share one database, each in its own namespace. Each
machine gives its connection itself, never in a committed file: ``NERVE_DATABASE_URL``, else ``git config
nerve.database`` (a URL or a libpq keyword string); a password comes from where libpq looks (``~/.pgpass``,
``PGPASSWORD``, ...). The driver is psycopg 3 (``pip install 'git-nerve[postgres]'``), imported only here.

* The schema is created and migrated by git-nerve (``nerve_schema.version``, under an advisory lock); a schema
  newer than this code knows is refused with one line (exit 5).
* A transition is one transaction: the claim row is read, judged as every backend judges it (:mod:`.judge`),
  and moved by compare-and-set on its ``version`` (``UPDATE ... WHERE version = <seen>``; a new task by
  ``INSERT ... ON CONFLICT DO NOTHING``); of racing machines exactly one moves it, the others re-read it and
  raise HeldElsewhere naming the holder. Each transition is also a row of ``transitions`` (the history).
* Leases use the database's clock: every transaction of a machine sets its ``machines.seen_at = now()``; a
  takeover is allowed once the holder was not seen for ``[shared] lease`` seconds of ``now()``, judged inside
  the takeover's own transaction.
* ``sync``: this machine's new bus records (:func:`git_nerve.bus.shared.local_events`, after the cursor the
  database keeps for it) become rows of ``events`` (numbered per machine, ``mseq``) in one transaction with
  the cursor's move, so nothing is published twice; everyone's claims and the other machines' events newer
  than the ``mseq`` seen of each are read into the bus's cache (:mod:`git_nerve.bus.shared`), each event once.
* The database not reachable: the connection fails within ``CONNECT_TIMEOUT`` seconds, one line (exit 5),
  nothing changed; this machine's events wait in its bus and go out with the next sync that reaches it.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from typing import Iterator

from .. import clock, locks
from ..bus import shared as cache
from ..bus import told
from ..bus.followed import follow
from ..bus.connection import Bus
from ..errors import DatabaseError, HeldElsewhere, NerveError, UsageError
from . import RemoteStore, postgres_hold, postgres_move, postgres_schema, records
from .lease import published as _published
from .lease import renewing as _renewing
from .postgres_sql import CLAIM_COLUMNS as _CLAIM_COLUMNS
from .postgres_sql import cached as _cached
from .postgres_sql import claim_name as _claim_name
from .postgres_sql import insert_events
from .postgres_sql import current as _current
from .postgres_sql import move as _move
from .postgres_sql import notify as _notify
from .postgres_sql import record as _record
from .postgres_sql import seen as _seen
from .postgres_sql import tip as _tip
from .config import SharedConfig, _git_config
from .judge import AUTO_STATES, already, ours_to_take, refusal, taken_here

#: compare-and-set attempts when the row moved between the read and the update
ATTEMPTS = 3
ENV_URL = "NERVE_DATABASE_URL"
LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout ran out
SEEN = "pg:seen"  # the cache's meta key (+ ":<schema>"): {machine: the last mseq of its events ingested}



def _vetted(conn, recs: list[records.Record]) -> list[records.Record]:
    """The claim rows whose form is sound (:mod:`.vet`: a task id by the local rules, machine names, states); the
    others kept for inspection, changing nothing here. (Their transitions the database judged as they were made.)"""
    from . import vet

    out = []
    for rec in recs:
        why = vet.form_fault(rec, rec.task)
        if why is None:
            out.append(rec)
        else:
            vet.keep(conn, f"pg:{rec.task[:60]}:{rec.seq}", rec.task, rec.machine, why, rec)
    return out


def _sound_events(conn, events: list[dict]) -> list[dict]:
    from . import vet

    out = []
    for machine in dict.fromkeys(e["machine"] for e in events):
        out += vet.sound(conn, machine, [e for e in events if e["machine"] == machine])
    return out


class PostgresState(RemoteStore):
    locks_claims = True  # a merge holds the claim row locked across its push (``SELECT ... FOR UPDATE``)
    queues_merges = True  # hold_next: ``SKIP LOCKED``

    def __init__(self, config: SharedConfig):
        super().__init__(config)
        self.schema = config.schema or "nerve"

    @property
    def seen_key(self) -> str:
        """Per schema: a move onto another schema numbers every machine's events afresh (:mod:`.move`)."""
        return f"{SEEN}:{self.schema}"

    # -- the connection ----------------------------------------------------------------------------------------
    def url(self) -> str:
        url = (os.environ.get(ENV_URL) or "").strip() or _git_config(self.cwd, "nerve.database")
        if not url:
            raise UsageError(f"this repository's shared state is in PostgreSQL (nerve.toml): give this machine its "
                             f"connection with `git config nerve.database <url>` or {ENV_URL}")
        return url

    @contextmanager
    def session(self, unchanged: str, busy: NerveError | None = None) -> Iterator:
        """A connection (autocommit: each :meth:`conn.transaction` is one), its schema ready; every driver error
        becomes one line saying ``unchanged`` (a lock not granted in time: ``busy``, when given). The caller's own
        NerveErrors pass through."""
        try:
            import psycopg
        except ImportError:
            raise UsageError("this repository's shared state is in PostgreSQL: its driver is missing here "
                             "(pip install 'git-nerve[postgres]')") from None
        url = self.url()
        where = postgres_schema.where(url)
        try:
            conn = psycopg.connect(url, **postgres_schema.connect_options(url))
        except psycopg.Error as exc:
            raise postgres_schema.connect_failed(where, exc, unchanged) from None
        try:
            conn.execute("SET statement_timeout = '30s'")
            conn.execute("SET lock_timeout = '10s'")
            postgres_schema.ensure(conn, self.schema)
            yield conn
        except psycopg.Error as exc:
            if busy is not None and getattr(exc, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                raise busy from None
            raise DatabaseError(f"the database {where} failed: {postgres_schema.first_line(exc)}; {unchanged}") from None
        finally:
            conn.close()

    def prepare_schema(self, instance: str | None = None) -> str:
        """Connect, create or migrate the schema (``init --shared postgres``); where the database is. ``instance``:
        claim this machine's name for that clone (:mod:`.identity`): HeldElsewhere when another clone has it."""
        with self.session("shared mode was not turned on" if instance is None else "nothing changed here") as conn:
            if instance is not None:
                self.own_name(conn, instance)
            return postgres_schema.where(self.url())

    def own_name(self, conn, instance: str) -> None:
        """This machine's name is this clone's (claimed now when nobody has it); HeldElsewhere when another
        clone's (instance) holds it."""
        from .identity import refused

        with conn.transaction():
            holder = _claim_name(conn, self.machine, instance)
        if holder != instance:
            raise refused(self.machine, holder)

    # -- claims ------------------------------------------------------------------------------------------------
    def claim(self, bus: Bus, task_id: str, expected: str | None, new: str, verb: str, *, take: bool = False,
              holder: str | None = None) -> None:
        """Move ``task_id``'s claim from ``expected`` (None: a new task) to ``new`` in one transaction, before
        the local bus moves. Idempotent: a claim that already records this transition by this machine is success.
        ``holder``: a takeover expects the task still held by that machine. A claim this process holds locked
        (:meth:`hold`, :meth:`hold_next`) moves inside that transaction, committed when the hold ends."""
        held = postgres_hold.holding(self.schema, task_id)
        if held is not None:
            held.claim(bus, expected, new, verb)
            return
        self._claim(bus, task_id, expected, new, verb, take=take, holder=holder)

    def _claim(self, bus: Bus, task_id: str, expected: str | None, new: str, verb: str, *, take: bool,
               lease: bool = False, holder: str | None = None) -> None:
        unchanged = f"nothing changed here ({task_id} is still {expected})" if expected else \
            f"nothing changed here ({task_id} was not created)"
        with self.session(unchanged) as conn:
            for _ in range(ATTEMPTS):
                with postgres_schema.transaction(conn, postgres_schema.where(self.url()), f"{task_id}'s {verb}"):
                    postgres_move.refuse_moved(conn)  # a clone whose nerve.toml still names this store after a move
                    _seen(conn, self.machine)
                    current = _current(conn, task_id)
                    if current is not None and (already(current, new, verb, self.machine)
                                                or taken_here(current, expected, new, take, self.machine)):
                        rec = current
                    else:
                        refused = refusal(task_id, current, expected, take, self.machine, holder)
                        if refused is not None:
                            raise refused
                        if lease and current is not None:
                            self._lease_ran_out(conn, task_id, current)
                        rec = _move(conn, task_id, current, expected, new, verb, self.machine, take)
                if rec is not None:
                    break
            else:
                raise DatabaseError(f"could not move the claim of {task_id}: it kept moving; {unchanged}")
        with bus.write() as c:
            cache.ensure(c)
            cache.put_claim(c, _cached(rec))
            cache.set_meta(c, cache.MACHINE, self.machine)
        if self.config.background:  # publish this transition's messages (and what the hooks queued) soon
            from .background import spawn

            spawn(self.config.common_dir, self.cwd)

    def prepare_with_push(self, task_id: str, expected: str | None, new: str, verb: str, remote: str, *,
                          fresh: bool = False):
        """The claim row locked across the command's push, judged first (HeldElsewhere: nothing pushed); the
        transition committed once the push landed (:mod:`.postgres_push`)."""
        from . import postgres_push
        if postgres_hold.holding(self.schema, task_id) is not None:
            return None  # a hold of this process has the row locked (a merge): the claim moves inside it

        return postgres_push.hold(self, task_id, expected, new, verb)

    def landed(self, bus: Bus, pending) -> None:
        from . import postgres_push

        postgres_push.landed(self, bus, pending)

    def lost(self, pending) -> None:
        from . import postgres_push

        postgres_push.lost(pending)

    def take(self, bus: Bus, task_id: str) -> str:
        """Take over ``task_id`` (ASSIGNED to this machine) once its holder was not seen for the lease by the
        database's clock, judged in the takeover's own transaction; the state it had."""
        with self.session("nothing changed here") as conn:
            current = _current(conn, task_id)
        if current is None:
            raise UsageError(f"no task {task_id!r} in the shared state")
        if ours_to_take(task_id, current.owner, current.state, self.machine):
            return current.state
        self._claim(bus, task_id, current.state, "ASSIGNED", "takeover", take=True, lease=True, holder=current.owner)
        return current.state

    def hold(self, bus: Bus, task_id: str, verb: str):
        """``task_id``'s claim row locked (``SELECT ... FOR UPDATE``, waiting at most ``HOLD_WAIT`` seconds for
        another machine's hold) in a transaction committed when the ``with`` ends: :mod:`.postgres_hold`."""
        return postgres_hold.hold(self, bus, task_id, verb)

    def hold_next(self, bus: Bus, skip: list[str]):
        """The next APPROVED claim of any machine in approval order that no other transaction holds (``SKIP
        LOCKED``), locked as :meth:`hold` does; None when there is none. ``skip``: tasks this run leaves."""
        return postgres_hold.hold_next(self, bus, skip)

    def learn(self, bus: Bus, task_id: str) -> records.Record | None:
        """The claim of ``task_id`` as the database holds it now, into the cache (fencing reads it); the record."""
        with self.session("nothing changed here") as conn:
            rec = _current(conn, task_id)
        if rec is not None:
            with bus.write() as c:
                cache.ensure(c)
                cache.put_claim(c, _cached(rec))
                cache.set_meta(c, cache.MACHINE, self.machine)
        return rec

    def takeable(self, bus: Bus) -> list[str]:
        """The tasks ``[shared] takeover`` lets a sync take over: another machine's, in a state the setting names,
        whose holder was not seen for the lease by the database's clock; oldest transition first."""
        states = AUTO_STATES.get(self.config.takeover, ())
        if not states:
            return []
        with self.session("nothing changed here") as conn:
            rows = conn.execute(
                "SELECT c.task_id FROM claims c LEFT JOIN machines m ON m.machine = c.owner WHERE c.owner <> %s "
                "AND c.state = ANY(%s) AND m.seen_at IS NOT NULL AND now() - m.seen_at >= make_interval(secs => %s) "
                "ORDER BY c.at, c.task_id", (self.machine, list(states), float(self.config.lease))).fetchall()
        return [r[0] for r in rows]

    def _lease_ran_out(self, conn, task_id: str, current: records.Record) -> None:
        row = conn.execute("SELECT extract(epoch FROM now() - seen_at)::float8 FROM machines WHERE machine = %s",
                           (current.owner,)).fetchone()
        silent, limit = (row[0] if row else None), self.config.lease
        if silent is None or silent < limit:
            seen = "was never seen" if silent is None else f"was seen {silent:.0f} s ago"
            raise HeldElsewhere(f"task {task_id} is held by machine {current.owner}, which {seen} (lease: {limit:.0f} s "
                                "of the database's clock); nothing changed here")

    # -- sync and the cached view --------------------------------------------------------------------------------
    def sync(self, bus: Bus, *, rebuild: bool = False) -> dict:
        """Publish this machine's new events, read every claim and the other machines' new events into the
        cache, one sync at a time per repository; a report. Unreachable: the cache stays, the time of the first
        failure is kept for `status`, a DatabaseError says so (the events wait in the bus)."""
        from .background import lock_paths

        with locks.hold(lock_paths(self.config.common_dir)[0], timeout=120, what="the sync lock"):
            return self._sync(bus, rebuild=rebuild)

    def _sync(self, bus: Bus, *, rebuild: bool) -> dict:
        from .sync import DOWN_KIND, LAST_ERROR, SYNCED_AT, UNREACHABLE_SINCE, note_failure

        started = time.monotonic()
        seen = {} if rebuild else _seen_map(cache.get_meta(bus.conn, self.seen_key))
        try:
            with self.session("this machine's events wait in its bus; the view stays the cached one") as conn:
                self.own_name(conn, self.instance)  # another clone with this name: refused, nothing published
                exported = _export(conn, bus, self.machine)
                claims = conn.execute(f"SELECT {_CLAIM_COLUMNS} FROM claims").fetchall()
                events = conn.execute(
                    "SELECT event_id, machine, mseq, ts, task_id, kind, payload FROM events WHERE machine <> %s "
                    "AND mseq > COALESCE((%s::jsonb ->> machine)::bigint, 0) ORDER BY machine, mseq",
                    (self.machine, json.dumps(seen))).fetchall()
        except DatabaseError as exc:
            note_failure(bus, exc.message, getattr(exc, "kind", None))
            raise
        for _, machine, mseq, *_rest in events:
            seen[machine] = max(seen.get(machine, 0), mseq)
        with bus.write() as conn:
            cache.ensure(conn)
            if rebuild:
                cache.clear(conn)
            cached = {c.task_id: c.tip for c in cache.claims(conn)}  # (a claim the git remote cached: replaced)
            changed = _vetted(conn, [_record(r) for r in claims if cached.get(r[0]) != _tip(r[6])])
            for rec in changed:
                cache.put_claim(conn, _cached(rec))
            ingested = cache.add_events(conn, _sound_events(conn, [
                {"id": e[0], "machine": e[1], "ts": e[3], "task": e[4], "kind": e[5], "payload": e[6]} for e in events]))
            cache.deliver_posts(conn, self.machine)  # other machines' posts and notes to tasks held here join
            woken = told.deliver(conn, bus.path.parent, self.machine)  # their threads and inboxes
            followed = follow(conn, self.machine, clock.now())  # reviews and merges made elsewhere: rows follow
            cache.set_meta(conn, self.seen_key, json.dumps(seen, sort_keys=True))
            cache.set_meta(conn, cache.MACHINE, self.machine)
            _published(conn, self.machine, "seen")  # the export set machines.seen_at = now(): its leases renewed
            _renewing(conn, self.config.lease, self.config.background)
            cache.set_meta(conn, SYNCED_AT, repr(clock.now()))
            cache.set_meta(conn, UNREACHABLE_SINCE, None)
            cache.set_meta(conn, LAST_ERROR, None)
            cache.set_meta(conn, DOWN_KIND, None)
        told.mark(bus.path.parent, woken)  # again after the commit, as `git nerve tell` does
        return {"backend": "postgres", "machine": self.machine, "remote": f"{postgres_schema.where(self.url())} ({self.schema})",
                "exported": exported, "ingested": ingested, "claims": len(changed),
                "followed": [{"task": t, "state": st, "machine": m} for t, st, m in followed],
                "seconds": round(time.monotonic() - started, 3)}

    def freshness(self, bus: Bus) -> str:
        from .sync import freshness

        return freshness(bus, store="database")

    def beat(self, conn) -> None:
        """Note this machine seen now, by the database's clock (a listener's beat: its leases hold)."""
        _seen(conn, self.machine)

    def watch(self, bus: Bus, report, *, guard=None) -> None:
        """`git nerve sync --watch`: sync now, then again within a moment of any other machine's commit of a
        transition or of events (LISTEN/NOTIFY: :func:`.listen.serve`), ``report`` called with each sync's report
        (or ``{"error": ...}``); until interrupted (at once: ``guard``, a stop waiting for a sync's end, is the git
        remote's)."""
        from .listen import serve

        serve(self, bus, report)


# -- the statements (the claims' own: :mod:`.postgres_sql`) ---------------------------------------------------
def _export(conn, bus: Bus, machine: str) -> int:
    """This machine's bus records after the cursor the database keeps for it, as events, in one transaction
    with the cursor's move (the machine's row is locked meanwhile); how many."""
    with conn.transaction():
        postgres_move.refuse_moved(conn)
        cursor, published = conn.execute(
            "INSERT INTO machines (machine) VALUES (%s) ON CONFLICT (machine) DO UPDATE SET seen_at = now() "
            "RETURNING cursor, published", (machine,)).fetchone()
        new, after = cache.local_events(bus.conn, machine, {k: int(v) for k, v in (cursor or {}).items()})
        if not new:
            return 0
        insert_events(conn, machine, published, new)
        conn.execute("UPDATE machines SET cursor = %s::jsonb, published = %s WHERE machine = %s",
                     (json.dumps(after, sort_keys=True), published + len(new), machine))
        _notify(conn, {"machine": machine, "events": len(new)})
    return len(new)


def _seen_map(value: str | None) -> dict[str, int]:
    try:
        d = json.loads(value) if value else {}
    except ValueError:
        return {}
    return {k: int(v) for k, v in d.items() if isinstance(v, int)} if isinstance(d, dict) else {}
