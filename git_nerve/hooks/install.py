"""Installing git-nerve's hooks beside the hooks a repository already has.

The hooks go where git really looks: ``git rev-parse --git-path hooks``,
which honours ``core.hooksPath`` (set by husky and the like; a relative one
is resolved from the worktree's top, as git does) and is otherwise the common
dir's ``hooks/``, shared by every worktree.

Each hook is a copy of the one shim (top-level ``hooks/git-nerve-hook``,
shipped as ``git_nerve/hooks/shims/git-nerve-hook``) with the installing
interpreter and package location written in. A hook that is not ours is
never lost: it is renamed ``<hook>.nerve-chained`` (same inode, so the same
bytes and mode) and the shim runs it first. Uninstalling renames it back.
Installing again only refreshes our shims.

This module holds ``install`` and re-exports the names other modules use from
``git_nerve.hooks.install``; the parts live beside it: :mod:`.shim` (the shim,
reading and writing hook files), :mod:`.where` (which directory, core.hooksPath),
:mod:`.managers` (other tools' hooks, kept and chained hooks, git-lfs),
:mod:`.report` (what an install or uninstall did), :mod:`.uninstall`, :mod:`.status`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import UsageError
from ..git import config as gitconfig
from ..git import destroy
from ..paths import RepoPaths
from .managers import (
    LFS_HOOK,
    LFS_HOOKS,
    MANAGERS,
    _lfs_chained,
    _next_kept,
    displaced_copies,
    kept_hooks,
    lfs_configured,
    manager_of,
)
from .report import HookChange, InstallReport
from .shim import (
    CHAINED_SUFFIX,
    FORWARDED,
    HOOKS,
    MARKER,
    TEMPLATE,
    WORKTREE_HOOKS,
    _fs_error,
    _read,
    _same_file_content,
    _write_executable,
    is_ours,
    package_root,
    recorded,
    remove_dead_temporaries,
    render,
)
from .status import HookStatus, Status, installed, status
from .uninstall import uninstall
from .where import (
    _git_env,
    _notes,
    chains_us,
    _worktree_hooks_dir,
    forward_dir,
    hooks_dir,
    hooks_path_setting,
    not_this_repositorys,
    shared_outside,
    shared_setting,
    tracked_hooks,
)


def install(paths: RepoPaths) -> InstallReport:
    """Install (or refresh) the hooks, keeping and chaining any hook that is not ours.

    Idempotent. Refuses (UsageError, nothing written) a hooks directory that is not this repository's
    (:func:`not_this_repositorys`). A hook another tool put over ours is kept and chained too;
    our shim another tool renamed and still runs (pre-commit's ``.legacy``)
    is refreshed where it is. In a worker's worktree under a relative
    core.hooksPath the hooks go to the worktree's git dir (:func:`forward_dir`).
    With git-lfs set up, its hooks are chained where they are missing.
    """
    forward = forward_dir(paths)
    if forward is not None:
        return _install_worktree(paths, forward)
    why = not_this_repositorys(paths) or tracked_hooks(paths)
    if why:
        raise UsageError(f"not installed: {why}")
    directory = hooks_dir(paths)
    setting = hooks_path_setting(paths)
    report = InstallReport(directory, setting, sys.executable or None, notes=_notes(paths, directory, setting))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _fs_error("create the hooks directory", directory, exc) from exc
    remove_dead_temporaries(directory)
    lfs = lfs_configured(paths)
    for name in HOOKS:
        change = _install_one(directory, name, render(hook=name))
        if lfs and name in LFS_HOOKS and not _lfs_chained(directory, name):
            kept = _next_kept(directory, name)
            try:
                _write_executable(kept, LFS_HOOK.format(name=name).encode())
            except OSError as exc:
                raise _fs_error("chain git-lfs's hook as", kept, exc) from exc
            change.chained = change.chained or kept.name
            change.message = (change.message + "; " if change.message else "") + f"chained git-lfs's {name} hook as {kept.name}"
        report.hooks.append(change)
    return report


def install_missing(paths: RepoPaths, config=None) -> list[str] | None:
    """The installer the commands hand to ``worker.lifecycle`` (``Repo.hook_installer``): None when the hooks
    are installed already, else install them and return what could not be (empty: all installed). ``config``:
    the worktree's ``git config --list`` when the caller has it (the check then asks git less: where.py)."""
    if installed(paths, config):
        return None
    report = install(paths)
    return [c.message or f"{c.name}: not installed" for c in report.conflicts]


def _install_one(directory: Path, name: str, shim: bytes) -> HookChange:
    path = directory / name
    try:
        if os.path.isfile(path) and not is_ours(path) and chains_us(path):
            return HookChange(name, "unchanged", None, f"{name} runs git-nerve's part itself (git nerve hook-run)")
        if os.path.lexists(path) and not is_ours(path):
            manager = manager_of(path)
            legacy = [p for p in displaced_copies(directory, name) if manager and manager[3] and p.name == name + manager[2]]
            if legacy:
                # pre-commit runs our shim as <name>.legacy: refresh it there
                target = legacy[0]
                action = "unchanged" if _read(target) == shim and os.access(target, os.X_OK) else "updated"
                if action == "updated":
                    _write_executable(target, shim)
                kept = kept_hooks(directory, name)
                return HookChange(name, action, kept[0].name if kept else None,
                                  f"{manager[0]} runs it as {target.name}")
            same = [k for k in kept_hooks(directory, name) if _same_file_content(path, k)]
            if same:
                kept_path = same[0]  # the same hook again: it takes the place of its identical kept copy
                os.replace(path, kept_path)
            else:
                kept_path = _next_kept(directory, name)
                os.rename(path, kept_path)
            _write_executable(path, shim)
            who = f"{manager[0]}'s hook" if manager else "the existing hook"
            return HookChange(name, "installed", kept_path.name, f"kept {who} as {kept_path.name}; it runs first")
        kept = kept_hooks(directory, name)
        chained = kept[0].name if kept else None
        if not os.path.lexists(path):
            _write_executable(path, shim)
            return HookChange(name, "installed", chained)
        if _read(path) == shim and os.access(path, os.X_OK):
            return HookChange(name, "unchanged", chained)
        _write_executable(path, shim)  # our older shim (is_ours: a regular file), replaced whole
        return HookChange(name, "updated", chained)
    except OSError as exc:
        raise _fs_error("install the hook", path, exc) from exc


def _install_worktree(paths: RepoPaths, forward: str) -> InstallReport:
    directory = _worktree_hooks_dir(paths)
    report = InstallReport(directory, forward, sys.executable or None)
    cwd, env = paths.toplevel, _git_env(paths)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name in FORWARDED:
            path = directory / name
            shim = render(hook=name, forward=forward)
            if _read(path) == shim and os.access(path, os.X_OK):
                action = "unchanged"
            else:
                action = "updated" if os.path.lexists(path) else "installed"
                _write_executable(path, shim)
            if name in HOOKS:
                report.hooks.append(HookChange(name, action, f"{forward}/{name}"))
    except OSError as exc:
        raise _fs_error("install the hooks in", directory, exc) from exc
    if (gitconfig.get_value(cwd, "extensions.worktreeConfig", scope="local", env=env) or "").strip() != "true":
        gitconfig.set_value(cwd, "extensions.worktreeConfig", "true", scope="local", env=env)
    gitconfig.set_value(cwd, "core.hooksPath", os.fspath(directory), scope="worktree", env=env)
    # an older git-nerve wrote its shims into the work tree: take them out
    old = paths.toplevel / forward
    for name in HOOKS:
        if (old / name).is_file() and is_ours(old / name):
            destroy.remove_own_file(old / name, within=old, kind="hook-shim")
            kept = kept_hooks(old, name)
            if kept:
                os.rename(kept[0], old / name)
    report.notes.append(
        f"this worker's hooks live in its git dir ({directory}, core.hooksPath set for this worktree only); "
        f"they run {forward}/<hook> first"
    )
    return report


#: the other names modules and tests use from here (kept importable as before the split)
_ALSO = (MANAGERS, MARKER, TEMPLATE, WORKTREE_HOOKS, package_root, recorded, shared_outside, shared_setting,
         FORWARDED, LFS_HOOK, LFS_HOOKS, displaced_copies, lfs_configured, manager_of, remove_dead_temporaries,
         forward_dir, not_this_repositorys, hooks_path_setting, tracked_hooks)

__all__ = [
    "install_missing",
    "CHAINED_SUFFIX",
    "HOOKS",
    "HookChange",
    "HookStatus",
    "InstallReport",
    "Status",
    "hooks_dir",
    "install",
    "installed",
    "is_ours",
    "render",
    "status",
    "uninstall",
]
