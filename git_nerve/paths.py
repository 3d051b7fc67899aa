"""Where things live. Standard library only (hooks and heartbeat load it).

* ``<git-common-dir>/nerve/bus.db``: the bus, shared by every worktree.
* ``<git-dir>/nerve/.worker-ctx.json``: one worktree's task context.
* ``<git-dir>/nerve/knowledge.db``: one worktree's knowledge index.

The common dir comes from ``git rev-parse --git-common-dir`` (never by
joining ".git" onto a path), so linked worktrees, ``GIT_DIR`` and
submodule layouts all resolve the way git resolves them.
"""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

from .errors import GitError, UsageError
from .git import cli

NERVE = "nerve"
BUS_FILE = "bus.db"
CTX_FILE = ".worker-ctx.json"


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
    base = ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]
    proc = cli.run([*base, "--show-toplevel"], cwd=cwd, inherit_location=inherit_location, check=False)
    toplevel: str | None = None
    if proc.returncode == 0:
        git_dir, common_dir, toplevel = proc.stdout.splitlines()[:3]
    else:
        proc = cli.run(base, cwd=cwd, inherit_location=inherit_location, check=False)
        if proc.returncode != 0:
            where = os.fspath(cwd) if cwd else os.getcwd()
            if "dubious ownership" in proc.stderr:  # git's real cause, not "not a repository"
                raise GitError(cli.dubious_ownership_message(proc.stderr))
            raise UsageError(f"not a git repository: {where}")
        git_dir, common_dir = proc.stdout.splitlines()[:2]
    return RepoPaths(Path(git_dir), Path(common_dir), Path(toplevel) if toplevel else None)


# -- creating files ---------------------------------------------------------

#: Modes for what git-nerve creates under ``<git-common-dir>/nerve/``: the umask
#: still applies (022 gives 755/644, 077 gives 700/600), but even under umask
#: 000 nothing is world-writable.
DIR_MODE = 0o775
FILE_MODE = 0o664


def make_dirs(path: str | os.PathLike[str]) -> Path:
    """``mkdir -p`` whose every new directory gets :data:`DIR_MODE` minus the umask."""
    p = Path(path)
    missing = []
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not d.is_dir():
                raise
    return Path(path)


def create_file(path: str | os.PathLike[str], flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> int:
    """``os.open`` with :data:`FILE_MODE` (minus the umask); returns the descriptor."""
    return os.open(path, flags, FILE_MODE)


def replace_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` beside ``path`` (``.<name>.<pid>.tmp``), then rename it over ``path``,
    so a reader sees the old content or the new, never half of it."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with os.fdopen(create_file(tmp), "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- network filesystems ----------------------------------------------------

NETWORK_FS = {
    "nfs", "nfs4", "cifs", "smb", "smbfs", "smb3", "ncpfs", "afs", "9p",
    "fuse.sshfs", "sshfs", "glusterfs", "fuse.glusterfs", "lustre", "ceph", "fuse.ceph",
    "gpfs", "davfs", "fuse.davfs2", "fuse.s3fs", "fuse.rclone", "fuse.gcsfuse", "virtiofs",
}


def filesystem_type(path: str | os.PathLike[str], mounts_file: str = "/proc/mounts") -> str | None:
    """The filesystem type of the mount holding ``path`` (Linux), else None."""
    try:
        with open(mounts_file, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    best, best_type = "", None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, best_type = mnt, parts[2]
    return best_type


def ensure_local_filesystem(path: str | os.PathLike[str]) -> None:
    """Refuse a directory on a network filesystem, where SQLite's WAL is unsafe."""
    fstype = filesystem_type(path)
    if fstype and fstype.lower() in NETWORK_FS and not os.environ.get("NERVE_ALLOW_NETWORK_FS"):
        from .errors import DatabaseError

        raise DatabaseError(
            f"{path} is on a network filesystem ({fstype}); SQLite's WAL mode is unsafe there. "
            "Keep the repository on a local disk (or set NERVE_ALLOW_NETWORK_FS=1 if only one machine ever uses it)."
        )


def stop_request_path(git_dir: str | os.PathLike[str]) -> Path:
    """``<git-dir>/nerve/stop-request``: a stop the run drained while its agent runs in this worktree; the
    agent CLI's notes hook (`git nerve notes --hook`) answers it by ending the agent at its next safe point."""
    return Path(git_dir) / "nerve" / "stop-request"


__all__ = ["RepoPaths", "discover", "stop_request_path", "ensure_local_filesystem", "filesystem_type", "make_dirs", "create_file", "replace_file", "GitError"]
