"""What `git worker spawn/status/show/start` print of a task's prepared worktree (git_nerve/worktree_prep):
copied files, NERVE_PORT, the setup's state and log, disk_bytes."""

from __future__ import annotations

from .plain import line as echo  # click-free: spawn's fast path prints through these
from .plain import warning as warn


def _ttl(repo) -> float:
    from ..worktree_prep.config import DISK_TTL, load

    try:
        return load(repo.paths.toplevel).disk_ttl
    except Exception:  # status must work even with a bad nerve.toml (spawn says what is wrong)
        return DISK_TTL


def prep_fields(repo, w, *, measure: bool = True, budget=None) -> dict:
    from ..worktree_prep import report

    return report.fields(repo.bus, w, ttl=_ttl(repo), measure=measure, budget=budget)


def prep_lines(repo, w) -> list[str]:
    from ..worktree_prep import report

    return report.lines(prep_fields(repo, w))


def prep_status_line(r: dict) -> str | None:
    """The second line of a task in the human `status`: disk, port, setup (None: nothing to say)."""
    from ..worktree_prep.disk import human

    if r["disk_bytes"] is None and r["port"] is None and not r["setup"] and not r["copied"]:
        return None
    parts = [f"disk {human(r['disk_bytes'])}"]
    if r["port"] is not None:
        parts.append(f"port {r['port']}")
    if r["setup"]:
        parts.append(f"setup {r['setup']}" + (f" (log: {r['setup_log']})" if r["setup"] != "done" else ""))
    if r["copied"]:
        parts.append(f"{len(r['copied'])} file(s) copied")
    return f"{'':<24} " + ", ".join(parts)


def print_prep(prep) -> None:
    if prep is None:
        return
    if prep.copied:
        echo(f"  Copied:   {', '.join(prep.copied[:10])}" + (f" (+{len(prep.copied) - 10} more)" if len(prep.copied) > 10 else ""))
    if prep.cloned:
        echo(f"  Cloned:   {', '.join(prep.cloned)}")
    if prep.port is not None:
        echo(f"  Port:     {prep.port}  (NERVE_PORT)")
    if prep.setup_state:
        echo(f"  Setup:    {prep.setup_state}  (log: {prep.setup_log})")


def refuse_failed_setup(prep) -> None:
    """`spawn --wait` whose setup failed exits 1 (the task and its worktree stay; the warning named the log)."""
    from ..errors import NerveError

    if prep is not None and prep.setup_state in ("failed", "interrupted"):
        raise NerveError(f"the setup failed; the task and its worktree are kept; its log: {prep.setup_log}")


def warn_setup(repo, task_id: str) -> None:
    from ..worktree_prep.report import start_warning

    text = start_warning(repo.bus, task_id)
    if text:
        warn(text)
