"""The warm reader's server: ``python -m git_nerve.warm_server --common DIR``, one per clone (issue 27). Beside the
``warm`` package, not in it: it runs the commands' own path (cli/entry.py), which imports that package.

It answers `git worker status --json`, `git worker show T --json` and `git worker conflicts --json` (only while
the radar's last result needs no recompute) for :mod:`.warm.client`, one request at a time
(single-threaded), by running the very function the command's click-free path runs (cli/entry.py ``_fast``): for
each request the current directory, the whole environment, the umask and ``sys.argv`` are the client's, stdout and
stderr are captured (in the order written, each saying whether it is a terminal as the client's does), and all of
it is put back afterwards. Nothing is kept between requests: each opens the repository and the bus afresh, as a
new process would (the modules these commands load keep no state of the repository at module level: constants,
this process's liveness token, a counter of temporary names).

It refuses (the client then answers itself) a request of another git-nerve version, install or Python, and then
stops; so it does when its package's files changed, when its clone is gone (the bus is no longer the file it
opened: device and inode, not the path), when ``[worker] warm`` turned false, and after ``NERVE_WARM_IDLE``
(default 300) seconds without a request. One per clone: it holds ``<common>/nerve/locks/warm.lock`` while it
runs; its socket ``<common>/nerve/warm.sock`` (mode 0600) is made and removed only by the holder, through the
door for single files (kind ``warm-socket``): a dead server's socket is replaced, anything else at the name is
kept and no server runs. Its log, ``<common>/nerve/warm.log``, gets a line when it starts and when it stops.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import stat
import sys
import time

from .fs import file_id
from .warm import client, start

#: the most a request may weigh (its environment is most of it)
MAX_REQUEST = 1 << 22
#: seconds a connected client has to send its request
READ_TIMEOUT = 5.0


def main(argv: list[str] | None = None) -> int:
    import argparse

    from . import locks

    parser = argparse.ArgumentParser(prog=start.MODULE)
    parser.add_argument("--common", required=True)
    common = os.path.realpath(parser.parse_args(argv).common)
    held = locks.try_hold(start.lock_path(common))
    if held is None:
        return 0  # this clone's server runs already
    try:
        why = _serve(common)
    except _Stop as stop:  # a signal before it listened
        why = str(stop)
    except Exception as exc:  # noqa: BLE001 - said in its log; the commands answer themselves meanwhile
        import traceback

        traceback.print_exc()
        why = f"error: {exc}"
    finally:
        held.__exit__(None, None, None)
    _log(f"stopped: {why}")
    return 0


def _log(line: str) -> None:
    print(f"warm {time.time():.3f} pid {os.getpid()}: {line}", flush=True)


def _serve(common: str) -> str:
    import socket

    if not start.enabled(common):
        return "[worker] warm is false"
    path = client.socket_path(common)
    if path is None:
        return "the socket's path is too long"
    kept = _clear(path, common)
    if kept:
        return kept
    life = _Life(common)
    if life.bus_id is None:
        return "no bus"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mine = None
    mask = os.umask(0o177)  # made 0600 at once
    try:
        sock.bind(path)
    finally:
        os.umask(mask)
    try:
        mine = os.lstat(path).st_ino
        os.chmod(path, 0o600)
        sock.listen(128)
        _log(f"started ({sys.executable}, idle {life.idle:g} s)")
        return _loop(sock, life)
    finally:
        sock.close()
        _remove_own(path, common, mine)


def _clear(path: str, common: str) -> str | None:
    """Make room for the socket: a dead server's socket is removed (this process holds the server lock, so no live
    server has it), through the door; anything else at the name is kept (then no server runs). The reason kept."""
    from .filedoor import keep_or_remove

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        return f"kept {path}: not a socket"
    if st.st_uid != os.getuid():
        return f"kept {path}: another user's socket"
    return keep_or_remove(path, within=os.path.join(common, "nerve"), kind="warm-socket")


def _remove_own(path: str, common: str, inode: int | None) -> None:
    from .filedoor import keep_or_remove

    try:
        if inode is None or os.lstat(path).st_ino != inode:
            return  # not the socket this server made
    except OSError:
        return
    kept = keep_or_remove(path, within=os.path.join(common, "nerve"), kind="warm-socket")
    if kept:
        _log(kept)


class _Life:
    """When the server stops: idle too long, its clone gone, its package changed, turned off, asked to (SIGTERM)."""

    def __init__(self, common: str):
        self.common = common
        self.bus_id = file_id(start.bus_path(common))
        try:
            self.idle = float(os.environ.get(start.ENV_IDLE) or start.IDLE)
        except ValueError:
            self.idle = start.IDLE
        self.since = time.monotonic()
        self.files = _package_files()
        self.stamp = _stamp(self.files)
        self.me = client.identity()
        self.stop: str | None = None
        self.busy = False
        signal.signal(signal.SIGTERM, self._term)
        signal.signal(signal.SIGINT, self._term)

    def _term(self, signum, frame) -> None:
        self.stop = f"signal {signum}"
        if not self.busy:
            raise _Stop(self.stop)

    def over(self, package: bool = True) -> str | None:
        """Why the server stops now, or None. ``package``: also stat every module of the package (~0.4 ms), which
        each request's :meth:`refusal` does anyway: the loop skips it right after answering one."""
        if self.stop:
            return self.stop
        if file_id(start.bus_path(self.common)) != self.bus_id:
            return "its clone is gone (the bus is not the file it opened)"
        if package and _stamp(self.files) != self.stamp:
            return "its package changed"
        if time.monotonic() - self.since >= self.idle:
            return f"idle for {self.idle:g} s"
        return None

    def refusal(self, req) -> tuple[str | None, bool]:
        """(why this request is not answered here, whether the server stops) or (None, False). A malformed request
        is refused and the server serves on; only another git-nerve's (every identity key there, some other value)
        stops it."""
        if not isinstance(req, dict) or not all(k in req for k in self.me):
            return "malformed request", False
        mine = {k: req.get(k) for k in self.me}
        if mine != self.me:
            return "another git-nerve", True
        why = self.over() or (None if start.enabled(self.common) else "[worker] warm is false")
        if why:
            return why, True
        return malformed(req), False

    def wait(self) -> float:
        return max(0.01, min(1.0, self.idle - (time.monotonic() - self.since)))


