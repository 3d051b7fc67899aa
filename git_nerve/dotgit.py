"""Finding the repository that contains a directory the way git finds it, by reading git's own files, without
starting git. Floor 0: ``os`` only, nothing of git_nerve (the warm reader's client, :mod:`git_nerve.warm.client`,
runs it before anything else is imported; :func:`git_nerve.paths.find_by_files` wraps it for the heartbeat and
`knowledge query`).
"""

from __future__ import annotations

import os

#: environment that changes how git finds a repository: :func:`locate` leaves those cases to git
LOCATION_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                "GIT_DISCOVERY_ACROSS_FILESYSTEM")


def locate(cwd: str | None = None) -> tuple[str, str, str] | None:
    """(git dir, common dir, top of the work tree) of the repository containing ``cwd`` (default: the current
    directory), or None whenever anything is unusual (then git must be asked): git's location variables set, no
    ``.git`` on this filesystem, ``cwd`` inside a git dir, a ``.git`` that is neither a directory nor a ``gitdir:``
    file, or a work tree or git dir owned by another user (git's safe.directory check)."""
    if any(v in os.environ for v in LOCATION_ENV) or not hasattr(os, "getuid"):
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
        common = _common_of(git_dir)
    except (OSError, ValueError):
        return None
    return git_dir, common, top


def _common_of(git_dir: str) -> str:
    """The common dir of ``git_dir``: where its ``commondir`` file points (a linked worktree's), else itself."""
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as fh:
            pointer = fh.read().strip()
    except FileNotFoundError:
        pointer = ""
    return os.path.normpath(os.path.join(git_dir, pointer)) if pointer else git_dir


def main_checkout(common_dir, here=None):
    """The main checkout (git's main worktree) of the repository whose common dir is ``common_dir``, as a Path, or
    None when there is none (a bare repository) or it cannot be told. Read from git's own files, no git process:

    * ``core.worktree`` in the common dir's config (a submodule's, a git dir kept apart by hand): that directory,
      relative to the common dir;
    * ``core.bare`` true: None;
    * a common dir named ``.git``: its parent (git's own rule, ``git worktree list``'s first entry);
    * else the git dir stands apart from its checkout (``git init --separate-git-dir``): nothing in it names the
      checkout (``git worktree list`` names the git dir itself), so the checkout ``here`` (default: the one the
      current directory is in) answers when its ``.git`` leads straight to ``common_dir`` (it is the main
      worktree); from a linked worktree of such a repository it cannot be told: None.

    A path that is ``here`` is returned as ``here`` spells it (absolute), else resolved."""
    from pathlib import Path  # here: the warm reader's client imports this module before anything else

    common = os.path.realpath(os.fspath(common_dir))
    core = _core_config(os.path.join(common, "config"))
    if core.get("worktree"):
        found = os.path.realpath(os.path.join(common, core["worktree"]))
    elif core.get("bare", "").lower() in ("true", "yes", "on", "1"):
        return None
    elif os.path.basename(common) == ".git":
        found = os.path.dirname(common)
    else:
        top = _checkout_of(here)
        if top is None or os.path.realpath(top[0]) != common:
            return None
        found = os.path.realpath(top[1])
    if here is not None and os.path.realpath(here) == found:
        return Path(os.path.abspath(here))
    return Path(found)


def common_dir_of(top) -> str | None:
    """The common dir of the repository whose checkout is ``top`` (``top/.git`` read, never a parent's: git's
    location variables ignored, the caller names the checkout), None when ``top`` holds no usable ``.git``."""
    try:
        git_dir = _git_dir_of(os.path.join(os.fspath(top), ".git"))
        return _common_of(git_dir) if git_dir is not None else None
    except (OSError, ValueError):
        return None


def _checkout_of(here) -> tuple[str, str] | None:
    """(git dir, top) of the checkout ``here`` is in (the nearest ``.git`` up from it read, git's location variables
    ignored: the caller names the place), or of the current directory's (:func:`locate`), None when unusual."""
    if here is None:
        found = locate()
        return (found[0], found[2]) if found is not None else None
    top = os.path.abspath(here)
    try:
        while not os.path.lexists(os.path.join(top, ".git")):
            if os.path.dirname(top) == top:
                return None
            top = os.path.dirname(top)
        git_dir = _git_dir_of(os.path.join(top, ".git"))
    except (OSError, ValueError):
        return None
    return (git_dir, top) if git_dir is not None else None


def _core_config(path: str) -> dict[str, str]:
    """``[core]``'s keys (lower-cased) as written in the git config file ``path`` (its last value each; quotes and
    comments as git reads them; includes not followed: {} when unreadable)."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return out
    section = ""
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):
            head, _, line = line[1:].partition("]")
            section = head.strip().lower()
            line = line.strip()
            if not line:
                continue
        if section != "core" or not line or line[0] in "#;":
            continue
        name, eq, value = line.partition("=")
        out[name.strip().lower()] = _config_value(value) if eq else "true"
    return out


def _config_value(text: str) -> str:
    """A git config value: comments after ``#``/``;`` outside quotes dropped, quotes removed, escapes read."""
    out, quoted, i = [], False, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            quoted = not quoted
        elif c in "#;" and not quoted:
            break
        elif c == "\\" and i + 1 < len(text):
            i += 1
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(text[i], text[i]))
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


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


def head(git_dir: str, common_dir: str) -> str | None:
    """The commit HEAD names, read from git's files without a git process (as the hook shim reads it): a detached
    HEAD, a loose ref or a packed one; None whenever the files do not say (reftable, a symbolic ref chain, an
    unborn branch): the caller then knows nothing, never something wrong."""
    try:
        with open(os.path.join(git_dir, "HEAD"), encoding="utf-8") as fh:
            head = fh.readline().strip()
    except OSError:
        return None
    if not head.startswith("ref: "):
        return head if _is_sha(head) else None
    ref = head[5:]
    for where in (common_dir, git_dir):
        try:
            with open(os.path.join(where, ref), encoding="utf-8") as fh:
                sha = fh.readline().strip()
            return sha if _is_sha(sha) else None
        except OSError:
            continue
    try:
        with open(os.path.join(common_dir, "packed-refs"), encoding="utf-8") as fh:
            for line in fh:
                sha, _, name = line.rstrip("\n").partition(" ")
                if name == ref:
                    return sha if _is_sha(sha) else None
    except OSError:
        pass
    return None


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
