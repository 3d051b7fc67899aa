"""The proofs the door (:mod:`.destroy`) makes before it removes a path: what the repository is (:class:`Scope`),
whether a path is git-nerve's own to remove (:func:`prove_path`), what a worktree's admin dir names (its
``gitdir`` file, verified). They remove nothing; every removal they guard is in :mod:`.destroy`, which
re-exports them (its callers name them there).

* a path: made absolute and resolved (symlinks followed), it lies strictly under the task worktree root or
  git-nerve's temporary directory ``<common>/nerve/tmp/``; it is never the main checkout, the common git dir or
  a parent of either, never the current directory or a parent of it, never a live task's worktree but the one
  being removed; a task worktree is removed only when a record names it (an ownership record,
  :mod:`.ownership`, or the task's worker row, passed in the scope).
* a path read from a file (a worktree's ``gitdir``): never empty, never truncated (it must name a ``.git``);
  a relative one is resolved against the file's own directory, never the process's.

Standard library only (repairs and hooks reach it through the door).
"""

from __future__ import annotations

import os
import stat
from collections import namedtuple
from pathlib import Path

from ..filedoor import Refused
from .ownership import recorded

#: temporary checkouts, under the common dir (see worktrees.tmp_root)
TMP_DIR = ("nerve", "tmp")


class Scope(namedtuple("Scope", ["common", "main", "worktree_root", "owners", "live"])):  # typing's costs more
    """What a proof needs to know about the repository (built once per command by the worker layer).

    ``common`` (Path), ``main`` (Path | None), ``worktree_root`` (Path); ``owners``: realpath of every worker row's
    worktree -> its task id; ``live``: those of rows in a non-final state (frozenset).
    """

    __slots__ = ()

    @property
    def tmp_root(self) -> Path:
        return self.common.joinpath(*TMP_DIR)


def tmp_scope(common: Path) -> Scope:
    """A scope that proves only temporary checkouts under ``<common>/nerve/tmp/`` (no task worktree qualifies)."""
    return scope(common, None, Path(common).joinpath(*TMP_DIR))


def scope(common: Path, main: Path | None, worktree_root: Path, rows=()) -> Scope:
    """``rows``: (task_id, worktree, live?) for every worker row."""
    owners, live = {}, set()
    for task, worktree, alive in rows:
        real = os.path.realpath(worktree)
        owners[real] = task
        if alive:
            live.add(real)
    return Scope(Path(os.path.realpath(common)), Path(os.path.realpath(main)) if main is not None else None,
                 Path(os.path.realpath(worktree_root)), owners, frozenset(live))


# -- proofs ---------------------------------------------------------------------------------------------------


def _under(path: str, root: str | Path) -> bool:
    """``path`` strictly inside ``root`` (both resolved)."""
    root = os.fspath(root).rstrip(os.sep) or os.sep
    return path != root and path.startswith(root if root.endswith(os.sep) else root + os.sep)


def _at_or_above(path: str, other: str | Path) -> bool:
    """``path`` is ``other`` or one of its parents."""
    other = os.fspath(other)
    return other == path or _under(other, path)


