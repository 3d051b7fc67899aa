"""The rows `git worker status` shows, without click: its click command (cli/worker_view.py prints them as the
table or JSON) and entry.py's fast path for `status --json` (cli/verbs.py) both take them from here."""

from __future__ import annotations

from .plain import warning as warn


def status_rows(repo, states: tuple[str, ...], stale_only: bool) -> tuple[list[dict], dict, str | None, float]:
    """(the rows, every worker by task id, shared mode's freshness line or None, now)."""
    from .. import clock
    from ..bus import workers
    from ..shared.status import shared_rows
    from ..worker.status import radar_marks, row
    from .prep import prep_fields

    settings = settings_or_none(repo)
    if settings is not None:
        _record_remote_merges(repo)
    now = clock.now()
    radar, radar_at = marks_at(repo.paths.common_dir)
    everyone = {w.task_id: w for w in workers.all_workers(repo.bus.conn)}
    rows = [row(w, settings, now) for w in workers.all_workers(repo.bus.conn, states=states or None)]
    for r in rows:
        r["radar"], r["radar_stale"] = radar_marks(repo.bus.conn, everyone, r["task_id"], radar.get(r["task_id"], []),
                                                   radar_at)
    _attention(repo, rows, everyone, now)  # what needs the person (issue 38): one function for status, console, MCP
    if stale_only:
        rows = [r for r in rows if r["stale"]]
    from ..worktree_prep.disk import Budget

    budget = Budget()  # a few worktrees walked per status: after many spawns, not all at once
    for r in rows:
        r.update(prep_fields(repo, everyone[r["task_id"]], budget=budget))
    fresh = shared_rows(repo.bus, rows, states)  # shared mode: every machine's tasks, a MACHINE column
    if fresh is not None:
        _radar_elsewhere(repo, rows, radar)
        from ..worker.attention import of_state

        for r in rows:
            r.setdefault("attention", of_state(r["state"]))  # another machine's task: what its state says
        for r in rows:
            w = everyone.get(r["task_id"])
            line = merged_elsewhere_line(repo, w) if w is not None else None
            if line:
                r["merged_elsewhere"] = line
    _usage(repo, rows)
    return rows, everyone, fresh, now


#: what each row's ``usage`` holds: totals over the task's rounds (issue 39; None: no round reported it)
USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "cost_usd")


def _usage(repo, rows: list[dict]) -> None:
    """Each row's ``usage``: what its agents used, from every machine's usage records (bus/usage.py)."""
    from ..bus import usage

    spent = usage.per_task(repo.bus.conn, [r["task_id"] for r in rows])
    for r in rows:
        r["usage"] = {k: spent[r["task_id"]][k] for k in USAGE_KEYS}


def usage_view(conn, task_id: str) -> dict:
    """`git worker show`'s usage of a task: its totals and each round's, per role and model (issue 39)."""
    from ..bus import usage

    records = usage.events(conn, task_ids=[task_id])
    total = usage.per_task(conn, [task_id])[task_id]
    per_round = usage.totals_by(records, lambda r: (r.get("machine"), r.get("round"), r.get("role"), r.get("adapter"),
                                                    r.get("model")))
    rounds = [{"round": k[1], "role": k[2], "adapter": k[3], "model": k[4], "machine": k[0],
               **{f: v[f] for f in USAGE_KEYS}, "reported": not v["unreported"]} for k, v in per_round.items()]
    return {"total": {k: total[k] for k in USAGE_KEYS}, "rounds": rounds}


def usage_line(u: dict) -> str:
    """One round's (or a total's) usage in words: ``1.2k in (300 cached), 56 out, $0.01``."""
    if u.get("reported") is False:
        return "not reported by the agent"
    cost = u.get("cost_usd")
    cached = f" ({tokens_text(u.get('cached_input_tokens'))} cached)" if u.get("cached_input_tokens") else ""
    return (f"{tokens_text(u.get('input_tokens'))} in{cached}, {tokens_text(u.get('output_tokens'))} out, "
            + (f"${cost:.4f}" if isinstance(cost, (int, float)) else "cost unknown"))


def tokens_text(count: int | None) -> str:
    """A token count as people read it: 950, 12.3k, 4.1M (None: ``?``)."""
    if count is None:
        return "?"
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


