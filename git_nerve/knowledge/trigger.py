"""What the post-commit hook calls: queue the committed files and start a detached sync; and what spawn calls
for a new worktree's view (:func:`new_view`).

On by default (issue 37): where the repository has an index (spawn makes each task's view) or a
``knowledge.yaml``, every commit refreshes it (:func:`enabled`).

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
import time
from pathlib import Path

from ..paths import make_dirs, replace_file

TYPE_CHECKING = False  # a query reads this module's names (its freshness): subprocess only when a sync starts
if TYPE_CHECKING:
    import subprocess

KNOWLEDGE_FILE = "knowledge.yaml"
#: the repository's index under <common-dir>/nerve (store.index_path; store imports sqlite3, this module may not)
INDEX_FILE = "knowledge.db"
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


def enabled(toplevel: Path, common_dir: Path) -> bool:
    """Whether commits keep this worktree's index fresh: a ``knowledge.yaml`` at its top, or the repository has a
    knowledge index (``git nerve knowledge sync`` made it, or a spawn made a task's view: the default)."""
    return (Path(toplevel) / KNOWLEDGE_FILE).is_file() or (Path(common_dir) / "nerve" / INDEX_FILE).is_file()


def schedule(toplevel: Path, git_dir: Path, common_dir: Path, files: list[str]) -> bool:
    """Queue ``files`` (relative to ``toplevel``) for the index and start a detached sync.

    False at once, doing nothing, when the index is not kept here (:func:`enabled`).
    """
    toplevel = Path(os.path.abspath(toplevel))
    if not enabled(toplevel, common_dir):
        return False
    git_dir, common_dir = Path(os.path.abspath(git_dir)), Path(os.path.abspath(common_dir))
    add_pending(git_dir, files)
    spawn(toplevel, git_dir, common_dir)
    return True


#: `git config nerve.knowledge` values that turn the default off (no view made at spawn)
OFF = ("false", "no", "off", "0")


def after_spawn(setting: str | None, worktree: str | os.PathLike[str], common_dir: Path) -> str | None:
    """What `git worker spawn` (and the console's spawn) call for a task's new worktree: its view made in the
    background (:func:`new_view`) unless ``setting`` (`git config nerve.knowledge`) is false. A warning line when
    it could not be started (the spawn stands)."""
    if (setting or "").strip().lower() in OFF:
        return None
    from ..errors import NerveError
    from ..git.location import linked_git_dir

    try:
        new_view(Path(worktree), linked_git_dir(worktree), Path(common_dir))
    except (OSError, NerveError) as exc:
        return f"the knowledge index of {worktree} was not started: {getattr(exc, 'message', None) or exc}"
    return None


def new_view(toplevel: Path, git_dir: Path, common_dir: Path) -> None:
    """A new task's worktree gets its view of the index in the background (spawn: off its critical path). The
    store is shared by content, so this sync reads and hashes the worktree's files and chunks only what no other
    view holds; an empty list queued makes it a whole-tree sync (a view never synced)."""
    toplevel, git_dir = Path(os.path.abspath(toplevel)), Path(os.path.abspath(git_dir))
    add_pending(git_dir, [])
    spawn(toplevel, git_dir, Path(os.path.abspath(common_dir)))


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
    from .. import detach
    from ..git.cli import clean_env

    # (detach puts the package this module came from first: the hook may run a checkout that is not installed)
    return detach.start("git_nerve.knowledge.background",
                        ["--toplevel", str(toplevel), "--git-dir", str(git_dir), "--common-dir", str(common_dir)],
                        cwd=toplevel, log=log, env=clean_env())