def prove_path(path, sc: Scope, *, task: str | None = None, kind: str = "worktree", git_removes: bool = False) -> str:
    """The resolved ``path`` when it is git-nerve's own to remove, else :class:`Refused` saying why.

    ``task``: the task whose worktree this is (its worker row or a record must name the path).
    ``git_removes``: ``git worktree remove`` will remove it (git checks it is a worktree): then a task's
    worktree its worker row names may hold the current directory (`merge` run inside the task's worktree).
    """
    raw = os.fspath(path)
    if not raw or not os.path.isabs(raw):
        raise Refused(f"kept {raw or '(empty path)'!s}: not an absolute path")
    if os.path.islink(raw):
        raise Refused(f"kept {raw}: it is a symbolic link")
    real = os.path.realpath(raw)
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        cwd = None
    if real == os.sep:
        raise Refused(f"kept {raw}: it is the root directory")
    if sc.main is not None and _at_or_above(real, sc.main):
        raise Refused(f"kept {raw}: it is the main checkout {sc.main} or a parent of it")
    if _at_or_above(real, sc.common):
        raise Refused(f"kept {raw}: it is the git dir {sc.common} or a parent of it")
    if cwd is not None and _at_or_above(real, cwd) and not (git_removes and task and sc.owners.get(real) == task):
        raise Refused(f"kept {raw}: it is the current directory or a parent of it")
    if _under(real, sc.tmp_root):
        if os.path.dirname(real) != os.fspath(sc.tmp_root):
            raise Refused(f"kept {raw}: not a temporary checkout directly under {sc.tmp_root}")
        return real
    if _under(real, sc.common):
        raise Refused(f"kept {raw}: it is inside the git dir {sc.common}")
    if not _under(real, sc.worktree_root):
        raise Refused(f"kept {raw}: it is outside the worktree root {sc.worktree_root} and {sc.tmp_root}")
    for parent in (sc.worktree_root, sc.common, sc.main):
        if parent is not None and (os.fspath(parent) == os.sep):
            raise Refused(f"kept {raw}: the worktree root is the root directory")
    holder = sc.owners.get(real)
    if real in sc.live and holder != task:
        raise Refused(f"kept {raw}: it is the worktree of the live task {holder}")
    rec = recorded(sc.common, kind, real)
    if task is None or not (holder == task or (rec is not None and rec.get("task") == task)):
        raise Refused(f"kept {raw}: no record says git-nerve made it" + (f" for {task}" if task else ""))
    return real


def worktree_of_gitdir(admin: Path) -> str:
    """The worktree a git admin dir (``<common>/worktrees/<name>``) names in its ``gitdir`` file, verified: the
    file is non-empty and names a ``.git`` (a relative one is resolved against the admin dir); else :class:`Refused`."""
    try:
        text = (Path(admin) / "gitdir").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Refused(f"kept {admin}: its gitdir file cannot be read ({exc.__class__.__name__})") from None
    named = text.strip("\n")
    if not named.strip():
        raise Refused(f"kept {admin}: its gitdir file is empty (git had not written it)")
    if not os.path.isabs(named):
        named = os.path.normpath(os.path.join(os.fspath(admin), named))
    if os.path.basename(named) != ".git":
        raise Refused(f"kept {admin}: its gitdir file names {named!r}, not a .git")
    return os.path.dirname(named)


def _prove_admin(admin: Path, sc: Scope) -> str:
    real = os.path.realpath(admin)
    if os.path.islink(admin) or os.path.dirname(real) != os.fspath(sc.common / "worktrees"):
        raise Refused(f"kept {admin}: not an admin dir directly under {sc.common / 'worktrees'}")
    return real


def _half_written_gitfile(dotgit: str, admin: Path, real_admin: str) -> bool:
    """The worktree's ``.git`` file a killed ``git worktree add`` had created and not yet written whole: a regular
    file holding the start of what git writes there for this admin dir (``gitdir: <admin>``; empty when it was
    killed between creating and writing it), in the worktree that admin dir's own ``gitdir`` names (git writes
    that one first). Anything else at ``.git`` (another git dir's, a directory, a link) is not."""
    try:
        if not stat.S_ISREG(os.lstat(dotgit).st_mode):
            return False
        with open(dotgit, "rb") as fh:
            data = fh.read(8192)
        named = worktree_of_gitdir(admin)
    except (OSError, Refused):
        return False
    if os.path.realpath(os.path.join(named, ".git")) != os.path.realpath(dotgit):
        return False
    wholes = [f"gitdir: {p}\n".encode("utf-8", "surrogateescape")
              for p in (real_admin, os.path.relpath(real_admin, os.path.dirname(os.path.realpath(dotgit))))]
    return any(whole.startswith(data) and len(data) < len(whole) - 1 for whole in wholes)


def _admin_naming(sc: Scope, real: str) -> Path | None:
    """The admin dir under ``<common>/worktrees/`` whose (verified) ``gitdir`` names the worktree ``real``."""
    try:
        admins = sorted((sc.common / "worktrees").iterdir())
    except OSError:
        return None
    for admin in admins:
        try:
            if os.path.realpath(worktree_of_gitdir(admin)) == real:
                return admin
        except Refused:
            continue
    return None