def _text(value) -> bool:
    """A string the operating system can take (no NUL byte)."""
    return isinstance(value, str) and "\0" not in value


def malformed(req: dict) -> str | None:
    """Why the fields of a request cannot be run as a command (the wrong types, a NUL byte in the directory, the
    environment or the arguments, a umask out of 0..0o777), or None."""
    argv, env, tty, umask = req.get("argv"), req.get("env"), req.get("tty"), req.get("umask")
    if not (isinstance(argv, list) and all(_text(a) for a in argv) and client.plain(argv)):
        return "malformed request: argv"
    if not (isinstance(env, dict) and all(_text(k) and k and "=" not in k and _text(v) for k, v in env.items())):
        return "malformed request: env"
    if not (_text(req.get("cwd")) and os.path.isabs(req["cwd"]) and _text(req.get("argv0"))):
        return "malformed request: cwd or argv0"
    if type(umask) is not int or not 0 <= umask <= 0o777:
        return "malformed request: umask"
    if not (isinstance(tty, list) and len(tty) == 2 and all(type(t) is bool for t in tty)):
        return "malformed request: tty"
    return None


class _Stop(Exception):
    pass


def _loop(sock, life: _Life) -> str:
    answered = False
    try:
        while True:
            why = life.over(package=not answered)
            if why:
                return why
            answered = False
            ready, _, _ = select.select([sock], [], [], life.wait())
            if not ready:
                continue
            conn, _ = sock.accept()
            life.busy = True
            try:
                why = _handle(conn, life)
            except Exception as exc:  # noqa: BLE001 - one request's failure is logged; the next is served
                _log(f"request failed: {type(exc).__name__}: {exc}")
                why = None
            finally:
                life.busy = False
                conn.close()
            life.since = time.monotonic()
            answered = True
            if why:
                return why
    except _Stop as stop:
        return str(stop)


