"""What `git worker status` and `git worker show` print (the commands themselves are in :mod:`.worker`)."""

from __future__ import annotations

from ..text import clean_line
from .common import echo, echo_json, style, warn
from .prep import prep_fields, prep_lines, prep_status_line
from .tasks import _settings_or_none, print_shared_status, shared_rows, show_elsewhere


def print_status(repo, states: tuple[str, ...], stale_only: bool, as_json: bool) -> None:
    from .. import clock
    from ..bus import workers
    from ..worker.status import row

    settings = _settings_or_none(repo)
    if settings is not None:
        _record_remote_merges(repo)
    now = clock.now()
    from ..worker.status import radar_marks
    from .radar import marks_at

    radar, radar_at = marks_at(repo.paths.common_dir)
    everyone = {w.task_id: w for w in workers.all_workers(repo.bus.conn)}
    rows = [row(w, settings, now) for w in workers.all_workers(repo.bus.conn, states=states or None)]
    for r in rows:
        r["radar"], r["radar_stale"] = radar_marks(repo.bus.conn, everyone, r["task_id"], radar.get(r["task_id"], []),
                                                   radar_at)
    if stale_only:
        rows = [r for r in rows if r["stale"]]
    for r in rows:
        r.update(prep_fields(repo, everyone[r["task_id"]]))
    fresh = shared_rows(repo.bus, rows, states)  # shared mode: every machine's tasks, a MACHINE column
    if fresh is not None:
        _radar_elsewhere(repo, rows, radar)
        for r in rows:
            w = everyone.get(r["task_id"])
            if w is not None and merged_elsewhere_line(repo, w):
                r["merged_elsewhere"] = merged_elsewhere_line(repo, w)
    if as_json:
        echo_json(rows)
        return
    if fresh is not None:
        return print_shared_status(rows, everyone, fresh, now)
    if not rows:
        echo("no workers" + (" match" if states or stale_only else " yet; create one with `git worker spawn <task-id>`"))
        return
    by_id = everyone
    header = f"{'TASK':<24} {'STATE':<11} {'BRANCH':<28} {'HEARTBEAT':<16} {'AGE':<6} DESCRIPTION"
    echo(style(header, bold=True))
    for r in rows:
        w = by_id[r["task_id"]]
        state = r["state"]
        shown = style(f"{state:<11}", fg=_COLORS.get(state))  # the state, always; staleness is its own marker
        hb = clock.ago(w.last_heartbeat, now) + (" ago" if w.last_heartbeat else "")
        hb_cell = f"{hb} " + style("STALE", fg="red", bold=True) + " " * max(0, 10 - len(hb)) if r["stale"] else f"{hb:<16}"
        desc = clean_line((w.description.splitlines() or [""])[0])[:40]
        echo(f"{r['task_id']:<24} {shown} {r['branch']:<28} {hb_cell} {clock.ago(w.assigned_at, now):<6} {desc}")
        if prep_status_line(r):
            echo(prep_status_line(r))
        old_marks = " (stale: computed before its last commit; git worker conflicts --refresh)" if r["radar_stale"] else ""
        for mark in r["radar"]:
            echo(style(f"{'':<24} ! {mark}{old_marks}", fg="red" if mark.startswith("conflict") else "yellow"))


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


_COLORS = {"ASSIGNED": "blue", "WORKING": "cyan", "CONFLICTED": "red", "IN_REVIEW": "yellow",
           "APPROVED": "green", "COMPLETED": "bright_black", "FAILED": "magenta"}


def show_task(repo, task_id: str, as_json: bool) -> None:
    """A task's state, its whole message history and what was told about it."""
    from .. import clock
    from ..bus import messages
    from ..steer import tell as steer_tell
    from ..worker import lifecycle
    from ..worker.status import row

    if show_elsewhere(repo.bus, task_id, as_json):  # shared mode: a task another machine holds
        return
    w, msgs = lifecycle.show(repo, task_id)
    told = steer_tell.about(repo.bus, task_id)
    if as_json:
        echo_json({"worker": {**row(w, _settings_or_none(repo)), **prep_fields(repo, w)},
                   "messages": [{"id": m.id, "ts": clock.iso(m.ts), "kind": m.kind, "payload": m.payload} for m in msgs],
                   "inbox": [e.as_dict() for e in told]})
        return
    echo(f"{style(w.task_id, bold=True)}  {w.state}  {w.branch}  {w.worktree}")
    if merged_elsewhere_line(repo, w):
        echo(f"  {merged_elsewhere_line(repo, w)}")
    if w.description:
        echo(f"  {w.description}")
    for line in prep_lines(repo, w):
        echo(line)
    for m in messages.fold_heartbeats(msgs):
        if isinstance(m, int):
            echo(f"{'':20}  ({m} heartbeat{'s' if m > 1 else ''})")
        else:
            echo(f"{clock.iso(m.ts)}  {m.kind:<16} {_summary(m.kind, m.payload)}")
    if told:
        echo("Told (git nerve tell):")
        for e in told:
            echo(f'{clock.iso(e.message.ts)}  #{e.message.id:<4} {e.message.kind:<5} "{e.message.text}"  ({e.status})')


def merged_elsewhere_line(repo, w) -> str | None:
    """A task of this machine another machine merged (shared mode on PostgreSQL) whose worktree is still here:
    the one line saying so and what cleans it up; None otherwise."""
    from pathlib import Path

    from ..bus import messages

    if w.state != "COMPLETED" or not Path(w.worktree).exists():
        return None
    merged = messages.for_task(repo.bus.conn, w.task_id, kinds=("merged",))
    by = merged[-1].payload.get("machine") if merged else None
    if not by:
        return None
    return (f"merged by machine {by}; its worktree is kept here until `git worker merge {w.task_id}` cleans it up "
            "(archive first)")


def _short(value):
    """A 40-hex sha as its first 10 characters (as `git log --oneline` people read); anything else as it is."""
    if isinstance(value, str) and len(value) == 40 and all(c in "0123456789abcdef" for c in value):
        return value[:10]
    return value


def _summary(kind: str, p: dict) -> str:
    if kind == "state_change":
        return f"{p.get('from')} -> {p.get('to')} ({p.get('by')})"
    if kind == "commit":
        return clean_line(f"{str(p.get('sha', ''))[:10]} {p.get('subject', '')}")
    if kind == "rewrite":
        return f"{len(p.get('pairs', []))} commit(s) rewritten by {p.get('source')}"
    if kind == "task_assign":
        base = str(p.get("base") or "")
        for prefix in ("refs/heads/", "refs/remotes/"):
            base = base[len(prefix):] if base.startswith(prefix) else base
        at = f" at {_short(p.get('base_sha'))}" if p.get("base_sha") else ""
        return clean_line(f"branch {p.get('branch')} from {base}{at}, worktree {p.get('worktree')}")
    parts = [f"{k}={_short(v)}" for k, v in p.items() if v not in (None, "", [], {}) and k != "description"]
    text = clean_line(" ".join(parts))  # one line: a newline in a comment must not forge another entry
    return text if len(text) <= 120 else text[:117] + "..."
