"""What the console shows, as JSON-ready dicts, read through the features' own functions.

:func:`summary` is what every server-sent event carries: every worker (the
row `git worker status --json` prints, plus its radar marks, its last commit
and a ``version`` that changes whenever something about the task changes),
the conflict radar, the merge queue and the outbox. In shared mode (issue 24) the rows are every machine's,
as `git worker status --json` gives them (:func:`..shared.status.shared_rows`): each names its ``machine``,
a task another machine holds offers no actions on the git remote, its review and merge on PostgreSQL (as the CLI
runs them from any machine; ``held_elsewhere`` says what runs where), and ``shared``
carries this machine's name and how fresh the view is. :func:`task_detail` is
one task's whole story (thread, message history, what was told about it);
the page fetches it again when the selected task's ``version`` moves.
"""

from __future__ import annotations

from typing import Any

from .. import clock
from ..bus import messages, watch, workers
from ..errors import NerveError
from ..radar import scan
from ..radar.cache import INTEGRATION
from ..shared.status import elsewhere, shared_rows
from ..steer import tell as steer_tell
from ..steer.outbox import as_dict as outbox_dict
from ..steer.queue import Queue
from ..thread import service as thread_service
from ..worker import lifecycle
from ..worker import attention
from ..worker.status import RADAR_LIVE, row
from ..worktree_prep import disk as prep_disk
from ..worktree_prep import report as prep_report
from . import conflict
from .actions import allowed_actions, held_elsewhere, reviews_here

#: outbox lines every event carries (the newest)
OUTBOX_LINES = 200
#: non-heartbeat messages a task's detail carries (the newest)
HISTORY = 400
#: characters of a task's thread the detail carries (`git nerve thread --budget`)
THREAD_BUDGET = 60_000


class Commits:
    """Each task's last commit, looked up again only when the task's newest message id moved."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, dict | None]] = {}

    def last(self, conn, task_id: str, newest: int) -> dict | None:
        known = self._seen.get(task_id)
        if known is not None and known[0] == newest:
            return known[1]
        found = watch.last_of_kind(conn, task_id, "commit")
        value = None
        if found is not None:
            _, ts, payload = found
            value = {"sha": str(payload.get("sha", "")), "subject": str(payload.get("subject", "")), "ts": clock.iso(ts)}
        self._seen[task_id] = (newest, value)
        return value


def _settings(repo):
    try:
        return repo.settings
    except Exception:  # noqa: BLE001 - the view works even when nerve.* settings cannot be resolved
        return None


def _marks(result: scan.Scan) -> dict[str, list[dict[str, str]]]:
    """Per task, the radar pairs it is in: ``{"kind": "conflict", "with": "t2"}`` (as `git worker status` marks them)."""
    out: dict[str, list[dict[str, str]]] = {}
    for p in result.pairs:
        for me, other in ((p.a, p.b), (p.b, p.a)):
            if me == INTEGRATION:
                continue
            name = (result.integration or "integration") if other == INTEGRATION else other
            out.setdefault(me, []).append({"kind": p.kind, "with": name})
    return out


def summary(repo, commits: Commits | None = None, *, steering: tuple | None = None) -> dict[str, Any]:
    """The whole dashboard (everything but the tasks' threads and histories)."""
    conn = repo.bus.conn
    commits = commits or Commits()
    settings = _settings(repo)
    now = clock.now()
    steering = steering if steering is not None else watch.steering_mark(conn)
    radar = scan.cached(repo.paths.common_dir)
    marks = _marks(radar)
    all_workers = workers.all_workers(conn)
    rows = []
    budget = prep_disk.Budget()  # a few worktrees walked per summary after many spawns, not all at once
    for w in all_workers:
        r = row(w, settings, now)
        newest = watch.last_message_id(conn, w.task_id)
        r["radar"] = marks.get(w.task_id, [])
        r["last_commit"] = commits.last(conn, w.task_id, newest)
        r["heartbeat_ts"] = w.last_heartbeat
        r["allowed_actions"] = allowed_actions(w.state)
        r["version"] = f"{newest}.{steering[0]}.{steering[1]}.{steering[2]}.{steering[3]}"
        r.update(prep_report.fields(repo.bus, w, budget=budget))  # port, setup, copied, disk_bytes (cached)
        r["disk"] = prep_disk.human(r["disk_bytes"])  # as `git worker status` prints it
        rows.append(r)
    # what needs the person (issue 38): the function `git worker status --json` uses, on the same radar conflicts
    conflicts = {r["task_id"] for r in rows if r["state"] in RADAR_LIVE and any(m["kind"] == "conflict" for m in r["radar"])}
    needs = attention.of_all(conn, {w.task_id: w for w in all_workers}, conflicts, now=now,
                             stuck=attention.stuck_after(repo.paths.toplevel))
    for r in rows:
        r["attention"] = needs[r["task_id"]]
    shared = _every_machine(repo, rows, marks, steering)
    spent = _usage(conn, rows)
    risky = {t for p in radar.pairs if p.kind == "conflict" for t in (p.a, p.b)}
    approved = [w for w in all_workers if w.state == "APPROVED"]
    return {
        "at": now,
        "workers": rows,
        **({"shared": shared} if shared is not None else {}),
        "check_command": _check_configured(repo),
        "radar": radar.as_dict(),
        "queue": [{"task_id": t, "radar_conflict": t in risky} for t in Queue(approved, risky).tasks],
        "outbox": [outbox_dict(line) for line in watch.outbox_tail(conn, OUTBOX_LINES)],
        "usage": spent,
    }


USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "cost_usd")


