"""What an agent CLI printed, as the runner records it: ``<common-dir>/nerve/runs/<task>/<round>-<role>.log``.

The adapter's process output (stdout and stderr, as they arrive) is appended to the round's log while the
agent runs; a reader follows it by byte offset. Beside each log, ``<round>-<role>.json`` names the
adapter. Both are recorded as git-nerve's own (:func:`..git.ownership.record`) before they are created and
kept after the round ends (finished rounds stay readable). While a writer has the log open it holds an
exclusive ``flock`` on it (the kernel drops it when the writer dies): that is what "running" means.

Secrets never reach the log: the values of the agent's environment variables whose names say they are
secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``...) are replaced by ``[redacted]``, and the values of
a ``.env`` file copied into the task's worktree by ``[value from <file> hidden by git-nerve]``: the one redaction,
:mod:`git_nerve.redact` (a value split across two reads is still caught: bytes that could begin one wait for the
next read). A reader (:func:`read`) masks again what it returns (a log written before a value was known).
Each pipe is written in whole lines (an unfinished line waits for its end, up to ``LINE_HOLD`` bytes), so a line
on stdout and one on stderr never cut into each other.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..fs import NERVE, create_file, make_dirs, replace_file
from ..redact import NOTHING, Redactor

RUNS = "runs"
#: a pipe's unfinished line is held back (so two pipes' lines never cut into each other) up to this size
LINE_HOLD = 64 * 1024
#: bytes one read returns at most
READ_LIMIT = 256 * 1024
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_NAME = re.compile(r"^(\d+)-(.+)\.log$")


def task_dir(common_dir: str | os.PathLike[str], task_id: str) -> Path:
    return Path(common_dir) / NERVE / RUNS / _SAFE.sub("_", task_id)


def log_path(common_dir: str | os.PathLike[str], task_id: str, round_: int, role: str) -> Path:
    return task_dir(common_dir, task_id) / f"{int(round_)}-{_SAFE.sub('_', role or 'agent')}.log"


def masking_for(common_dir, task_id: str, env: Mapping[str, str] | None, worktree=None) -> Redactor:
    """What a round's log of ``task_id`` masks: the secret values of ``env`` (the agent's) and the task's copied
    values (:func:`git_nerve.worktree_prep.secrets.redactor`, read from its bus row; env only when it cannot be)."""
    from ..worktree_prep.secrets import redactor_at

    return redactor_at(common_dir, task_id, worktree, env={} if env is None else env)


class Tee:
    """One round's log, appended to from the agent's two pipes (thread-safe), secrets redacted."""

    def __init__(self, path: Path, fd: int, masking: Redactor = NOTHING):
        self.path = path
        self._fd = fd
        self._masking = masking
        self._pending: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def sink(self, stream: str):
        """A ``Capture`` ``on_chunk`` callback for one pipe."""
        return lambda chunk: self.write(stream, chunk)

    def _redact(self, data: bytes) -> bytes:
        return self._masking.data(data)

    def write(self, stream: str, chunk: bytes) -> None:
        with self._lock:
            if self._fd < 0:
                return
            data = self._redact(self._pending.get(stream, b"") + chunk)
            if len(data) <= LINE_HOLD:  # whole lines only: stdout and stderr lines never cut into each other
                cut = data.rfind(b"\n") + 1
            else:
                cut = len(data) - self._held(data)
            self._pending[stream] = data[cut:]
            if cut > 0:
                self._out(data[:cut])

    def _held(self, data: bytes) -> int:
        """How many bytes at the end of ``data`` could begin a secret (they wait for the next read)."""
        return self._masking.held(data)

    def _out(self, data: bytes) -> None:
        try:
            os.write(self._fd, data)
        except OSError:
            pass  # a full disk must not end the agent: its output still reaches the round

    def close(self) -> None:
        with self._lock:
            if self._fd < 0:
                return
            for stream in sorted(self._pending):
                if self._pending[stream]:
                    self._out(self._redact(self._pending[stream]))
            self._pending.clear()
            os.close(self._fd)  # drops the flock: the round is finished
            self._fd = -1


def open_tee(common_dir, task_id: str, round_: int, role: str, adapter: str,
             env: Mapping[str, str] | None, worktree=None) -> Tee | None:
    """Start (or, for a second call in the same round, continue) a round's log; None when it cannot be written.
    ``env``: the agent's environment, ``worktree``: where it runs (the copied values it may print are there)."""
    from ..git import ownership

    path = log_path(common_dir, task_id, round_, role)
    meta = path.with_suffix(".json")
    try:
        ownership.record(Path(common_dir), "runlog", os.fspath(path), task=task_id)
        ownership.record(Path(common_dir), "runlog", os.fspath(meta), task=task_id)
        make_dirs(path.parent)
        replace_file(meta, json.dumps({"task": task_id, "round": int(round_), "role": role, "adapter": adapter}))
        fd = create_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_EX)
    return Tee(path, fd, masking_for(common_dir, task_id, env, worktree))


