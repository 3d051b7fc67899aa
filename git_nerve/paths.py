"""Where things live. Standard library only (hooks and heartbeat load it).

* ``<git-common-dir>/nerve/bus.db``: the bus, shared by every worktree.
* ``<git-dir>/nerve/.worker-ctx.json``: one worktree's task context.
* ``<git-common-dir>/nerve/knowledge.db``: the knowledge index, a view per worktree.

The common dir comes from ``git rev-parse --git-common-dir`` (never by
joining ".git" onto a path), so linked worktrees, ``GIT_DIR`` and
submodule layouts all resolve the way git resolves them.
"""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

from .errors import GitError, UsageError

from .fs import (  # noqa: F401  (re-exported: where things live and how they are written)
    BUS_FILE, CTX_FILE, DIR_MODE, FILE_MODE, NERVE, NETWORK_FS, create_file, ensure_local_filesystem, filesystem_type,
    make_dirs, replace_file,
)


# Plain named tuples rather than dataclasses on the hot path (hooks, heartbeat):
# importing dataclasses pulls in inspect, ast and dis, ~20 ms on every commit.
class RepoPaths(namedtuple("RepoPaths", "git_dir common_dir toplevel")):
    """Where a repository lives, as git sees it from one worktree.

    git_dir: Path, this worktree's git dir (``.git`` or ``.git/worktrees/<name>``);
    common_dir: Path, shared by all worktrees; toplevel: Path | None, None in a bare repository.
    """

    __slots__ = ()

    @property
    def nerve_dir(self) -> Path:
        return self.common_dir / NERVE

    @property
    def bus_path(self) -> Path:
        return self.nerve_dir / BUS_FILE

    @property
    def worktree_nerve_dir(self) -> Path:
        return self.git_dir / NERVE

    @property
    def ctx_path(self) -> Path:
        return self.worktree_nerve_dir / CTX_FILE

    @property
    def is_bare(self) -> bool:
        return self.toplevel is None

    def require_worktree(self) -> Path:
        if self.toplevel is None:
            raise UsageError("this command needs a work tree; run it inside a checkout, not a bare repository")
        return self.toplevel


def discover(cwd: str | os.PathLike[str] | None = None, *, inherit_location: bool = True) -> RepoPaths:
    """Find the repository containing ``cwd`` (default: the current directory).

    ``inherit_location`` keeps GIT_DIR and friends, so a hook (or a user who
    set GIT_DIR) is resolved exactly as git resolves it.
    """
    if cwd is None:
        try:
            os.getcwd()
        except FileNotFoundError:
            raise UsageError("the current directory no longer exists (was its worktree removed?); cd somewhere else") from None
    from .git import location  # here, not at the top: find_by_files' callers (heartbeat) never start git

    git_dir, common_dir, toplevel = location.discover(cwd, inherit_location=inherit_location)
    return RepoPaths(Path(git_dir), Path(common_dir), Path(toplevel) if toplevel else None)


#: environment that changes how git finds a repository: find_by_files leaves those cases to git
_GIT_LOCATION_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                     "GIT_DISCOVERY_ACROSS_FILESYSTEM")


def find_by_files(cwd: str | os.PathLike[str] | None = None) -> RepoPaths | None:
    """The repository containing ``cwd`` found the way git finds it, by reading files, without starting git;
    None whenever anything is unusual (then :func:`discover` asks git): git's location variables set, no
    ``.git`` on this filesystem, ``cwd`` inside a git dir, a ``.git`` that is neither a directory nor a
    ``gitdir:`` file, or a work tree or git dir owned by another user (git's safe.directory check)."""
    if any(v in os.environ for v in _GIT_LOCATION_ENV) or not hasattr(os, "getuid"):
        return None
    try:
        start = os.path.abspath(cwd if cwd is not None else os.getcwd())
        top, dev = start, os.stat(start).st_dev
        while not os.path.lexists(os.path.join(top, ".git")):
            parent = os.path.dirname(top)
            if parent == top or os.stat(parent).st_dev != dev:
                return None
            top = parent
        git_dir = _git_dir_of(os.path.join(top, ".git"))
        if git_dir is None or not os.path.isfile(os.path.join(git_dir, "HEAD")):
            return None
        if os.path.commonpath([start, git_dir]) == git_dir:
            return None  # inside the git dir: git has no work tree there
        uid = os.getuid()
        if os.stat(top).st_uid != uid or os.stat(git_dir).st_uid != uid:
            return None
        try:
            with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as fh:
                pointer = fh.read().strip()
        except FileNotFoundError:
            pointer = ""
        common = os.path.normpath(os.path.join(git_dir, pointer)) if pointer else git_dir
    except (OSError, ValueError):
        return None
    return RepoPaths(Path(git_dir), Path(common), Path(top))


def _git_dir_of(dot_git: str) -> str | None:
    """``.git`` itself when it is a directory, the target of its ``gitdir: <path>`` line when it is a file."""
    if os.path.isdir(dot_git) and not os.path.islink(dot_git):
        return dot_git
    if not os.path.isfile(dot_git) or os.path.islink(dot_git):
        return None
    with open(dot_git, encoding="utf-8") as fh:
        line = fh.readline().strip()
    if not line.startswith("gitdir: "):
        return None
    return os.path.normpath(os.path.join(os.path.dirname(dot_git), line[len("gitdir: "):]))


def stop_request_path(git_dir: str | os.PathLike[str]) -> Path:
    """``<git-dir>/nerve/stop-request``: a stop the run drained while its agent runs in this worktree; the
    agent CLI's notes hook (`git nerve notes --hook`) answers it by ending the agent at its next safe point."""
    return Path(git_dir) / "nerve" / "stop-request"


__all__ = ["RepoPaths", "discover", "find_by_files", "stop_request_path", "ensure_local_filesystem", "filesystem_type", "make_dirs", "create_file", "replace_file", "GitError"]