def _usage(conn, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each row's ``usage`` (as `git worker status --json` has it) and the clone's totals, per day (issue 39)."""
    import time

    from ..bus import usage

    records = usage.events(conn)
    per_task = usage.totals_by(records, lambda r: r.get("task"))
    for r in rows:
        total = per_task.get(r["task_id"]) or usage.empty()
        r["usage"] = {k: total[k] for k in USAGE_KEYS}
    days = usage.totals_by(records, lambda r: time.strftime("%Y-%m-%d", time.gmtime(r["ts"])))
    whole = usage.totals_by(records, lambda r: 0).get(0) or usage.empty()
    return {"total": {k: whole[k] for k in USAGE_KEYS},
            "by_day": [{"day": d, **{k: v[k] for k in USAGE_KEYS}} for d, v in sorted(days.items(), reverse=True)]}


def _check_configured(repo) -> bool:
    """Whether the merge dialogs tick "run the check": ``[run] test_command`` present and trusted (issue 38)."""
    from .. import trust

    top = repo.paths.toplevel
    return top is not None and trust.check_configured(repo.paths.common_dir, top)


def _every_machine(repo, rows: list[dict[str, Any]], marks: dict, steering: tuple) -> dict[str, str] | None:
    """Shared mode: the rows of the tasks other machines hold added (as `git worker status --json` adds them),
    every row naming its machine, those held elsewhere read-only but for their review and merge on PostgreSQL;
    ``{"machine", "view"}``. None (rows as they
    were) without shared mode."""
    from ..shared import for_bus

    try:
        fresh = shared_rows(repo.bus, rows)
        machine = for_bus(repo.bus).config.machine if fresh is not None else None
    except NerveError as exc:  # a [shared] table nerve.toml gets wrong: said in the page, which keeps working
        return {"machine": None, "view": exc.message}
    if fresh is None:
        return None
    from_here = reviews_here(repo)  # shared mode: review and merge of another machine's task run from here
    for r in rows:
        if not r.get("elsewhere"):
            continue
        if not r.get("fenced"):
            r["radar"] = marks.get(r["task_id"], [])  # as `git worker status` marks them against this machine's
        # a task taken over from this machine (fenced: its row here) stays read-only, as the CLI refuses it
        here = from_here and not r.get("fenced")
        r["allowed_actions"] = allowed_actions(r["state"], elsewhere=True, from_here=here)
        r["held_elsewhere"] = held_elsewhere(r["task_id"], r["state"], r["machine"], from_here=here)
        r.setdefault("last_commit", None)
        r.setdefault("heartbeat_ts", r.get("heartbeat_at"))  # its holder's last heartbeat, as it published it
        r.setdefault("attention", attention.of_state(r["state"]))
        seq = (r.get("last_transition") or {}).get("seq", "")
        r["version"] = r.get("version", f"{seq}.{steering[0]}.{steering[1]}.{steering[2]}.{steering[3]}")
    return {"machine": machine, "view": fresh}


def _history(msgs) -> list[dict[str, Any]]:
    """The message log with heartbeats folded into counts (as `git worker show` prints it), the newest."""
    out = [{"kind": "heartbeats", "count": m} if isinstance(m, int) else
           {"id": m.id, "ts": clock.iso(m.ts), "kind": m.kind, "payload": m.payload}
           for m in messages.fold_heartbeats(msgs)]
    return out[-HISTORY:]


def _thread(repo, task_id: str) -> dict[str, Any]:
    try:
        return thread_service.view(repo.bus, task_id, budget=THREAD_BUDGET).as_dict()
    except NerveError:
        return {"thread": task_id, "rounds": [], "omitted": []}


def _detail_elsewhere(repo, held: dict[str, Any]) -> dict[str, Any]:
    """A task another machine holds (shared mode), as `git worker show --json` gives it from the cache of the
    last sync: its state and machine, its thread, the events its machines published (read-only here)."""
    task_id = held["task_id"]
    worker = {"task_id": task_id, "state": held["state"], "machine": held["machine"], "branch": None,
              "worktree": None, "description": "", "view": held["view"], "last_transition": held["last_transition"],
              "elsewhere": True}
    from_here = reviews_here(repo)
    worker["allowed_actions"] = allowed_actions(held["state"], elsewhere=True, from_here=from_here)
    worker["held_elsewhere"] = held_elsewhere(task_id, held["state"], held["machine"], from_here=from_here)
    return {"worker": worker, "thread": _thread(repo, task_id), "told": [],
            "messages": [{"id": e["id"], "ts": e["ts"], "kind": e["kind"], "payload": e["payload"],
                          "machine": e["machine"]} for e in held["events"]][-HISTORY:]}


def task_detail(repo, task_id: str) -> dict[str, Any]:
    """One task: its row, its thread (as `git nerve thread --json`), its history, what was told about it (a task
    another machine holds: what this machine knows of it, :func:`_detail_elsewhere`)."""
    held = elsewhere(repo.bus, task_id)
    if held is not None:
        return _detail_elsewhere(repo, held)
    w, msgs = lifecycle.show(repo, task_id)
    prep = prep_report.fields(repo.bus, w)
    return {
        "worker": {**row(w, _settings(repo)), **prep, "disk": prep_disk.human(prep["disk_bytes"])},
        "thread": _thread(repo, task_id),
        "messages": _history(msgs),
        "told": [e.as_dict() for e in steer_tell.about(repo.bus, task_id)],
        # issue 35: a change to a setting that runs a command on the person's machine, said first, in words
        "trust_flags": lifecycle.trust_flags(repo, w),
        # issue 38: a task in conflict says with what, where, and how to resolve it
        "conflict": conflict.banner(repo, w),
    }


__all__ = ["Commits", "summary", "task_detail"]
