"""Where a repository's parts are, as ``git rev-parse`` says: git dir, common dir, top level, ``--git-path``.

Standard library only (hooks and the shell completion ask it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import GitError, UsageError
from . import cli


def discover(cwd, *, inherit_location: bool = False) -> tuple[str, str, str | None]:
    """(git dir, common dir, top level or None in a bare repository), absolute.

    UsageError outside a repository; GitError with git's fix when git refuses one owned by another user."""
    base = ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]
    proc = cli.run([*base, "--show-toplevel"], cwd=cwd, inherit_location=inherit_location, check=False)
    if proc.returncode == 0:
        git_dir, common_dir, toplevel = proc.stdout.splitlines()[:3]
        return git_dir, common_dir, toplevel
    proc = cli.run(base, cwd=cwd, inherit_location=inherit_location, check=False)
    if proc.returncode != 0:
        where = os.fspath(cwd) if cwd else os.getcwd()
        if "dubious ownership" in proc.stderr:  # git's real cause, not "not a repository"
            raise GitError(cli.dubious_ownership_message(proc.stderr))
        raise UsageError(f"not a git repository: {where}")
    git_dir, common_dir = proc.stdout.splitlines()[:2]
    return git_dir, common_dir, None


def git_path(cwd, name: str, *, env: Mapping[str, str] | None = None, check: bool = True) -> str:
    """``git rev-parse --path-format=absolute --git-path NAME``; "" when git fails and not ``check``."""
    proc = cli.run(["rev-parse", "--path-format=absolute", "--git-path", name], cwd=cwd, env=env, check=check)
    return proc.stdout.rstrip("\n") if proc.returncode == 0 else ""


def absolute_git_dir_and_common_dir(cwd) -> tuple[str, str] | None:
    """(``--absolute-git-dir``, ``--git-common-dir`` as git prints it, maybe relative to ``cwd``); None outside
    a repository."""
    proc = cli.run(["rev-parse", "--absolute-git-dir", "--git-common-dir"], cwd=cwd, check=False)
    lines = proc.stdout.splitlines() if proc.returncode == 0 else []
    return (lines[0], lines[1]) if len(lines) >= 2 else None


def common_dir(cwd, *, inherit_location: bool = False, timeout: float | None = None) -> str | None:
    """``git rev-parse --path-format=absolute --git-common-dir``; None when git cannot tell."""
    proc = cli.run(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=cwd, check=False,
                   inherit_location=inherit_location, timeout=timeout)
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def linked_git_dir(worktree) -> Path:
    """The git dir of a worktree ``git worktree add`` made, from its ``.git`` file (``gitdir: <path>``, resolved
    as git does) without a git process; anything else (a main worktree's ``.git`` directory) asks git."""
    worktree = Path(worktree)
    try:
        text = (worktree / ".git").read_text(encoding="utf-8")
    except OSError:
        text = ""
    if text.startswith("gitdir: "):
        found = (worktree / text[len("gitdir: "):].strip()).resolve()  # an absolute path stays itself
        if (found / "commondir").is_file() and (found / "HEAD").is_file():
            return found
    return Path(cli.out(["rev-parse", "--path-format=absolute", "--git-dir"], cwd=worktree))
