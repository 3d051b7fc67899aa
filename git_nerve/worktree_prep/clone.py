"""``[worktree] clone_dirs``: large ignored directories (``node_modules``, ``.venv``) brought into a new
worktree as cheaply as the filesystem allows: a copy-on-write clone where it can (Linux: ``cp
--reflink=auto``, which falls back to a copy by itself; macOS: ``cp -c``, APFS clonefile), else a
plain copy (symlinks copied as symlinks, never followed).

The same rules as the copied files: the directory must be ignored by git in the main checkout, must
not be (or pass through) a symlink, must stay inside it, and nothing already in the new worktree is
written over.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..git import tracked as gittracked


def clone_tree(src: Path, dst: Path) -> str:
    """Copy directory ``src`` to the new path ``dst``: "cow" when a clone was asked of the filesystem, "copy"
    otherwise (a failing clone falls back to the copy, after removing nothing but what it made)."""
    import shutil  # here: a spawn without clone_dirs never needs it (start-up)

    if sys.platform.startswith("linux") and shutil.which("cp"):
        if subprocess.run(["cp", "--reflink=auto", "-a", "--", os.fspath(src), os.fspath(dst)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            return "cow"
    elif sys.platform == "darwin":
        if subprocess.run(["cp", "-c", "-R", "-p", "--", os.fspath(src), os.fspath(dst)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
            return "cow"
    if os.path.lexists(dst):
        raise OSError(f"a failed clone left {dst}")
    plain_copy(src, dst)
    return "copy"


def plain_copy(src: Path, dst: Path) -> None:
    import shutil

    shutil.copytree(src, dst, symlinks=True)


def clone_dirs(main: Path, worktree: Path, dirs: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(directories brought over, warnings)."""
    done, warnings = [], []
    main_real, wt_real = os.path.realpath(main), os.path.realpath(worktree)
    for d in dirs:
        rel = d.strip().strip("/")
        why = _refusal(main, worktree, rel, main_real, wt_real)
        if why:
            warnings.append(f"clone_dirs: {d!r} not brought over ({why})")
            continue
        try:
            (worktree / rel).parent.mkdir(parents=True, exist_ok=True)
            clone_tree(main / rel, worktree / rel)
        except OSError as exc:
            warnings.append(f"clone_dirs: {d!r} not brought over ({exc.strerror or exc})")
            continue
        done.append(rel)
    return done, warnings


def _refusal(main: Path, worktree: Path, rel: str, main_real: str, wt_real: str) -> str | None:
    if not rel or os.path.isabs(rel) or ".." in rel.split("/"):
        return "leaves the checkout"
    src = main / rel
    if os.path.islink(src) or not src.is_dir():
        return "not a directory of the main checkout"
    if os.path.realpath(src) != os.path.join(main_real, *rel.split("/")):
        return "its real path leaves the main checkout"
    if not gittracked.is_ignored(main, rel + "/"):
        return "git does not ignore it in the main checkout"
    if os.path.lexists(worktree / rel):
        return "the new worktree already has it"
    if not os.path.realpath(worktree / rel).startswith(wt_real + os.sep):
        return "its place in the new worktree leaves it"
    return None
