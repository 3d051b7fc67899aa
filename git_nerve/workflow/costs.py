"""What a run's rounds cost and the budgets that stop it (issue 39).

Each round's usage is what its agent CLI reported (:mod:`.adapters.usage`), priced from nerve.toml's
``[prices."<model>"]`` only where the CLI gave no cost, and recorded as ``usage`` messages (:mod:`..bus.usage`).
After each round the runner asks :func:`over_budget`; a budget crossed stops the run at that safe point (between
two agent runs: nothing half-written), with a thread round naming the budget and the totals.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ..bus import usage as bus_usage
from .adapters.usage import Usage, add, priced


def entries(usages: Iterable[Usage], prices: dict[str, Any]) -> list[dict[str, Any]]:
    """The usage messages' payloads of one round: per model, priced from the table where the CLI gave no cost."""
    table = {m: p.model_dump() if hasattr(p, "model_dump") else dict(p) for m, p in prices.items()}
    table = {m: {k: v for k, v in p.items() if v is not None} for m, p in table.items()}
    merged = add(usages)
    out = []
    for before, after in zip(merged, priced(merged, table)):
        entry = after.as_dict()
        entry["cost_from"] = "agent" if before.cost_usd is not None else "prices" if after.cost_usd is not None else None
        out.append(entry)
    return out


def summary(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A round's usage for its thread metadata (None: its agent reported none)."""
    if not entries:
        return None
    total = bus_usage.empty()
    for e in entries:
        bus_usage.add(total, e)
    out = {k: total[k] for k in ("input_tokens", "cached_input_tokens", "output_tokens", "cost_usd")}
    models = sorted({str(e["model"]) for e in entries if e.get("model")})
    if models:
        out["models"] = models
    return out


def tokens(total: dict[str, Any]) -> int:
    return (total.get("input_tokens") or 0) + (total.get("output_tokens") or 0)


def day_start(now: float | None = None) -> float:
    """00:00 UTC of the day ``now`` falls in (a day's budget counts from there)."""
    now = time.time() if now is None else now
    return now - now % 86400


#: how every budget's stop reason begins
OVER = "over budget "


def _plus(total: dict[str, Any], pending: list[dict[str, Any]]) -> dict[str, Any]:
    total = {**total, "_unknown": total["cost_usd"] is None and total["rounds"] > 0}
    for entry in pending:
        bus_usage.add(total, entry)
    return total


def over_budget(conn, budget: Any, task_id: str, run: str, now: float | None = None,
                pending: list[dict[str, Any]] | None = None) -> str | None:
    """The budget the task's spending crossed, named with the totals (None: within every budget); ``pending``:
    what the agent running now has reported so far (not recorded yet)."""
    if budget is None:
        return None
    pending = pending or []
    task = _plus(bus_usage.per_task(conn, [task_id])[task_id], pending)
    if budget.task_tokens is not None and tokens(task) > budget.task_tokens:
        return (f"over budget task_tokens = {budget.task_tokens}: task {task_id} used {tokens(task)} tokens "
                f"({task['input_tokens'] or 0} input, {task['output_tokens'] or 0} output)")
    if budget.task_usd is not None and task["known_cost_usd"] > budget.task_usd:
        return f"over budget task_usd = {budget.task_usd:g}: task {task_id} cost ${task['known_cost_usd']:.4f}"
    if budget.run_usd is not None:
        spent = _plus(bus_usage.of_run(conn, task_id, run), pending)["known_cost_usd"]
        if spent > budget.run_usd:
            return f"over budget run_usd = {budget.run_usd:g}: this run of {task_id} cost ${spent:.4f}"
    if budget.day_usd is not None:
        spent = _plus(bus_usage.since(conn, day_start(now)), pending)["known_cost_usd"]
        if spent > budget.day_usd:
            return f"over budget day_usd = {budget.day_usd:g}: this clone's agents cost ${spent:.4f} today (UTC)"
    return None


def ticking(on_tick, ctx, bus, config, run: str):
    """The supervisor's tick for one agent run: the steering hook's stop, else a budget crossed by what a
    streaming CLI has reported so far in this turn (``ctx.live_usage``): the run is stopped through that same
    stop (a CLI that can end itself does so at its next safe point)."""
    budget = config.budget
    if not any(v is not None for v in budget.model_dump().values()):
        return on_tick

    def tick(task_id: str) -> str | None:
        reason = on_tick(task_id) if on_tick is not None else None
        if reason or not ctx.live_usage:
            return reason
        pending = entries(list(ctx.live_usage), config.prices)
        return over_budget(bus.conn, budget, task_id, run, pending=pending)

    return tick


# -- `git nerve usage` ---------------------------------------------------------------------------------------

#: what `git nerve usage` groups the totals by, each a record's key
GROUPS = {
    "task": lambda r: r.get("task"),
    "role": lambda r: r.get("role"),
    "model": lambda r: r.get("model"),
    "machine": lambda r: r.get("machine"),
    "day": lambda r: time.strftime("%Y-%m-%d", time.gmtime(r["ts"])),
}
SHOWN = ("input_tokens", "cached_input_tokens", "output_tokens", "cost_usd", "rounds")


def since_time(text: str | None, now: float | None = None) -> float | None:
    """``--since``: a date or time (ISO 8601; UTC unless it says otherwise) or an age (``30m``, ``12h``, ``7d``,
    ``2w``); None: from the beginning."""
    import re
    from datetime import datetime, timezone

    from ..errors import UsageError

    if text is None:
        return None
    now = time.time() if now is None else now
    m = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", text)
    if m:
        return now - int(m.group(1)) * {"m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since {text!r}: give a date (2026-11-29), a time (2026-11-29T08:00) or an age "
                         "(30m, 12h, 7d, 2w)") from None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def report(bus, since: float | None, machine: str | None = None) -> dict[str, Any]:
    """Totals per task, role, model, machine and day of every usage record this clone knows since ``since``
    (this clone's own records under ``machine``)."""
    records = bus_usage.events(bus.conn, since=since)
    for r in records:
        if r["machine"] is None:
            r["machine"] = machine or "here"
    out: dict[str, Any] = {"since": since, "total": _shown(bus_usage.totals_by(records, lambda r: 0).get(0))}
    for name, key in GROUPS.items():
        got = bus_usage.totals_by(records, key)
        out[f"by_{name}"] = [{name: k, **_shown(v)} for k, v in sorted(got.items(), key=lambda kv: str(kv[0]))]
    return out


def _shown(total: dict | None) -> dict[str, Any]:
    total = total or bus_usage.empty()
    return {k: total[k] for k in SHOWN}


def report_here(since_text: str | None) -> dict[str, Any]:
    """`git nerve usage`: the report of the repository here (nothing recorded yet when it has no bus)."""
    from ..bus.connection import Bus
    from ..paths import discover

    since = since_time(since_text)
    where = discover(None)
    if not where.bus_path.exists():
        return {"since": since, "total": _shown(None), **{f"by_{n}": [] for n in GROUPS}}
    bus = Bus(where.bus_path)
    try:
        machine = None
        if bus.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'shared_events'").fetchone():
            from ..shared.config import machine as machine_name

            machine = machine_name(where.toplevel)
        return report(bus, since, machine)
    finally:
        bus.close()


__all__ = ["GROUPS", "OVER", "day_start", "entries", "over_budget", "report", "report_here", "since_time", "summary", "ticking",
           "tokens"]