def record_failure(common_dir, task_id: str, round_: int, role: str, adapter: str, message: str) -> Path | None:
    """An agent that could not be started (``spawn_failed``: its CLI not on PATH, an endpoint unreachable): the
    reason appended to that round's log, where its output would have been (the console's run info and `git
    worker show` name it; the thread gets no round of it). The log's path, or None when it cannot be written."""
    tee = open_tee(common_dir, task_id, round_, role, adapter, None)
    if tee is None:
        return None
    try:
        tee.write("stderr", f"git-nerve: the agent could not be started: {message}\n".encode("utf-8", "replace"))
    finally:
        tee.close()
    return tee.path


def _running(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock if we got it
    return False


def rounds(common_dir, task_id: str) -> list[dict[str, Any]]:
    """Every recorded round of ``task_id``, oldest first."""
    d = task_dir(common_dir, task_id)
    try:
        names = os.listdir(d)
    except OSError:
        return []
    out = []
    for name in names:
        m = _NAME.match(name)
        if not m:
            continue
        path = d / name
        try:
            meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
            size = path.stat().st_size
        except (OSError, ValueError):
            meta, size = {}, 0
        out.append({"round": int(m.group(1)), "role": meta.get("role") or m.group(2),
                    "adapter": meta.get("adapter"), "running": _running(path), "size": size, "_path": path})
    out.sort(key=lambda r: (r["round"], r["role"]))
    return out


def running_adapter(common_dir, task_id: str) -> str | None:
    """The adapter of ``task_id``'s round that runs now (its log is held), or None when none runs."""
    live = [r for r in rounds(common_dir, task_id) if r["running"] and r["adapter"]]
    return str(live[-1]["adapter"]) if live else None


def read(common_dir, task_id: str, round_: int | None = None, after: int | None = None,
         limit: int = READ_LIMIT, masking: Redactor | None = None) -> dict[str, Any]:
    """One round's output from byte ``after`` (default: the last ``limit`` bytes); the newest round by default,
    masked by ``masking``.

    ``next`` is the offset to ask from next time (in the log's bytes); text never ends inside a UTF-8 character."""
    found = rounds(common_dir, task_id)
    pick = [r for r in found if round_ is None or r["round"] == round_]
    listing = [{k: v for k, v in r.items() if k != "_path"} for r in found]
    if not pick:
        return {"rounds": listing, "round": None, "text": "", "start": 0, "next": 0}
    chosen = max(pick, key=lambda r: (r["running"], r["round"])) if round_ is None else pick[-1]
    with open(chosen["_path"], "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        start = max(0, size - limit) if after is None else min(max(0, int(after)), size)
        fh.seek(start)
        data = fh.read(min(limit, size - start))
    data = data[:_complete(data)]
    text = (masking or NOTHING).text(data.decode("utf-8", "replace"))
    return {"rounds": listing, "round": chosen["round"], "role": chosen["role"], "adapter": chosen["adapter"],
            "running": chosen["running"], "text": text, "start": start, "next": start + len(data)}


def _complete(data: bytes) -> int:
    """Length of ``data`` without a UTF-8 character cut at its end."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b < 0x80:
            return len(data)
        if b >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


__all__ = ["READ_LIMIT", "RUNS", "Tee", "log_path", "masking_for", "open_tee", "read", "record_failure", "rounds",
           "task_dir"]
