"""What `status`, `show` and `start` say of a task's prepared worktree (port, setup, disk, copied files)."""

from __future__ import annotations

from ..bus import prep as busprep
from . import disk, ports, setup
from .config import DISK_TTL


def fields(bus, w, *, ttl: float = DISK_TTL, measure: bool = True, budget: disk.Budget | None = None) -> dict:
    """``port``, ``setup`` (running | done | failed | interrupted | None), ``setup_log``, ``copied`` and
    ``disk_bytes`` (cached for ``ttl`` seconds, measured within ``budget``; None when the worktree is gone or,
    beyond the budget, not measured yet) of the task ``w``."""
    row = busprep.get(bus.conn, w.task_id)
    return {
        "port": ports.port_of(bus.conn, w.task_id),
        "setup": setup.state(row),
        "setup_log": row.setup_log if row is not None else None,
        "copied": row.copied_paths if row is not None else [],
        "disk_bytes": disk.cached(bus, w.task_id, w.worktree, ttl, budget=budget) if measure else None,
    }


def lines(f: dict) -> list[str]:
    """The human lines of :func:`fields` (show)."""
    out = [f"  Port:     {f['port']}  (NERVE_PORT)"] if f["port"] is not None else []
    if f["disk_bytes"] is not None:
        out.append(f"  Disk:     {disk.human(f['disk_bytes'])}")
    if f["setup"]:
        out.append(f"  Setup:    {f['setup']}  (log: {f['setup_log']})")
    if f["copied"]:
        shown = ", ".join(f["copied"][:10]) + (f" (+{len(f['copied']) - 10} more)" if len(f["copied"]) > 10 else "")
        out.append(f"  Copied:   {shown}")
    return out


def start_warning(bus, task_id: str) -> str | None:
    """The warning `git worker start` gives while the task's setup runs (or after it failed)."""
    row = busprep.get(bus.conn, task_id)
    st = setup.state(row)
    if st == "running":
        return f"the setup of {task_id} is still running (log: {row.setup_log}); the worktree may not be ready yet"
    if st in ("failed", "interrupted"):
        return f"the setup of {task_id} {'failed' if st == 'failed' else 'was interrupted'}; see its log: {row.setup_log}"
    return None
