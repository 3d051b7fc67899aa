"""`git nerve hooks uninstall`: our shims removed and each kept hook put back as it was (also in a
worker's own hooks directory); a hooks directory other repositories may share only with ``--shared``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError
from ..git import config as gitconfig
from ..git import destroy
from ..paths import RepoPaths
from .managers import displaced_copies, kept_hooks
from .report import HookChange, InstallReport
from .shim import FORWARDED, HOOKS, _fs_error, is_ours
from .where import _git_env, _worktree_hooks_dir, forward_dir, hooks_dir, hooks_path_setting, shared_outside


def uninstall(paths: RepoPaths, *, shared: bool = False) -> InstallReport:
    """Remove our shims and put each kept hook back as it was.

    Refuses (UsageError) a hooks directory outside this repository that may
    serve other repositories (an absolute core.hooksPath) unless ``shared``.
    """
    forward = forward_dir(paths)
    if forward is not None or _worktree_hooks_dir(paths) == hooks_dir(paths):
        return _uninstall_worktree(paths, forward)
    why = shared_outside(paths)
    if why and not shared:
        raise UsageError(f"not uninstalled: {why}; removing git-nerve's hooks there removes them for all of them "
                         "(pass --shared to do it anyway, or point this repository's core.hooksPath elsewhere first)")
    directory = hooks_dir(paths)
    setting = hooks_path_setting(paths)
    report = InstallReport(directory, setting, None)
    for name in HOOKS:
        report.hooks.append(_uninstall_one(directory, name))
    return report


def _uninstall_one(directory: Path, name: str) -> HookChange:
    path = directory / name
    kept = kept_hooks(directory, name)
    try:
        # our shims another tool renamed: put back there what that tool would have kept
        for copy in displaced_copies(directory, name):
            if kept:
                os.replace(kept.pop(0), copy)
            else:
                destroy.remove_own_file(copy, within=directory, kind="hook-shim")
        if os.path.lexists(path) and is_ours(path):
            if kept:
                newest = kept.pop()
                os.replace(newest, path)
                message = f"put back the hook kept as {newest.name}"
                if kept:
                    message += "; still kept (not run any more): " + ", ".join(k.name for k in kept)
                return HookChange(name, "restored", None, message)
            destroy.remove_own_file(path, within=directory, kind="hook-shim")
            return HookChange(name, "removed")
        if os.path.lexists(path):
            message = f"{path} is not git-nerve's; left as it is"
            if kept:
                message += " (and so is " + ", ".join(k.name for k in kept) + ")"
            return HookChange(name, "foreign", kept[0].name if kept else None, message)
        if kept:
            newest = kept.pop()
            os.rename(newest, path)
            return HookChange(name, "restored", None, f"put back the hook kept as {newest.name}")
        return HookChange(name, "absent")
    except OSError as exc:
        raise _fs_error("uninstall the hook", path, exc) from exc


def _uninstall_worktree(paths: RepoPaths, forward: str | None) -> InstallReport:
    directory = _worktree_hooks_dir(paths)
    report = InstallReport(directory, forward, None)
    for name in FORWARDED:
        path = directory / name
        if os.path.lexists(path) and is_ours(path):
            destroy.remove_own_file(path, within=directory, kind="hook-shim")
            if name in HOOKS:
                report.hooks.append(HookChange(name, "removed"))
        elif name in HOOKS:
            report.hooks.append(HookChange(name, "absent"))
    destroy.remove_empty_dirs([directory])  # the worker's own hooks dir install made; kept while anything is in it
    gitconfig.unset(paths.toplevel, "core.hooksPath", scope="worktree", env=_git_env(paths))
    return report