def _handle(conn, life: _Life) -> str | None:
    """Answer one request; the reason to stop, or None. Whatever the request holds, the answer is the command's or
    a refusal: the server serves on (a request of another git-nerve stops it after its refusal)."""
    conn.settimeout(READ_TIMEOUT)
    try:
        req, why = _read(conn)
    except OSError:
        return None
    stop = False
    if why is None:
        why, stop = life.refusal(req)
    reply = {"refused": why} if why else _run(req)
    reply["pid"] = os.getpid()
    try:
        conn.sendall(json.dumps(reply).encode("utf-8", "surrogateescape"))
    except OSError:
        pass
    return why if stop else None


def _read(conn) -> tuple[object, str | None]:
    """(the request, None) or (None, why it is refused): a peer of another user, too large, not JSON."""
    if client.peer_uid(conn) != os.getuid():
        return None, "a client of another user"
    chunks, size = [], 0
    while size <= MAX_REQUEST:
        data = conn.recv(1 << 16)
        if not data:
            break
        chunks.append(data)
        size += len(data)
    if size > MAX_REQUEST:
        return None, "request too large"
    try:
        return json.loads(b"".join(chunks).decode("utf-8", "surrogateescape")), None
    except (ValueError, RecursionError):  # not JSON, or nested too deep for the parser
        return None, "malformed request"


class _Capture(io.TextIOBase):
    """stdout or stderr of one request: what is written, in order with the other stream's, and a terminal exactly
    when the client's is one (colour is decided by that, as in the client's own process)."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, fd: int, out: list, tty: bool):
        super().__init__()
        self.fd, self.out, self.tty = fd, out, bool(tty)

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            if self.out and self.out[-1][0] == self.fd:
                self.out[-1][1] += text
            else:
                self.out.append([self.fd, text])
        return len(text)

    def isatty(self) -> bool:
        return self.tty

    def writable(self) -> bool:
        return True


def _run(req: dict) -> dict:
    """The command run as the client's own process would run it; {"code", "out"}, or {"refused"} when it did not
    finish as a command does (the client then runs it itself, and prints whatever the direct path prints)."""
    saved = (dict(os.environ), os.getcwd(), sys.argv, sys.stdout, sys.stderr)
    mask = os.umask(0o022)
    out: list = []
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in req["env"].items()})
        os.umask(req["umask"])
        sys.argv = [req["argv0"], *req["argv"]]
        sys.stdout, sys.stderr = _Capture(1, out, req["tty"][0]), _Capture(2, out, req["tty"][1])
        code = _command(req["argv"])
    except (OSError, ValueError, OverflowError, TypeError) as exc:  # its directory gone, ...: the client runs it
        code = f"{exc}"
    finally:
        env, cwd, sys.argv, sys.stdout, sys.stderr = saved
        os.environ.clear()
        os.environ.update(env)
        os.umask(mask)
        try:
            os.chdir(cwd)
        except OSError:
            os.chdir("/")
    if isinstance(code, str):
        return {"refused": code}
    return {"code": code, "out": out}


def _command(argv: list[str]) -> int | str:
    """The exit code of the command (a string: why it is not answered here). Python's warnings as a new process
    gives them (a warning shown once per process is shown again: catch_warnings resets that memory, and puts the
    filters back after). The git children of these commands write to pipes of theirs, never to this process's
    own descriptors (git/cli.run captures both). `conflicts --json` is answered only from the radar's last result
    as it is: when it needs a recompute first (long git work, which would hold every other command behind it) the
    command says so before printing anything (cli/verbs.Recompute) and the client runs it itself."""
    import warnings

    from .cli import entry, verbs

    try:
        with warnings.catch_warnings():
            if not entry._fast(argv[0], argv[1:], served=True):
                return "not a plain command"
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        sys.stderr.write(f"{exc.code}\n")
        return 1
    except verbs.Recompute as exc:
        return str(exc)
    except BaseException as exc:  # noqa: BLE001 - a traceback is the direct path's to print: the client runs it
        return f"{type(exc).__name__}"
    return 0


def _package_files() -> list[str]:
    """Every module of this git-nerve (git_nerve/**/*.py)."""
    root = os.path.dirname(os.path.abspath(__file__))
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        found += [os.path.join(d, f) for f in files if f.endswith(".py")]
    return sorted(found)


def _stamp(files: list[str]) -> list:
    """What changes when any of the package's files is replaced or edited."""
    stamps = []
    for f in files:
        try:
            st = os.stat(f)
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            stamps.append(None)
    return stamps


if __name__ == "__main__":
    sys.exit(main())
