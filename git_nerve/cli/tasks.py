"""What `git worker` commands share with the features' commands that extend them (`merge --all` in
cli/steer.py): opening the repository, a task's row, and how a merge is printed. A module of its own so
cli/worker.py (which registers those commands) and cli/steer.py do not import each other. Opening the repository
lives in :mod:`.opening` (click-free: spawn's fast path uses it), a task's row and the radar's recompute in
:mod:`.verbs` (click-free too), re-exported here."""

from __future__ import annotations

from .common import echo, echo_json, warn
from .opening import _install_missing_hooks, _repo, _repo_fenced, fence  # noqa: F401  (re-exported)
from .verbs import radar_after  # noqa: F401  (re-exported)
from .verbs import row as _row


def run_merge(task_id: str, *, delete_branch: bool, check: str | None, force: bool, as_json: bool) -> None:
    from ..worker import lifecycle

    lifecycle.parse_check(check)  # an empty --check is a usage error before anything opens
    with _repo(create=False) as repo:
        check = lifecycle.check_command(repo, check)  # a bare --check: [run] test_command, once trusted
        flags = _trust_flags(repo, task_id)
        for line in flags:
            warn(line)
        res = lifecycle.merge(repo, task_id, delete_branch=delete_branch, check=check, force=force)
        radar_after(repo, None)
        for w in res.warnings:
            warn(w)
        if as_json:
            echo_json({**merge_json(repo, task_id, res), "trust_flags": flags})
        else:
            print_merge(task_id, res)


def _trust_flags(repo, task_id: str) -> list[str]:
    """What `show` says first about a task whose change edits a setting that runs a command (issue 35)."""
    from ..errors import NerveError
    from ..worker import lifecycle
    from ..worker.transitions import get

    try:
        return lifecycle.trust_flags(repo, get(repo.bus, task_id))
    except NerveError:  # an unknown task, or one another machine holds: merge's own refusal (or path) says so
        return []


def approved_trust_flags(repo) -> dict[str, list[str]]:
    """`merge --all`: the flag lines (as `show` says them) of every APPROVED task whose change has any."""
    from ..bus import workers
    from ..worker import lifecycle

    found = {w.task_id: lifecycle.trust_flags(repo, w) for w in workers.all_workers(repo.bus.conn, states=("APPROVED",))}
    return {t: lines for t, lines in found.items() if lines}


def merge_json(repo, task_id: str, res) -> dict:
    """A merged task as `git worker merge --json` prints it (also used by `merge --all`)."""
    row = _row(repo, task_id) if res.holder is None else {"task_id": task_id, "state": "COMPLETED", "machine": res.holder}
    return {**row, "merge_commit": res.commit, "pushed": res.pushed,
            "archive_ref": res.archive_ref, "worktree_removed": res.removed_worktree,
            "branch_deleted": res.deleted_branch, "submodule_archives": res.submodule_archives,
            "ignored_removed": res.ignored_removed, "branch_kept": res.kept, "nothing_merged": res.nothing,
            "holder": res.holder}


def print_merge(task_id: str, res) -> None:
    """A merged task as `git worker merge` prints it (also used by `merge --all`)."""
    if res.already:
        echo(f"Merged: {task_id} (already COMPLETED)")
    elif res.nothing == "empty":
        echo(f"Nothing to merge: {task_id} has no commits of its own; {res.into} did not move (COMPLETED)")
    elif res.nothing:
        echo(f"Nothing to merge: the commits of {task_id} are already on {res.into}; no merge commit made (COMPLETED)")
    else:
        echo(f"Merged: {task_id} into {res.into} as {res.commit[:12] if res.commit else '?'}"
             + (" (pushed)" if res.pushed else ""))
    if res.holder:
        echo(f"  Held by machine {res.holder}: COMPLETED there at its next sync; its worktree stays until "
             f"`git worker merge {task_id}` there")
    print_cleanup(res)


