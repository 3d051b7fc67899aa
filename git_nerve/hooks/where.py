"""Where the hooks go: the directory git runs hooks from (``git rev-parse --git-path hooks``),
``core.hooksPath`` as set and where, a worker's worktree under a relative one (``forward_dir``: its hooks in
its git dir), and whether the directory is this repository's (``not_this_repositorys``, ``shared_outside``).

``config``: the worktree's configuration as ``git config --list`` gave it (``git -c`` and GIT_CONFIG_* included),
read from the same worktree, which a caller holding it passes (spawn's "already installed?" check). With no
core.hooksPath in it at all the answers need no git: the directory is ``<common dir>/hooks`` as git resolves
it (symlinks followed, as ``--path-format=absolute`` does); any core.hooksPath, even an empty one, is left to
git, which alone knows how it reads it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..git import cli, location, tracked
from ..git import config as gitconfig
from ..paths import RepoPaths
from .shim import HOOKS, WORKTREE_HOOKS


def _git_env(paths: RepoPaths) -> dict[str, str]:
    extra = {"GIT_DIR": os.fspath(paths.git_dir)}
    if paths.toplevel is not None:
        extra["GIT_WORK_TREE"] = os.fspath(paths.toplevel)
    return cli.clean_env(extra)


def _unset(config: gitconfig.GitConfig | None, key: str) -> bool:
    """True when ``config`` (given) has no setting of ``key`` at all."""
    return config is not None and not config.get_all(key)


def hooks_dir(paths: RepoPaths, config: gitconfig.GitConfig | None = None) -> Path:
    """The directory git runs hooks from in the worktree ``paths`` describes."""
    if _unset(config, "core.hooksPath"):  # what `git rev-parse --path-format=absolute --git-path hooks` says then
        return Path(os.path.realpath(paths.common_dir / "hooks"))
    cwd = paths.toplevel or paths.git_dir
    return Path(location.git_path(cwd, "hooks", env=_git_env(paths)))


def hooks_path_setting(paths: RepoPaths, config: gitconfig.GitConfig | None = None) -> str | None:
    """``core.hooksPath`` as configured, or None."""
    if config is not None:  # `git config --get`: the last value
        return config.get("core.hooksPath") or None
    return gitconfig.get_value(paths.toplevel or paths.git_dir, "core.hooksPath", env=_git_env(paths)) or None


def _notes(paths: RepoPaths, directory: Path, setting: str | None) -> list[str]:
    notes = []
    if setting is not None and not os.path.isabs(os.path.expanduser(setting)):
        notes.append(
            f"core.hooksPath is relative ({setting}): git resolves it from each worktree's top; "
            "workers' worktrees get hooks of their own (in their git dir) that run these first"
        )
    top = paths.toplevel
    inside_git = any(d == directory or d in directory.parents for d in (paths.git_dir, paths.common_dir))
    if top is not None and (directory == top or top in directory.parents) and not inside_git:
        if not _ignored(paths, directory / HOOKS[0]):
            notes.append(f"the hooks directory {directory} is inside the work tree, so `git status` shows the hook files")
    return notes


def _ignored(paths: RepoPaths, path: Path) -> bool:
    return tracked.is_ignored_no_index(paths.toplevel, path, env=_git_env(paths))


def _config_entries(paths: RepoPaths, key: str) -> list[tuple[str, str]]:
    """(scope, value) of every setting of ``key``, in the order git reads them."""
    return gitconfig.get_all_with_scope(paths.toplevel or paths.git_dir, key, env=_git_env(paths))


def shared_setting(paths: RepoPaths) -> tuple[str | None, str | None]:
    """core.hooksPath as every worktree shares it (not a worktree's own setting): (value, scope)."""
    entries = [(scope, value) for scope, value in _config_entries(paths, "core.hooksPath") if scope != "worktree"]
    if not entries or not entries[-1][1]:
        return None, None
    return entries[-1][1], entries[-1][0]


def _is_worker_worktree(paths: RepoPaths) -> bool:
    from ..context import ctx_path

    if paths.toplevel is None:
        return False
    try:
        linked = not os.path.samefile(paths.git_dir, paths.common_dir)
    except OSError:
        return False
    return linked and ctx_path(paths.git_dir).is_file()


def forward_dir(paths: RepoPaths, config: gitconfig.GitConfig | None = None) -> str | None:
    """The relative core.hooksPath (husky's ``.husky/_``) a worker's worktree forwards to, or None.

    Such a directory is inside the work tree: our hooks there would be files
    ``git status`` and ``git add -A`` see. A worker's worktree keeps its hooks
    in its git dir instead (``<git-dir>/nerve/hooks``, set with ``git config
    --worktree core.hooksPath``) and runs the manager's hook from there first.
    """
    if not _is_worker_worktree(paths) or _unset(config, "core.hooksPath"):
        return None
    value, _ = shared_setting(paths)
    if value and not os.path.isabs(os.path.expanduser(value)):
        return value
    return None


def _worktree_hooks_dir(paths: RepoPaths) -> Path:
    return paths.git_dir.joinpath(*WORKTREE_HOOKS)


def shared_outside(paths: RepoPaths) -> str | None:
    """Why the hooks directory may serve other repositories (an absolute core.hooksPath outside this one), or None."""
    value, scope = shared_setting(paths)
    if not value or not os.path.isabs(os.path.expanduser(value)):
        return None
    directory = Path(os.path.realpath(os.path.expanduser(value)))
    mine = [Path(os.path.realpath(p)) for p in (paths.common_dir, paths.git_dir, paths.toplevel) if p is not None]
    if any(directory == d or d in directory.parents for d in mine):
        return None
    where = {"global": "your global git config", "system": "the system git config"}.get(scope or "", f"the {scope} config")
    return f"core.hooksPath={value} (set in {where}) is outside this repository and may serve other repositories"


def not_this_repositorys(paths: RepoPaths) -> str | None:
    """Why git-nerve must not write into the hooks directory git uses here, or None when it is this repository's.

    The hooks directory is this repository's when it lies inside its git dirs, its work tree or its main
    checkout. Any other (an absolute core.hooksPath in the global or system config, or a local one pointing
    outside, or a relative one leading out of the work tree) may be shared by other repositories: our shims
    there would run in every one of them. The reason names the setting and what to do instead.
    """
    directory = Path(os.path.realpath(hooks_dir(paths)))
    main = paths.common_dir.parent if paths.common_dir.name == ".git" else None
    mine = [Path(os.path.realpath(p)) for p in (paths.common_dir, paths.git_dir, paths.toplevel, main) if p is not None]
    if any(directory == d or d in directory.parents for d in mine):
        return None
    entries = _config_entries(paths, "core.hooksPath")
    scope, value = entries[-1] if entries else ("", "")
    where = {"global": "your global git config", "system": "the system git config"}.get(scope, f"the {scope} git config")
    own = Path(os.path.realpath(paths.common_dir)) / "hooks"
    return (f"core.hooksPath={value} (set in {where}) is the hooks directory {directory}, outside this "
            "repository, which other repositories may share: git-nerve never writes there. Give this repository its "
            f"own: git config --local core.hooksPath {own} (copy into it the hooks of {directory} it needs: "
            "`git nerve hooks install` keeps them running, first), then run this again")


#: the one line a team's committed hook adds to run git-nerve's part of that hook (README "Hooks")
CHAIN_LINE = 'git nerve hook-run {hook} "$@" || exit $?'
#: what marks a hook that is not ours as one running git-nerve's part itself (the line above)
CHAIN_MARK = b"git nerve hook-run"


def chains_us(path: Path) -> bool:
    """True when the hook file ``path``, not one of our shims, runs git-nerve's part itself (:data:`CHAIN_LINE`)."""
    try:
        with open(path, "rb") as fh:
            return CHAIN_MARK in fh.read(1 << 16)
    except OSError:
        return False


def tracked_hooks(paths: RepoPaths) -> str | None:
    """Why git-nerve must not write into the hooks directory git uses here because git tracks files in it (a
    team's committed ``.githooks`` named by core.hooksPath), or None. Our shims there would show in `git status`,
    carry this machine's paths and be published by the next `git add -A`. The reason names the setting and the
    two ways forward."""
    top = paths.toplevel
    setting = hooks_path_setting(paths)
    if top is None or setting is None:
        return None
    directory = Path(os.path.realpath(hooks_dir(paths)))
    top = Path(os.path.realpath(top))
    gits = [Path(os.path.realpath(p)) for p in (paths.git_dir, paths.common_dir)]
    if not (directory == top or top in directory.parents) or any(d == directory or d in directory.parents for d in gits):
        return None
    if all(chains_us(directory / name) for name in HOOKS):
        return None  # the team's hooks run ours: nothing to write
    files = tracked.tracked_under(top, os.fspath(directory), env=_git_env(paths))
    if files == []:
        return None
    what = f"git tracks {files[0]} there" if files else "git cannot tell whether it tracks files there"
    own = Path(os.path.realpath(paths.common_dir)) / "hooks"
    return (f"core.hooksPath={setting} is the hooks directory {directory}, inside the work tree ({what}): git-nerve "
            "never writes into committed files. Either chain git-nerve from the team's hooks: one line, "
            f"`{CHAIN_LINE.format(hook='<hook>')}`, in each of its {', '.join(HOOKS)} there (README \"Hooks\"), "
            f"or give git-nerve a hooks directory of its own outside the work tree: git config --local core.hooksPath {own} (copy the team's hooks into it: install "
            "runs them first), then run this again")
