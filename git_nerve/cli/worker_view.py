"""What `git worker status` and `git worker show` print (the commands themselves are in :mod:`.worker`)."""

from __future__ import annotations

from ..text import clean_line
from .common import echo, echo_json, style
from .prep import prep_lines, prep_status_line
from .status_rows import merged_elsewhere_line, usage_cell, usage_line, usage_view, worktree_missing_line
from .tasks import print_shared_status, show_elsewhere


def print_status(repo, states: tuple[str, ...], stale_only: bool, as_json: bool) -> None:
    from .. import clock
    from .status_rows import status_rows

    rows, everyone, fresh, now = status_rows(repo, states, stale_only)
    if as_json:
        echo_json(rows)
        return
    if fresh is not None:
        from ..shared.status import refused_line

        return print_shared_status(rows, everyone, fresh, now, refused_line(repo.bus))
    if not rows:
        echo("no workers" + (" match" if states or stale_only else " yet; create one with `git worker spawn <task-id>`"))
        return
    by_id = everyone
    header = f"{'TASK':<24} {'STATE':<11} {'BRANCH':<28} {'HEARTBEAT':<16} {'AGE':<6} {'USAGE':<13} DESCRIPTION"
    echo(style(header, bold=True))
    from ..worker.attention import SAY, rank

    for r in sorted(rows, key=lambda r: rank(r["attention"])):  # what needs the person first (issue 38)
        w = by_id[r["task_id"]]
        state = r["state"]
        shown = style(f"{state:<11}", fg=_COLORS.get(state))  # the state, always; staleness is its own marker
        hb = clock.ago(w.last_heartbeat, now) + (" ago" if w.last_heartbeat else "")
        hb_cell = f"{hb} " + style("STALE", fg="red", bold=True) + " " * max(0, 10 - len(hb)) if r["stale"] else f"{hb:<16}"
        desc = clean_line((w.description.splitlines() or [""])[0])[:40]
        echo(f"{r['task_id']:<24} {shown} {r['branch']:<28} {hb_cell} {clock.ago(w.assigned_at, now):<6} "
             f"{usage_cell(r.get('usage')):<13} {desc}")
        if r["worktree_missing"]:
            echo(style(f"{'':<24} ! {worktree_missing_line(r['task_id'], r['worktree'])}", fg="red"))
        if r["attention"]:
            said = SAY[r["attention"]] + (f": {clean_line(r['status'].split(':', 1)[1].strip())}" if r["attention"] == "input" else "")
            echo(style(f"{'':<24} » {said}", fg="red" if r["attention"] in ("conflict", "failed") else "yellow",
                       bold=True))
        if prep_status_line(r):
            echo(prep_status_line(r))
        old_marks = " (stale: computed before its last commit; git worker conflicts --refresh)" if r["radar_stale"] else ""
        for mark in r["radar"]:
            echo(style(f"{'':<24} ! {mark}{old_marks}", fg="red" if mark.startswith("conflict") else "yellow"))


_COLORS = {"ASSIGNED": "blue", "WORKING": "cyan", "CONFLICTED": "red", "IN_REVIEW": "yellow",
           "APPROVED": "green", "COMPLETED": "bright_black", "FAILED": "magenta"}


def show_task(repo, task_id: str, as_json: bool) -> None:
    """A task's state, its whole message history and what was told about it."""
    from .. import clock
    from ..bus import messages
    from ..steer import tell as steer_tell
    from ..worker import lifecycle
    from ..worker.status import worktree_missing

    if as_json:
        from .verbs import show_json

        echo_json(show_json(repo, task_id))
        return
    if show_elsewhere(repo.bus, task_id, False):  # shared mode: a task another machine holds
        return
    from ..worktree_prep.secrets import redactor

    w, msgs = lifecycle.show(repo, task_id)
    told = steer_tell.about(repo.bus, task_id)
    masking = redactor(repo.bus.conn, task_id, w.worktree)  # what an agent wrote, masked (git_nerve/redact.py)
    for line in lifecycle.trust_flags(repo, w):  # first: a change that makes your machine run something
        echo(style(f"! {line}", fg="yellow", bold=True))
    echo(f"{style(w.task_id, bold=True)}  {w.state}  {w.branch}  {w.worktree}")
    if merged_elsewhere_line(repo, w):
        echo(f"  {merged_elsewhere_line(repo, w)}")
    if w.description:
        echo(f"  {w.description}")
    if worktree_missing(w):
        echo(style(f"  ! {worktree_missing_line(w.task_id, w.worktree)}", fg="red"))
    for line in prep_lines(repo, w):
        echo(line)
    for m in messages.fold_heartbeats(msgs):
        if isinstance(m, int):
            echo(f"{'':20}  ({m} heartbeat{'s' if m > 1 else ''})")
        else:
            echo(f"{clock.iso(m.ts)}  {m.kind:<16} {_summary(m.kind, masking.value(m.payload))}")
    spent = usage_view(repo.bus.conn, task_id)
    if spent["rounds"]:
        echo("Usage (as each agent reported it):")
        for u in spent["rounds"]:
            model = f" {u['model']}" if u["model"] else ""
            echo(clean_line(f"  #{u['round']} {u['role']} ({u['adapter']}{model}): {usage_line(u)}"))
        echo(f"  total: {usage_line(spent['total'])}")
    if told:
        echo("Told (git nerve tell):")
        for e in told:
            echo(f'{clock.iso(e.message.ts)}  #{e.message.id:<4} {e.message.kind:<5} "{masking.text(e.message.text)}"  '
                 f'({e.status})')


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
    if kind == "usage":
        return clean_line(f"#{p.get('round')} {p.get('role')} ({p.get('adapter')}"
                          + (f" {p.get('model')}" if p.get("model") else "") + f"): {usage_line(p)}")
    if kind == "agent_launch_failed":
        log = f"; log {p.get('log')}" if p.get("log") else ""
        return clean_line(f"{p.get('role')} ({p.get('adapter')}) could not be started: {p.get('message')}{log}")
    parts = [f"{k}={_short(v)}" for k, v in p.items() if v not in (None, "", [], {}) and k != "description"]
    text = clean_line(" ".join(parts))  # one line: a newline in a comment must not forge another entry
    return text if len(text) <= 120 else text[:117] + "..."