def usage_cell(u: dict | None) -> str:
    """The status table's USAGE cell: tokens (input + output) and the cost (``$?``: not known), ``-`` before any."""
    if not u or (u.get("input_tokens") is None and u.get("output_tokens") is None and u.get("cost_usd") is None):
        return "-"
    tokens = (u.get("input_tokens") or 0) + (u.get("output_tokens") or 0)
    cost = u.get("cost_usd")
    return f"{tokens_text(tokens)} " + (f"${cost:.2f}" if isinstance(cost, (int, float)) else "$?")


def worktree_missing_line(task_id: str, worktree: str) -> str:
    return (f"worktree missing ({worktree}): `git worker spawn {task_id}` recreates it, "
            f"`git worker cancel {task_id} --cleanup` ends the task")


def _attention(repo, rows: list[dict], everyone: dict, now: float) -> None:
    """Each row's ``attention`` (:mod:`..worker.attention`), its radar conflicts as `status` shows them."""
    from ..worker import attention

    conflicts = {r["task_id"] for r in rows if any(m.startswith("conflict") for m in r["radar"])}
    found = attention.of_all(repo.bus.conn, everyone, conflicts, now=now, tasks=[r["task_id"] for r in rows],
                             stuck=attention.stuck_after(repo.paths.toplevel))
    for r in rows:
        r["attention"] = found[r["task_id"]]
    if any(found.values()):  # `stuck` is noticed when someone looks: a notification, never waited for
        from ..worker.notify import poke

        poke(repo.paths.common_dir, found)


def merged_elsewhere_line(repo, w) -> str | None:
    """A task of this machine another machine merged (shared mode) whose worktree is still here:
    the one line saying so and what cleans it up; None otherwise."""
    from pathlib import Path

    from ..bus import messages

    if w.state != "COMPLETED" or not Path(w.worktree).exists():
        return None
    merged = messages.for_task(repo.bus.conn, w.task_id, kinds=("merged",))
    by = merged[-1].payload.get("machine") if merged else None
    if not by:
        return None
    return (f"merged by machine {by}; its worktree is kept here until `git nerve sync` or `git worker merge {w.task_id}` "
            "cleans it up (archive first)")


def settings_or_none(repo):
    try:
        return repo.settings
    except Exception:  # status must work even when settings cannot be resolved
        return None


def marks_at(common_dir) -> tuple[dict[str, list[str]], float | None]:
    """Per task, what `git worker status` says of it (``conflict: t2``, ``overlap: t3``), and when the radar
    computed them (None: never)."""
    from ..radar import scan
    from ..radar.cache import INTEGRATION

    result = scan.cached(common_dir)
    out: dict[str, list[str]] = {}
    for p in result.pairs:
        for me, other in ((p.a, p.b), (p.b, p.a)):
            if me == INTEGRATION:
                continue
            name = result.integration or "integration" if other == INTEGRATION else other
            if p.machine is not None:  # another machine's task (b), or ours as seen from it (a: "this machine")
                name += f" (machine {p.machine})" if other == p.b else " (this machine)"
            out.setdefault(me, []).append(f"{p.kind}: {name}")
    return out, result.at


def _radar_elsewhere(repo, rows: list[dict], radar: dict[str, list[str]]) -> None:
    """Shared mode: other machines' tasks carry the radar's marks against this machine's, and a sync that
    brought new footprints asks for a recompute in the background (the marks shown are the last ones)."""
    from ..radar import background, remote

    for r in rows:
        if r.get("elsewhere") and not r.get("fenced"):
            r["radar"] = radar.get(r["task_id"], [])
    try:
        if remote.stale(repo.paths.common_dir, repo.bus.conn):
            background.request(repo.paths.common_dir, repo.cwd, None)
    except OSError:
        pass


def _record_remote_merges(repo) -> None:
    """APPROVED tasks whose merge reached the remote unrecorded show (and are recorded) as COMPLETED."""
    from ..errors import NerveError
    from ..worker import merged

    try:
        for task_id in merged.reconcile_all(repo):
            warn(f"{task_id}: its merge had reached the remote without being recorded; recorded it as COMPLETED")
    except NerveError as exc:  # status must work even when git cannot tell
        warn(f"could not check the remote for unrecorded merges: {exc.message}")
