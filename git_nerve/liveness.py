"""Is the process that made this gone? The one answer for the whole package, without ``/proc``.

Standard library only (``git.cli`` imports it, and hooks import that).

**Alive tokens.** A git-nerve command (``git worker ...``, ``git nerve ...``: :func:`enable`) holds, for each
repository it runs git in, an exclusive ``flock`` on a token file ``<common-dir>/nerve/alive/<id>`` (``<id>`` =
``<pid>-<hex>``). Each git child gets that descriptor (``pass_fds``; git hands it on to its own children), so the
kernel keeps the lock while the command *or any git it started* lives, and drops it when the last of them dies,
however they die, on Linux and macOS alike, in any PID namespace. A token whose lock can be taken
(``LOCK_EX|LOCK_NB``) is **proven dead**; any other answer (held, an error) is "cannot tell", which counts as alive.

Beside the token, **markers** ``<id>.<n>`` say what it is doing right now (JSON, written with ``O_EXCL`` before
the thing starts, removed when it is over), so a dead token says what it left:

* ``{"kind": "git", "git_dir": ..., "add": ..., "argv": [...]}``: a git child running with its cwd in the
  worktree whose git dir is ``git_dir`` (``add``: the path of a ``git worktree add``). The marker's mtime is the
  child's start, on the same filesystem clock as the lock files git makes;
* ``{"kind": "tmp", "path": ...}``: a temporary checkout (``git.worktrees.checkout_at``) that exists until the
  marker goes.

A finished command removes its markers and token (``atexit``); the first command that finds a dead token repairs
what its markers cover and then *consumes* it (removes it): it takes the dead token's lock first, so two repairing
commands never act on one token.

For the rare places that only have a pid, :func:`pid_alive` (``kill(pid, 0)``): pid reuse makes it answer
"alive", the safe side.

Size: one module on purpose. The token, its markers and the scan that judges them are one protocol (the
descriptor handed to git children, the marker written before the thing starts, the dead lock taken before a
repair consumes it); split across modules, each half could be changed without the other and the proof that
"dead" really means dead would no longer be readable in one place.
"""

from __future__ import annotations

import fcntl
import json
import os
import time

ALIVE_DIR = ("nerve", "alive")

_enabled = False
#: realpath of a common dir -> this process's token there
_tokens: dict[str, "_Token"] = {}


def enable() -> None:
    """Take tokens for this process (git-nerve's commands; not hooks, which only read)."""
    global _enabled
    _enabled = True


def alive_dir(common: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(common), *ALIVE_DIR)


# -- this process's token --------------------------------------------------------------------------------


class _Token:
    def __init__(self, directory: str, fd: int, ident: str):
        self.directory, self.fd, self.id = directory, fd, ident
        self.path = os.path.join(directory, ident)
        self._n = 0

    def mark(self, record: dict) -> str | None:
        """Write a marker (None when it cannot be written: then what it covers cannot be proven dead later)."""
        self._n += 1
        path = f"{self.path}.{self._n}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            return None
        try:
            os.write(fd, json.dumps(record).encode())
        except OSError:
            os.close(fd)
            _unlink(path)
            return None
        os.close(fd)
        return path

    def close(self) -> None:
        """A finished command: its markers, then its token (the lock goes with the last descriptor)."""
        prefix = self.id + "."
        try:
            names = os.listdir(self.directory)
        except OSError:
            names = []
        for name in names:
            if name.startswith(prefix):
                _unlink(os.path.join(self.directory, name))
        _unlink(self.path)
        try:
            os.close(self.fd)
        except OSError:
            pass



