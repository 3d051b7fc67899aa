"""Files git-nerve writes, floor 0: the names of its files, the modes it creates them with, atomic
replacement, and the local-filesystem check. Standard library only (hooks and heartbeat load it), and
nothing of git_nerve but :mod:`errors` and :mod:`filedoor` (a marker is removed through the door), so ``git/``,
``bus/`` and everything above may use it.
:mod:`git_nerve.paths` re-exports these for its callers.
"""

from __future__ import annotations

import os
from pathlib import Path

NERVE = "nerve"
BUS_FILE = "bus.db"
CTX_FILE = ".worker-ctx.json"


# -- creating files ---------------------------------------------------------

#: Modes for what git-nerve creates under ``<git-common-dir>/nerve/`` (and a worktree's ``<git-dir>/nerve/``):
#: its owner's only, whatever the umask, so in a group-shared git dir (`git init --shared=group`, umask 002)
#: no other user reads, plants or replaces a socket, lock or record of ours (issue 35).
DIR_MODE = 0o700
FILE_MODE = 0o600


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
    """``os.open`` with :data:`FILE_MODE` (minus the umask) and ``O_NOFOLLOW`` (a symbolic link planted at one of
    git-nerve's names is never followed to create or append to its target: the open fails); returns the descriptor."""
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)


def replace_file(path: str | os.PathLike[str], data: bytes | str, *, tmp_name: str | None = None,
                 create_mode: int = FILE_MODE, mode: int | None = None, keep_mode: bool = False, lock: bool = False,
                 before_replace=None) -> None:
    """Write ``data`` (str: UTF-8) to a temporary beside ``path``, then rename it over ``path``, so a reader
    sees the old content or the new, never half of it. The one "write a temporary, then replace" of the package.

    ``tmp_name``: the temporary's name in ``path``'s directory (default ``.<name>.<pid>.tmp``), for callers whose
    leftovers a cleanup finds by name; ``create_mode``: the temporary is created with it minus the umask;
    ``mode``: then set exactly (chmod); ``keep_mode``: the replaced file's own mode is kept; ``lock``: an flock
    is held on the temporary while it exists (the kernel drops it when we die: :func:`..git.destroy.remove_dead_temporaries`);
    ``before_replace``: called between the write and the rename (a crash point). On any failure the temporary is
    removed and the error raised. The temporary is always created new (:func:`_create_temporary`).
    """
    path = Path(path)
    tmp = path.with_name(tmp_name or f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, str):
        data = data.encode("utf-8")
    if keep_mode and mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = None
    fd = -1
    try:
        fd, tmp = _create_temporary(tmp, create_mode)
        if lock:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if mode is not None:
            os.chmod(tmp, mode)
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:  # only the temporary this call created: never what was at its name before
            tmp.unlink(missing_ok=True)
        raise
    finally:
        if fd >= 0:
            os.close(fd)


def _create_temporary(tmp: Path, create_mode: int) -> tuple[int, Path]:
    """Create ``tmp`` new (``O_EXCL | O_NOFOLLOW``: a link or a file planted at the name is never written through,
    truncated or removed); when something is at the name already (a killed writer's leftover, or planted), a
    name of its own beside it instead, and what was there is kept."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(tmp, flags, create_mode), tmp
    except FileExistsError:
        import secrets

        other = tmp.with_name(f"{tmp.name}.{secrets.token_hex(4)}")
        return os.open(other, flags, create_mode), other


# -- markers: files whose existence is the message -------------------------------------------

#: ``<git-common-dir>/nerve/notes-pending/<task>``: the notes hook of the task's agent has something to do
#: (a note or a stop queued, a delivery not yet acted on); its sh gate starts Python only when the file exists.
NOTES_PENDING = "notes-pending"


def notes_marker(nerve_dir: str | os.PathLike[str], task_id: str) -> Path:
    """The notes-pending marker of ``task_id`` (a validated task id: a plain file name), named by its key (task
    ids are unique without regard to case, and however a caller spelled it, the writer and the gate agree)."""
    return Path(nerve_dir) / NOTES_PENDING / task_id.casefold()


def set_marker(path: str | os.PathLike[str]) -> None:
    """Make the marker ``path`` exist (one ``open(O_CREAT)``: atomic; its content is empty and never read)."""
    path = Path(path)
    try:
        fd = create_file(path, os.O_WRONLY | os.O_CREAT)
    except FileNotFoundError:
        make_dirs(path.parent)
        fd = create_file(path, os.O_WRONLY | os.O_CREAT)
    os.close(fd)


def clear_marker(path: str | os.PathLike[str]) -> str | None:
    """Make the notes-pending marker ``path`` absent, through the door (:mod:`.filedoor`: a regular file of its name
    in its own directory; a link or a directory planted there is kept). None, or the line saying what was kept."""
    from .filedoor import keep_or_remove

    return keep_or_remove(path, within=Path(path).parent, kind="notes-pending")


#: the temporaries of a locked :func:`replace_file` whose name is ``.<name>.nerve-<pid>.tmp`` (the hook installer's)
#: the pattern (a string: ``re.match`` compiles it when a removal first needs it, not every command that imports this)
_LOCKED_TEMPORARY = r"^\.(?P<name>[^/]+)\.nerve-(?P<pid>\d+)\.tmp$"


def locked_tmp_name(path: str | os.PathLike[str]) -> str:
    """``.<name>.nerve-<pid>.tmp``: the name :func:`..git.destroy.remove_dead_temporaries` recognises."""
    return f".{Path(path).name}.nerve-{os.getpid()}.tmp"


# -- network filesystems ----------------------------------------------------

NETWORK_FS = {
    "nfs", "nfs4", "cifs", "smb", "smbfs", "smb3", "ncpfs", "afs", "9p",
    "fuse.sshfs", "sshfs", "glusterfs", "fuse.glusterfs", "lustre", "ceph", "fuse.ceph",
    "gpfs", "davfs", "fuse.davfs2", "fuse.s3fs", "fuse.rclone", "fuse.gcsfuse", "virtiofs",
}


def file_id(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, None when there is none: which file a long-lived process opened,
    whatever path leads to it now (the listener's and the warm reader's "is my clone still there")."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


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
