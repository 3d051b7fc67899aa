"""`git nerve sync`: several machines' shared state (shared mode, `git nerve init --shared`)."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, echo, echo_json, warn


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--rebuild", is_flag=True, help="Forget the cached view and read every machine's refs again.")
@click.option("--watch", is_flag=True,
              help="Keep the view fresh and this machine's leases held until interrupted (exit 130): on the git "
                   "remote, look again every poll_min..poll_max seconds (shorter after a change, longer while "
                   "nothing changes or the host refuses); on PostgreSQL, within a moment of any other machine's "
                   "change (LISTEN/NOTIFY). --json: one JSON object a line per sync.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def sync(rebuild: bool, watch: bool, as_json: bool) -> None:
    """Publish this machine's events and fetch every machine's tasks and events (shared mode).

    Events this machine wrote go to refs/nerve/log/<machine> on the remote (on PostgreSQL: its events
    table); every claim and every other machine's events are read into the bus as a cache (each event once).
    Offline: exit 4 (PostgreSQL: 5), the events wait. On the git remote, finished tasks' claims (COMPLETED,
    FAILED) are archived under refs/nerve/finished/<machine> and their claim refs deleted on the remote; when
    nothing changed a sync is one ls-remote.
    """
    from ..shared.status import run_sync, run_watch

    if watch:
        if rebuild:
            raise click.UsageError("--watch and --rebuild go separately")
        run_watch(lambda report: _print_line(report) if as_json else _print(report, False))
        return
    report = run_sync(rebuild=rebuild, tell=True)
    if report["backend"] != "local":  # tasks of this machine another one took over are fenced off on opening
        from ..worker.lifecycle.cleanup import after_merge_elsewhere
        from ..worker.takeover import auto_takeover
        from .tasks import _repo_fenced

        repo, fenced = _repo_fenced()
        with repo:
            report["fenced"] = [f.task_id for f in fenced]
            report["taken_over"] = auto_takeover(repo, say=warn)  # [shared] takeover = "idle" / "auto"
            report["cleaned"] = after_merge_elsewhere(repo)  # merged by another machine: its worktree goes here
    _print(report, as_json)


def _print_line(report: dict) -> None:
    """One JSON object a line (a stream of syncs), flushed at once."""
    import json

    from ..text import json_safe

    click.echo(json_safe(json.dumps(report, ensure_ascii=False, default=str)))


def _print(report: dict, as_json: bool) -> None:
    if as_json:
        echo_json(report)
        return
    again = f" in {report['next_look']:g} s" if "next_look" in report else ""
    if "error" in report:
        echo(f"sync: {report['error']} (trying again{again})")
        return
    if report["backend"] == "local":
        echo("not in shared mode (nothing to sync): `git nerve init --shared` turns it on")
        return
    for t in report.get("taken_over", []):
        echo(f"took over {t['task']} from machine {t['from']} (its lease ran out; it was {t['state']}; now ASSIGNED here)")
    for t in report.get("followed", []):
        echo(_followed_line(t))
    for line in report.get("cleaned", []):
        echo(line)
    _warn_foreign(report)
    if report.get("archive_refused"):
        warn(f"{report['remote']} refused to archive finished claims ({report['archive_refused']}): they stay live "
             "claim refs; tried again after a lease")
    archived = f", {report['archived']} finished claims archived" if report.get("archived") else ""
    echo(f"synced with {report['remote']} as {report['machine']}: {report['exported']} events published, "
         f"{report['ingested']} ingested, {report['claims']} claims updated{archived} ({report['seconds']} s)"
         + (f"; next look{again}" if again else ""))


def _warn_foreign(report: dict) -> None:
    """What this sync refused of other machines' words (each once; :mod:`git_nerve.shared.vet`)."""
    from ..text import clean_line

    for r in report.get("rejected", []):
        if r["key"].startswith("log:"):  # this machine's name, another clone's log
            warn(clean_line(r["reason"]))
            continue
        warn(clean_line(f"refused {r['machine'] or 'a machine'}'s record of {r['task'] or '-'} ({r['key'][:40]}): "
                        f"{r['reason']}; it changed nothing here"))


def _followed_line(t: dict) -> str:
    """A task of this machine another machine reviewed or merged, as this sync brought it here."""
    if t["state"] == "COMPLETED":
        return f"{t['task']} was merged by machine {t['machine']}: COMPLETED here"
    return f"{t['task']} is {t['state']} here: moved by machine {t['machine']}"


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def takeover(task_id: str, as_json: bool) -> None:
    """Take over a task of a machine that stopped (shared mode): once its log has not moved for the lease
    ([shared] lease in nerve.toml, default 600 s, on this machine's clock; on PostgreSQL: once the machine was
    not seen for the lease by the database's clock), the task is claimed here and spawned here (on its branch
    when the remote has it). The old machine is refused from then on. Exit 8 while the lease holds."""
    from ..worker.takeover import takeover as do_takeover
    from .tasks import _repo, _row

    with _repo() as repo:
        before, res = do_takeover(repo, task_id)
        if as_json:
            echo_json({**_row(repo, task_id), "taken_from_state": before})
            return
        echo(f"Took over: {task_id} (was {before} elsewhere; now ASSIGNED here)")
        echo(f"  Worktree: {res.worker.worktree}")


COMMANDS = [sync]
WORKER_COMMANDS = [takeover]
