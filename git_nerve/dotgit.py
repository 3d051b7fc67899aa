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
        try:
            with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as fh:
                pointer = fh.read().strip()
        except FileNotFoundError:
            pointer = ""
        common = os.path.normpath(os.path.join(git_dir, pointer)) if pointer else git_dir
    except (OSError, ValueError):
        return None
    return git_dir, common, top


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