def print_cleanup(res) -> None:
    """What a cleanup (after merge, `cancel --cleanup`) archived, removed, deleted and kept."""
    if res.archive_ref:
        echo(f"  Archived tip: {res.archive_ref}")
    _print_removal(res)
    if res.deleted_branch:
        echo("  Branch deleted")
    for line in res.kept:
        echo(f"  {line}")


def _print_removal(res) -> None:
    """What a cleanup kept in submodules, that it removed the worktree, and the ignored files that went with it."""
    for kept in res.submodule_archives:
        echo(f"  Archived submodule work: {kept}")
    if res.removed_worktree:
        echo("  Worktree removed")
    if res.ignored_removed:
        tops = sorted({p.split("/", 1)[0] + ("/" if "/" in p else "") for p in res.ignored_removed})
        echo(f"  Deleted {len(res.ignored_removed)} ignored path(s), not archived: {', '.join(tops[:10])}"
             + (f" (+{len(tops) - 10} more)" if len(tops) > 10 else ""))


def print_shared_status(rows: list[dict], by_id: dict, fresh: str, now: float, refused: str | None = None) -> None:
    """`git worker status` in shared mode: how fresh the view is (and a warning of records from other machines
    refused here), then a MACHINE column."""
    from .. import clock
    from ..text import clean_line
    from .common import style

    colors = {"ASSIGNED": "blue", "WORKING": "cyan", "CONFLICTED": "red", "IN_REVIEW": "yellow", "APPROVED": "green",
              "COMPLETED": "bright_black", "FAILED": "magenta"}  # as the one-machine table
    echo(f"view: {clean_line(fresh)}")
    if refused:
        warn(refused)
    from .status_rows import usage_cell

    echo(style(f"{'TASK':<24} {'STATE':<11} {'MACHINE':<16} {'BRANCH':<28} {'HEARTBEAT':<10} {'USAGE':<13} DESCRIPTION",
               bold=True))
    from ..worker.attention import SAY, rank

    for r in sorted(rows, key=lambda r: rank(r.get("attention"))):  # what needs the person first (issue 38)
        w = by_id.get(r["task_id"])
        beat = w.last_heartbeat if w is not None else r.get("heartbeat_at")  # another machine's: as it published
        hb = (clock.ago(beat, now) + " ago") if beat else "-"
        desc = clean_line(((w.description if w else r.get("description") or "").splitlines() or [""])[0])[:40]
        shown = style(f"{r['state']:<11}", fg=colors.get(r["state"]))
        task, machine, branch = (clean_line(r[k] or "") for k in ("task_id", "machine", "branch"))  # peers' words
        echo(f"{task:<24} {shown} {machine:<16} {(branch or '-'):<28} {hb:<10} {usage_cell(r.get('usage')):<13} {desc}"
             + (" STALE" if r["stale"] else "") + (f" (fenced off here: {r['fenced']})" if r.get("fenced") else ""))
        if r.get("attention"):
            echo(style(f"{'':<24} » {SAY[r['attention']]}", fg="red" if r["attention"] in ("conflict", "failed") else "yellow"))
        if r.get("merged_elsewhere"):
            echo(f"{'':<24} {r['merged_elsewhere']}")
        for mark in r.get("radar") or []:
            echo(style(f"{'':<24} ! {mark}", fg="red" if mark.startswith("conflict") else "yellow"))


def show_elsewhere(bus, task_id: str, as_json: bool) -> bool:
    """`git worker show` of a task another machine holds (shared mode): printed from the cache; False when the
    task is not one."""
    from ..shared.status import elsewhere

    view = elsewhere(bus, task_id)
    if view is None:
        return False
    if as_json:
        echo_json(view)
        return True
    last = view["last_transition"]
    echo(f"{view['task_id']}  {view['state']}  held by machine {view['machine']}  ({view['view']})")
    echo(f"  last transition: {last['verb']} by {last['by']} (#{last['seq']}, {last['at']})")
    for e in view["events"]:
        echo(f"{e['ts']}  {e['kind']:<16} on {e['machine']}")
    for t in view.get("told") or []:  # what this machine said to it: delivered where, or why not
        echo(f"{t['ts']}  told {t['kind']:<11} {t['text'][:60]!r}: {t['status']}")
    return True
