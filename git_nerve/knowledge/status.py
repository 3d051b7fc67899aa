"""What the index holds and how stale it is (``git nerve knowledge status``).

Staleness is measured, not guessed: the same stat walk a sync starts with,
then a content hash of the files whose stat moved, without writing anything.
It also reports the commits made since the last sync, the background
trigger's queue and last outcome, and embedding coverage.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..git import refs
from ..liveness import pid_alive
from ..paths import RepoPaths, replace_file
from ..proctable import zombie
from . import config, trigger
from .store import cache_path, index_path, open_index
from .sync import digest, list_files, plan, read_file

BACKGROUND_STATE = "knowledge-background.json"


def background_state_path(git_dir: Path) -> Path:
    return trigger.nerve_dir(git_dir) / BACKGROUND_STATE


def record_background(git_dir: Path, ok: bool, message: str, files: int) -> None:
    """Remember the last background sync's outcome (for status)."""
    path = background_state_path(git_dir)
    replace_file(path, json.dumps({"ts": time.time(), "ok": ok, "message": message, "files": files}).encode())


def _running(git_dir: Path) -> int | None:
    """The pid of a sync holding the lock, by the pid the lock file records (the lock is not touched)."""
    try:
        pid = int(trigger.lock_path(git_dir).read_text().strip() or 0)
    except (OSError, ValueError):
        return None
    if pid <= 0 or pid == os.getpid():
        return None
    if not pid_alive(pid) or zombie(pid):  # an exited child its parent has not reaped yet still answers kill(0)
        return None
    return pid


def _stale(toplevel, cfg, indexed, skipped) -> dict:
    """Files the worktree has that the index lacks (added), holds with other content (changed), or no longer has."""
    p = plan(toplevel, cfg, indexed, skipped, list_files(toplevel), None)
    added = changed = 0
    for path, _size, _mtime, row in p.read:
        try:
            data = read_file(toplevel / path)
        except OSError:
            continue
        if row is None:
            added += data is not None
        elif data is None or digest(data) != row.hash:
            changed += 1
    return {"added": added, "changed": changed, "removed": p.removed_indexed}


def status(paths: RepoPaths) -> dict:
    toplevel = paths.require_worktree()
    cfg = config.load(toplevel)
    emb = config.load_embeddings(toplevel)
    ipath = index_path(paths.common_dir)
    out: dict = {"toplevel": str(toplevel), "index": str(ipath), "config": cfg.as_dict(), "indexed": ipath.is_file()}
    state_file = background_state_path(paths.git_dir)
    try:
        last = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        last = None
    out["background"] = {
        "trigger": trigger.enabled(toplevel, paths.common_dir),
        "running_pid": _running(paths.git_dir),
        "queued_files": len(trigger.read_pending(trigger.queued(paths.git_dir))),
        "last": last,
        "log": str(trigger.log_path(paths.git_dir)),
    }
    if not out["indexed"]:
        return out
    with open_index(paths, create=False) as index:
        meta = index.meta()
        if "synced" not in meta:  # the repository's store exists, this worktree has not been synced
            out["indexed"] = False
            return out
        files, chunks = index.counts()
        indexed, skipped = index.files(), index.skipped()
        out.update(files=files, chunks=chunks, skipped=index.skip_counts())
        synced = float(meta["synced"]) if "synced" in meta else None
        out["last_sync"] = synced
        out["last_full_sync"] = float(meta["synced_all"]) if "synced_all" in meta else None
        out["config_changed"] = meta.get("config") != cfg.digest
        head_then = meta.get("head") or None
        head_now = refs.verify(toplevel, "HEAD")
        commits = 0
        if head_then and head_now and head_then != head_now:
            commits = refs.rev_list_count(toplevel, head_then, head_now)
        out["head"] = {"at_sync": head_then, "now": head_now, "commits_since": commits}
        out["stale"] = _stale(toplevel, cfg, indexed, skipped)
        if emb is not None:
            out["embeddings"] = {**emb.as_dict(), "embedded": index.embedded_count(cache_path(paths.common_dir), emb.model), "chunks": chunks}
        else:
            out["embeddings"] = None
    return out
