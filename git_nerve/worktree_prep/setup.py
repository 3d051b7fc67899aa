"""``[worktree] setup``: a command run in a new worktree after the copy, with NERVE_TASK_ID and NERVE_PORT.

Its argv is the setting split like a shell splits words (shlex), never given to a shell: a setup that
needs one is written ``sh -c '...'``. It runs under a small supervisor process (:mod:`.setup_run`) that
writes its output to ``<common-dir>/nerve/setup/<task>.log`` and records in the bus whether it is
running, done or failed (with its exit status), so `spawn` returns at once (``--wait`` waits) and
`status`, `show` and `start` can tell. A failing setup changes nothing else: the task, its worktree and
the copied files stay; the log says why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from .. import liveness
from ..bus import prep as busprep

SETUP_DIR = "setup"


def log_path(common_dir: Path, task_id: str) -> Path:
    return common_dir / "nerve" / SETUP_DIR / f"{task_id}.log"


def start(bus, common_dir: Path, task_id: str, worktree: Path, argv: tuple[str, ...], env: dict[str, str],
          *, wait: bool = False) -> str:
    """Start the setup (recorded as running first); with ``wait``, return once it ended. Its state."""
    log = log_path(common_dir, task_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with bus.write() as conn:
        busprep.set_values(conn, task_id, setup_state="running", setup_log=str(log), setup_pid=None,
                           setup_exit=None, setup_started=started, setup_ended=None)
    cmd = [sys.executable, "-m", "git_nerve.worktree_prep.setup_run", os.fspath(bus.path), task_id,
           os.fspath(worktree), os.fspath(log), "--", *argv]
    root = str(Path(__file__).resolve().parents[2])
    child_env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"):
        child_env.pop(var, None)
    proc = subprocess.Popen(cmd, cwd=worktree, env=child_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=not wait)
    with bus.write() as conn:
        busprep.set_setup_pid(conn, task_id, proc.pid, started)
    if not wait:
        return "running"
    proc.wait()
    row = busprep.get(bus.conn, task_id)
    return state(row) or "failed"


def state(row: busprep.Prep | None) -> str | None:
    """running | done | failed | interrupted (its supervisor is gone without a word) | None (no setup)."""
    if row is None or row.setup_state is None:
        return None
    if row.setup_state == "running" and row.setup_pid and not liveness.pid_alive(row.setup_pid):
        return "interrupted"
    return row.setup_state
