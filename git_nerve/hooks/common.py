"""What every Python part of the hooks shares: where the hook runs, its output, the bus opened for a hook.

Every agent commit pays for these imports: standard library and git_nerve's own standard-library modules
only (the hot-path contract in pyproject.toml). See :mod:`.runtime` for the hooks themselves.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from ..bus.connection import Bus
from ..context import WorkerContext
from ..context import read as read_context
from ..errors import BusBusy, BusError, NerveError
from ..paths import RepoPaths
from ..text import clean

#: Seconds a hook waits for a bus that another process holds locked.
BUSY_TIMEOUT = 1.0
#: What a CONFLICTED worker runs once its rebase is finished.
NEXT_AFTER_REBASE = "git worker done --skip-rebase"


# -- where the hook runs -------------------------------------------------------------------


#: The worktree a hook runs for: git_dir, common_dir, toplevel (None when bare).
Where = RepoPaths


def locate(cwd: str | os.PathLike[str] | None = None) -> Where:
    """The worktree a hook runs for, read the way git set it up, without running git.

    Git runs hooks at the top of the work tree (in the git dir when bare),
    with GIT_DIR set for linked worktrees. Anything unusual asks git.
    """
    here = Path(os.path.abspath(cwd or os.getcwd()))
    env_dir = os.environ.get("GIT_DIR")
    if env_dir:
        git_dir = Path(os.path.abspath(here / env_dir))
    elif (here / ".git").is_dir():
        git_dir = here / ".git"
    else:
        from ..paths import discover

        paths = discover(here, inherit_location=True)
        return paths
    env_common = os.environ.get("GIT_COMMON_DIR")
    if env_common:
        common = Path(os.path.abspath(here / env_common))
    else:
        try:
            pointer = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        except OSError:
            pointer = ""
        common = Path(os.path.normpath(git_dir / pointer)) if pointer else git_dir
    env_tree = os.environ.get("GIT_WORK_TREE")
    if env_tree:
        top: Path | None = Path(os.path.abspath(here / env_tree))
    else:
        top = None if os.path.samefile(here, git_dir) else here
    return Where(git_dir, common, top)


def operation_in_progress(git_dir: Path) -> str | None:
    """'rebase', 'merge', 'cherry-pick' or 'revert' when git is in the middle of one here.

    (The same test as ``git.worktrees.operation_in_progress``, without the
    imports that module brings onto every commit.)
    """
    if (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply").is_dir():
        return "rebase"
    if (git_dir / "MERGE_HEAD").is_file():
        return "merge"
    if (git_dir / "CHERRY_PICK_HEAD").is_file():
        return "cherry-pick"
    if (git_dir / "REVERT_HEAD").is_file():
        return "revert"
    return None


# -- output --------------------------------------------------------------------------------


def warn(hook: str, text: str) -> None:
    sys.stderr.write(clean(f"warning: git-nerve {hook}: {text}") + "\n")


def describe(exc: BaseException) -> str:
    """One readable line for a failure of ours."""
    if isinstance(exc, BusBusy):
        return f"the bus stayed locked by another process for {BUSY_TIMEOUT:g}s"
    if isinstance(exc, BusError) and exc.driver is not None:
        return f"the bus is unreadable ({exc.driver})"
    if isinstance(exc, NerveError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def guarded(hook: str, what: str, fn: Callable[..., object], *args, **kwargs) -> object:
    """Run ``fn``; a failure becomes one warning line ``<what>: <why>`` (fail open)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - failing open is the point
        warn(hook, f"{what}: {describe(exc)}")
        return None


# -- the bus, the task, git, opened for a hook ---------------------------------------------------


def open_bus(common_dir: Path, *, ingest: bool = True) -> Bus:
    """The bus as a hook opens it: an existing file only, a short busy timeout, one try."""
    return Bus(common_dir / "nerve" / "bus.db", create=False, busy_timeout=BUSY_TIMEOUT, retries=1, ingest=ingest)


def worker_context(where: Where, hook: str) -> WorkerContext | None:
    try:
        return read_context(where.git_dir)
    except NerveError as exc:
        warn(hook, exc.message)
        return None


# -- installed packages, for the parts that need them ------------------------------------------

_site_loaded = False


def load_site_packages() -> None:
    """Make installed packages importable in a Python the shim started with ``-S``."""
    global _site_loaded
    if sys.flags.no_site and not _site_loaded:
        import site

        site.main()
        _site_loaded = True


def site_loaded() -> bool:
    """Has :func:`load_site_packages` turned site-packages on in this process?"""
    return _site_loaded
