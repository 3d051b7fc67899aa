"""The per-worktree context file ``<git-dir>/nerve/.worker-ctx.json``.

It says which task a worktree belongs to, so agent commands run from
anywhere inside the worktree find their task. It lives under the worktree's
own git dir, so nothing of ours shows in ``git status``. SQLite stays the
only source of truth for state; this file only names the task.
Standard library only.
"""

from __future__ import annotations

import json
import os
from collections import namedtuple
from pathlib import Path

from . import faults
from .errors import UsageError
from .filedoor import keep_or_remove
from .fs import CTX_FILE, NERVE, make_dirs, replace_file
from .liveness import pid_alive


class WorkerContext(namedtuple("WorkerContext", "task_id branch worktree created_at description", defaults=("",))):
    """The task a worktree belongs to (all strings; a named tuple: the hooks avoid importing dataclasses)."""

    __slots__ = ()


def ctx_path(git_dir: str | os.PathLike[str]) -> Path:
    return Path(git_dir) / NERVE / CTX_FILE


def read(git_dir: str | os.PathLike[str]) -> WorkerContext | None:
    """The context of the worktree whose git dir is ``git_dir``, or None."""
    path = ctx_path(git_dir)
    if path.is_symlink():
        raise UsageError(f"refusing to read {path}: it is a symlink")
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
        return WorkerContext(
            task_id=str(data["task_id"]),
            branch=str(data["branch"]),
            worktree=str(data["worktree"]),
            created_at=str(data.get("created_at", "")),
            description=str(data.get("description", "")),
        )
    except (ValueError, KeyError, TypeError) as exc:
        name = Path(git_dir).name  # a worktree's git dir is named after it, and a worktree after its task
        raise UsageError(
            f"{path} is not a valid worker context ({exc}); `git worker spawn {name}` rewrites it "
            f"(with this worktree's task id, if it is not {name!r}: `git worker status` lists them)"
        ) from exc


def repair(git_dir: str | os.PathLike[str], ctx: WorkerContext) -> bool:
    """Rewrite the context when it is missing, unreadable or names another task; True if it did."""
    try:
        current = read(git_dir)
    except UsageError:
        if ctx_path(git_dir).is_symlink():
            raise
        current = None
    if current is not None and (current.task_id, current.branch, current.worktree) == (ctx.task_id, ctx.branch, ctx.worktree):
        return False
    write(git_dir, ctx)
    return True


def write(git_dir: str | os.PathLike[str], ctx: WorkerContext) -> Path:
    """Write atomically (temp file + rename); refuse to follow a symlink."""
    path = ctx_path(git_dir)
    make_dirs(path.parent)
    if path.is_symlink():
        raise UsageError(f"refusing to write {path}: it is a symlink")
    _clear_dead_temps(path)
    # a full disk must not leave half a file behind; a killed writer's temporary: _clear_dead_temps
    replace_file(path, json.dumps(ctx._asdict(), indent=2, ensure_ascii=False) + "\n",
                 tmp_name=f"{path.name}.{os.getpid()}.tmp", before_replace=lambda: faults.point("ctx.write"))
    return path


def _clear_dead_temps(path: Path) -> None:
    """Remove ``<ctx>.<pid>.tmp`` files whose writer died (killed between writing and renaming)."""
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 1:-len(".tmp")]
        if not pid.isdigit():
            continue
        if not pid_alive(int(pid)):  # permission denied: alive (owned by someone else)
            keep_or_remove(tmp, within=path.parent, kind="ctx-temp")


def resolve_task(git_dir: str | os.PathLike[str], explicit: str | None, how_to_name: str = "pass --task TASK") -> str:
    """The task a command acts on: ``--task`` (or the task argument) if given, else this worktree's context;
    outside a task's worktree, ``how_to_name`` says what to pass."""
    if explicit:
        return explicit
    ctx = read(git_dir)
    if ctx is None:
        raise UsageError(f"not inside a worker's worktree (no .worker-ctx.json); {how_to_name}")
    return ctx.task_id
