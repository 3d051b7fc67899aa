"""Heartbeats: the liveness signal of a task. Standard library only.

``git worker heartbeat`` runs every few seconds from agents and wrappers, and
the git hooks record one per commit, rewrite and push, so this path must not
import click, pygit2 or filelock (see :mod:`git_nerve.cli.entry`).
"""

from __future__ import annotations

import json
import sys

from .. import clock
from ..bus import messages, workers
from ..bus.connection import Bus
from ..errors import NerveError, UsageError


def record(
    bus: Bus,
    task_id: str,
    *,
    status: str | None = None,
    progress: float | None = None,
    source: str = "cli",
    extra: dict | None = None,
) -> float:
    """Record a heartbeat for ``task_id``; returns its timestamp. Unknown task -> UsageError."""
    ts = clock.now()
    payload: dict = {"source": source}
    if status is not None:
        from ..worktree_prep.secrets import redactor  # only with a status: the agent's words, stored masked

        status = redactor(bus.conn, task_id).text(status)
        payload["status"] = status
    if progress is not None:
        payload["progress"] = progress
    if extra:
        payload.update(extra)
    if getattr(bus, "boxed", False):  # inside an agent's box: through its spool (issue 41)
        from ..bus import spool

        spool.append_box("heartbeat", {"status": status, "progress": progress, "ts": ts})
        return ts
    with bus.write() as conn:
        if not workers.heartbeat(conn, task_id, ts, status, progress):
            raise UsageError(f"unknown task {task_id!r}")
        messages.publish(conn, task_id, "heartbeat", payload, ts)
    renew_lease(bus)
    return ts


def renew_lease(bus: Bus) -> None:
    """Shared mode: a heartbeat is a sign of life of this machine: once its records have not reached the shared
    store for a tenth of the lease, a background sync publishes them, so its leases hold while it works (issue
    36). One read of the cache otherwise; never fails the heartbeat."""
    from ..bus import shared as cache

    try:
        if not cache.renewal_due(bus.conn):
            return
        from ..shared.background import renew  # only then: it loads the shared package

        renew(bus.conn, bus.path.parent.parent)
    except (NerveError, OSError) as exc:
        sys.stderr.write(f"git-nerve: this machine's lease was not renewed: {getattr(exc, 'message', exc)}\n")


def _refuse_taken_over(bus: Bus, task_id: str) -> None:
    """Shared mode: a task another machine took over (as this machine's cache last saw it, one query) is fenced
    off here, its run asked to stop (worker/fencing.py), and the heartbeat refused with exit 8 naming the holder:
    the agent beating for it learns at once."""
    from ..bus import shared as cache

    if cache.held_elsewhere(bus.conn, task_id=task_id):
        from .fencing import refuse_fenced  # only then: the fence needs git (the archive)

        refuse_fenced(bus, task_id)


USAGE = "usage: git worker heartbeat [--task TASK] [--status TEXT] [--progress 0..1] [--json]"


def _parse(argv: list[str]) -> dict:
    """The options of `git worker heartbeat` as the one table of options names them (git_nerve/options.py, which its
    click command is built from), each error one line and the usage (exit 2)."""
    from ..options import COMMANDS, FLAG

    by_flag = {f: o for o in COMMANDS["worker heartbeat"] for f in o.flags}
    opts: dict = {o.name: o.default for o in COMMANDS["worker heartbeat"]}
    it = iter(argv)
    for arg in it:
        key, sep, inline = arg.partition("=")
        opt = by_flag.get(key)
        if opt is not None and opt.kind != FLAG:
            value = inline if sep else next(it, None)
            if value is None:
                raise UsageError(f"{key} needs a value\n{USAGE}")
            opts[opt.name] = value
        elif opt is not None and not sep:
            opts[opt.name] = True
        else:
            raise UsageError(f"unexpected argument {arg!r}\n{USAGE}")
    if opts["progress"] is not None:
        try:
            opts["progress"] = float(opts["progress"])
        except ValueError:
            raise UsageError(f"--progress must be a number between 0 and 1, not {opts['progress']!r}") from None
        if not 0.0 <= opts["progress"] <= 1.0:
            raise UsageError("--progress must be between 0 and 1")
    return opts


def main(argv: list[str]) -> int:
    """`git worker heartbeat` without click: one bus write, one git rev-parse."""
    from ..context import resolve_task
    from ..paths import discover, find_by_files

    try:
        opts = _parse(argv)
        paths = find_by_files() or discover()  # reading .git files, without starting git, when nothing is unusual
        task_id = resolve_task(paths.git_dir, opts["task"])
        bus = Bus(paths.bus_path, create=False)
        try:
            _refuse_taken_over(bus, task_id)
            ts = record(bus, task_id, status=opts["status_text"], progress=opts["progress"])
        finally:
            bus.close()
        if (opts["status_text"] or "").strip().lower().startswith("input:"):  # its agent waits for a person (issue 38)
            from .notify import poke

            poke(paths.common_dir)
    except NerveError as exc:  # the bus's driver errors too (BusError: "bus error: ...", exit 5)
        sys.stderr.write(f"error: {exc.message}\n")
        return int(exc.exit_code)
    if opts["as_json"]:
        sys.stdout.write(json.dumps({"task_id": task_id, "last_heartbeat": clock.iso(ts)}) + "\n")
    else:
        sys.stdout.write(f"heartbeat: {task_id} at {clock.iso(ts)}\n")
    return 0
