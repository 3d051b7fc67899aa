"""What the post-commit hook calls: queue the committed files and start a detached sync.

Standard library only (the hook runs it on every commit). :func:`schedule`
returns at once: it writes the file list as one file under
``<git-dir>/nerve/knowledge-pending/`` (written aside, then renamed, so a
reader never sees half a list) and starts ``python -m
git_nerve.knowledge.background`` in a new session with no terminal, its
output appended to ``<git-dir>/nerve/knowledge-sync.log``. Nothing waits for
that process.

The background process (:mod:`.background`) takes ``<git-dir>/nerve/knowledge.lock``
without waiting: if another sync holds it, it exits and leaves the list
queued. Whoever holds the lock keeps taking queued lists until none is
left, and looks once more after letting the lock go, so a list queued while
a sync runs is never stranded and two syncs never run at once.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from .. import detach
from ..git.cli import clean_env
from ..paths import make_dirs, replace_file

KNOWLEDGE_FILE = "knowledge.yaml"
PENDING_DIR = "knowledge-pending"
LOCK_FILE = "knowledge.lock"
LOG_FILE = "knowledge-sync.log"
#: The log is rotated (one old copy kept) past this size.
LOG_LIMIT = 256 * 1024


def nerve_dir(git_dir: str | os.PathLike[str]) -> Path:
    return Path(git_dir) / "nerve"


def lock_path(git_dir: str | os.PathLike[str]) -> Path:
    return nerve_dir(git_dir) / LOCK_FILE


def log_path(git_dir: str | os.PathLike[str]) -> Path:
    return nerve_dir(git_dir) / LOG_FILE


def pending_dir(git_dir: str | os.PathLike[str]) -> Path:
    return nerve_dir(git_dir) / PENDING_DIR


def schedule(toplevel: Path, git_dir: Path, common_dir: Path, files: list[str]) -> bool:
    """Queue ``files`` (relative to ``toplevel``) for the index and start a detached sync.

    False at once, doing nothing, when the worktree has no ``knowledge.yaml``.
    """
    toplevel = Path(os.path.abspath(toplevel))
    if not (toplevel / KNOWLEDGE_FILE).is_file():
        return False
    git_dir, common_dir = Path(os.path.abspath(git_dir)), Path(os.path.abspath(common_dir))
    add_pending(git_dir, files)
    spawn(toplevel, git_dir, common_dir)
    return True


def add_pending(git_dir: Path, files: list[str]) -> Path:
    """Queue one list of files; returns the queued file."""
    folder = make_dirs(pending_dir(git_dir))
    target = folder / f"{time.time_ns()}-{os.getpid()}.files"
    replace_file(target, b"\0".join(f.encode("utf-8", "surrogateescape") for f in files))
    return target


def queued(git_dir: Path) -> list[Path]:
    """The queued lists, oldest first."""
    try:
        return sorted((p for p in pending_dir(git_dir).iterdir() if p.suffix == ".files"), key=lambda p: p.name)
    except FileNotFoundError:
        return []


def read_pending(lists: list[Path]) -> list[str]:
    """The distinct files named in ``lists`` (lists that vanished meanwhile are skipped)."""
    files: dict[str, None] = {}
    for path in lists:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue
        for part in raw.split(b"\0"):
            if part:
                files[part.decode("utf-8", "surrogateescape")] = None
    return list(files)


def clear_pending(lists: list[Path]) -> None:
    """The lists the sync took, removed through the door (regular ``*.files`` files in the queue directory)."""
    from ..filedoor import keep_or_remove

    for path in lists:
        keep_or_remove(path, within=path.parent, kind="knowledge-queue")


def spawn(toplevel: Path, git_dir: Path, common_dir: Path) -> subprocess.Popen:
    """Start the background sync of the queued lists, detached (new session, no terminal)."""
    folder = make_dirs(nerve_dir(git_dir))
    log = folder / LOG_FILE
    try:
        if log.stat().st_size > LOG_LIMIT:
            os.replace(log, log.with_name(LOG_FILE + ".1"))
    except FileNotFoundError:
        pass
    # (detach puts the package this module came from first: the hook may run a checkout that is not installed)
    return detach.start("git_nerve.knowledge.background",
                        ["--toplevel", str(toplevel), "--git-dir", str(git_dir), "--common-dir", str(common_dir)],
                        cwd=toplevel, log=log, env=clean_env())
