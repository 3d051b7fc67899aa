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
    def main_checkout(self) -> Path | None:
        """The main checkout, asked from this worktree (:func:`git_nerve.dotgit.main_checkout`); None: bare, or
        a separate git dir's asked from a linked worktree."""
        from .dotgit import main_checkout

        return main_checkout(self.common_dir, self.toplevel)

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


def find_by_files(cwd: str | os.PathLike[str] | None = None) -> RepoPaths | None:
    """The repository containing ``cwd`` found the way git finds it, by reading files, without starting git;
    None whenever anything is unusual (then :func:`discover` asks git): see :func:`git_nerve.dotgit.locate`."""
    from .dotgit import locate

    found = locate(os.fspath(cwd) if cwd is not None else None)
    if found is None:
        return None
    git_dir, common, top = found
    return RepoPaths(Path(git_dir), Path(common), Path(top))


def stop_request_path(git_dir: str | os.PathLike[str]) -> Path:
    """``<git-dir>/nerve/stop-request``: a stop the run drained while its agent runs in this worktree; the
    agent CLI's notes hook (`git nerve notes --hook`) answers it by ending the agent at its next safe point."""
    return Path(git_dir) / "nerve" / "stop-request"


__all__ = ["RepoPaths", "discover", "find_by_files", "stop_request_path", "ensure_local_filesystem", "filesystem_type", "make_dirs", "create_file", "replace_file", "GitError"]