def _make_dirs(directory: str) -> None:
    """``mkdir -p`` whose new directories get 0o700, its owner's only (``os.makedirs`` gives intermediate ones
    0o777 minus the umask: group-writable in a shared git dir)."""
    missing = []
    d = directory
    while not os.path.isdir(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass

def token(common: str | os.PathLike[str]) -> _Token | None:
    """This process's token in the repository whose common dir is ``common`` (made on first use), or None
    when tokens are not enabled or it cannot be made (a read-only or full ``.git``)."""
    if not _enabled:
        return None
    key = os.path.realpath(common)
    tok = _tokens.get(key)
    if tok is not None:
        return tok
    directory = alive_dir(key)
    ident = f"{os.getpid()}-{time.time_ns() & 0xffffffffffff:x}"
    try:
        _make_dirs(directory)
        fd = os.open(os.path.join(directory, ident), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        _unlink(os.path.join(directory, ident))
        return None
    fd = _low(fd)
    try:  # for people who look: what the token is (nothing is decided from it)
        import sys

        os.write(fd, json.dumps({"pid": os.getpid(), "started": time.time(), "argv": sys.argv[:4]}).encode())
    except OSError:
        pass
    tok = _tokens[key] = _Token(directory, fd, ident)
    if len(_tokens) == 1:
        import atexit

        atexit.register(_close_all)
    return tok


def _low(fd: int) -> int:
    """The descriptor moved to a free number 3-9 when there is one: the hook shim (/bin/sh, which names only
    descriptors 0-9) closes it before it leaves a process running in the background (``NERVE_ALIVE_FD``)."""
    if fd <= 9:
        return fd
    for low in range(3, 10):
        try:
            fcntl.fcntl(low, fcntl.F_GETFD)
        except OSError:
            try:
                os.dup2(fd, low, inheritable=False)
            except OSError:
                return fd
            os.close(fd)
            return low
    return fd


def _close_all() -> None:
    for tok in list(_tokens.values()):
        tok.close()
    _tokens.clear()


def mark(common: str | os.PathLike[str], record: dict) -> str | None:
    """A marker of this process's token in ``common`` (None: tokens off, or it could not be written)."""
    tok = token(common)
    return tok.mark(record) if tok is not None else None


def unmark(marker: str | None) -> None:
    if marker is not None:
        _unlink(marker)


# -- git children -----------------------------------------------------------------------------------------


#: the environment variable naming the token's descriptor in git's children (see :func:`_low`)
FD_VAR = "NERVE_ALIVE_FD"


def before_git(cwd: str | os.PathLike[str] | None, args) -> tuple[tuple[int, ...], str | None]:
    """Before a git child: (descriptors to pass it, its marker). Nothing when tokens are off or ``cwd`` is in no
    repository we can find by looking at files (no git is run for it). The caller puts ``FD_VAR`` in its env."""
    if not _enabled:
        return (), None
    where = find_git_dir(os.fspath(cwd) if cwd is not None else os.getcwd())
    if where is None:
        return (), None
    git_dir, common = where
    tok = token(common)
    if tok is None:
        return (), None
    record = {"kind": "git", "git_dir": git_dir, "add": _add_path(cwd, args), "argv": [str(a) for a in list(args)[:3]]}
    return (tok.fd,), tok.mark(record)


def after_git(marker: str | None) -> None:
    unmark(marker)


def _add_path(cwd, args) -> str | None:
    """The path of ``git worktree add [options] <path> ...``, absolute."""
    args = [os.fspath(a) for a in args]
    if args[:2] != ["worktree", "add"]:
        return None
    rest = args[2:]
    i = 0
    while i < len(rest):
        a = rest[i]
        if a in ("-b", "-B", "--reason", "--orphan"):
            i += 2
            continue
        if a == "--":
            i += 1
            break
        if not a.startswith("-"):
            break
        i += 1
    if i >= len(rest):
        return None
    return os.path.realpath(os.path.join(os.fspath(cwd) if cwd is not None else os.getcwd(), rest[i]))


def find_git_dir(cwd: str) -> tuple[str, str] | None:
    """(git dir, common dir) of the worktree holding ``cwd``, both real paths, read from files only
    (``.git`` dir or ``gitdir:`` file, then ``commondir``); None when not found."""
    here = os.path.realpath(cwd)
    while True:
        dotgit = os.path.join(here, ".git")
        if os.path.isdir(dotgit):
            return dotgit, dotgit
        if os.path.isfile(dotgit):
            try:
                with open(dotgit, encoding="utf-8") as fh:
                    text = fh.read().strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not text.startswith("gitdir:"):
                return None
            git_dir = os.path.realpath(os.path.join(here, text[len("gitdir:"):].strip()))
            return git_dir, _common_of(git_dir)
        if os.path.isfile(os.path.join(here, "HEAD")) and os.path.isdir(os.path.join(here, "objects")):
            return here, _common_of(here)  # a bare repository (or a git dir itself)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _common_of(git_dir: str) -> str:
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as fh:
            rel = fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return git_dir
    return os.path.realpath(os.path.join(git_dir, rel)) if rel else git_dir


# -- judging others ---------------------------------------------------------------------------------------


class Dead:
    """A token proven dead, whose lock this process now holds (so no other command acts on it)."""

    def __init__(self, path: str, fd: int, markers: list[tuple[str, dict | None, int]]):
        self.path, self.fd = path, fd
        #: (marker path, record or None when unreadable, mtime_ns)
        self.markers = markers

    def records(self, kind: str) -> list[tuple[dict, int]]:
        return [(r, m) for _, r, m in self.markers if r is not None and r.get("kind") == kind]

    def consume(self) -> None:
        """Everything it covered is repaired: remove its markers, then the token."""
        for path, _, _ in self.markers:
            _unlink(path)
        _unlink(self.path)
        self.release()

    def release(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


class Scan:
    """Every token of a repository: the dead ones (held by us until released or consumed) and what the live
    ones (ours included) are doing."""

    def __init__(self, dead: list[Dead], alive: list[dict | None]):
        self.dead = dead
        #: markers of live tokens (None: unreadable, which covers anything)
        self.alive = alive

    def alive_records(self, kind: str) -> list[dict | None]:
        return [r for r in self.alive if r is None or r.get("kind") == kind]

    def release(self) -> None:
        for d in self.dead:
            d.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False


def scan(common: str | os.PathLike[str]) -> Scan:
    directory = alive_dir(common)
    try:
        names = os.listdir(directory)
    except OSError:
        return Scan([], [])
    tokens = [n for n in names if "." not in n]
    markers: dict[str, list[str]] = {}
    for n in names:
        base, dot, _ = n.partition(".")
        if dot and base in tokens:
            markers.setdefault(base, []).append(n)
    judged = [(ident, *_try_lock(os.path.join(directory, ident))) for ident in tokens]
    # the markers of live tokens are listed again, once, after every lock is judged: a live token's newest
    # marker must be seen (one listing for all, not one per live token)
    if any(state == "alive" for _, state, _ in judged):
        markers_now = _markers_by_token(directory)
    dead: list[Dead] = []
    alive: list[dict | None] = []
    for ident, state, fd in judged:
        if state == "gone":
            continue
        path = os.path.join(directory, ident)
        mine = markers_now.get(ident, []) if state == "alive" else markers.get(ident, [])
        records = [(os.path.join(directory, m), *_read_marker(os.path.join(directory, m))) for m in mine]
        if state == "dead":
            dead.append(Dead(path, fd, [(p, r, t) for p, r, t in records if t is not None]))
        else:
            alive.extend(r for _, r, t in records if t is not None)
    return Scan(dead, alive)


def _markers_by_token(directory: str) -> dict[str, list[str]]:
    """token id -> its markers' names, as listed now."""
    found: dict[str, list[str]] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    for n in names:
        base, dot, _ = n.partition(".")
        if dot:
            found.setdefault(base, []).append(n)
    return found


def _read_marker(path: str) -> tuple[dict | None, int | None]:
    """(record or None when unreadable, mtime_ns or None when the marker is gone)."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except FileNotFoundError:
        return None, None
    except OSError:
        return None, 0
    try:
        record = json.loads(data)
    except ValueError:
        return None, st.st_mtime_ns
    return (record if isinstance(record, dict) else None), st.st_mtime_ns


def _try_lock(path: str) -> tuple[str, int]:
    """("dead", fd held) / ("alive", -1) / ("gone", -1). Any error is "alive" (cannot tell)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return "gone", -1
    except OSError:
        return "alive", -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return "alive", -1
    if not os.path.exists(path):  # consumed by another command between our open and our lock
        os.close(fd)
        return "gone", -1
    return "dead", fd


def pid_alive(pid: int) -> bool:
    """False only when no process ``pid`` exists (ESRCH). Permission denied, pid reuse: alive."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _unlink(path: str) -> None:
    """A token or marker of ours (this process's, or a dead one whose lock it holds), through the door: a regular
    file of a token's name in the ``alive`` directory; anything else there is kept."""
    from .filedoor import keep_or_remove

    keep_or_remove(path, within=os.path.dirname(path), kind="liveness")
