"""``[worktree] max_live`` and ``max_total_bytes``: spawn refuses a worktree beyond them (exit 2), in one
line that says which worktrees to clean up."""

from __future__ import annotations

import os

from ..bus import workers
from ..errors import UsageError
from . import disk
from .config import PrepConfig, load


def refuse_over_caps(paths, bus, cfg: PrepConfig | None = None) -> PrepConfig:
    """Raise when one more worktree would pass a cap; the config read (a bad one is refused here, before
    spawn makes anything)."""
    cfg = cfg or load(paths.toplevel)
    if cfg.max_live is None and cfg.max_total_bytes is None:
        return cfg
    present = [w for w in workers.all_workers(bus.conn) if os.path.isdir(w.worktree)]
    if cfg.max_live is not None and len(present) >= cfg.max_live:
        raise UsageError(f"spawn refused: {len(present)} task worktree(s) exist and nerve.toml [worktree] "
                         f"max_live = {cfg.max_live}; clean up first: {_cleanup_hint(present)}")
    if cfg.max_total_bytes is not None:
        sizes = {w.task_id: disk.cached(bus, w.task_id, w.worktree, cfg.disk_ttl) or 0 for w in present}
        total = sum(sizes.values())
        if total >= cfg.max_total_bytes:
            biggest = sorted(present, key=lambda w: -sizes[w.task_id])
            raise UsageError(f"spawn refused: the task worktrees take {disk.human(total)} and nerve.toml [worktree] "
                             f"max_total_bytes = {cfg.max_total_bytes}; clean up first: {_cleanup_hint(biggest, sizes)}")
    return cfg


def _cleanup_hint(ws: list, sizes: dict[str, int] | None = None) -> str:
    """Finished tasks first (their worktree is only kept), then the rest; three named at most."""
    ended = [w for w in ws if w.state in ("FAILED", "COMPLETED")]
    order = ended + [w for w in ws if w not in ended]
    parts = []
    for w in order[:3]:
        size = f" ({disk.human(sizes[w.task_id])})" if sizes else ""
        parts.append(f"`git worker cancel {w.task_id} --cleanup`{size} [{w.state}]")
    return ", ".join(parts)
