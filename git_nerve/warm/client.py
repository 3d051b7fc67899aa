"""The warm reader's client: what `git worker status --json`, `git worker show T --json` and `git worker
conflicts --json` try before anything else is imported (cli/entry.py's worker_main). Standard library only, and of it only ``os``, ``sys``, ``_socket``
and ``json`` (``socket`` itself costs its enums; ``_socket`` is what it wraps): the whole point is a command that
costs about what starting Python costs.

It finds the clone's common git dir by reading git's files (:func:`git_nerve.dotgit.locate`, no git started),
connects to ``<common>/nerve/warm.sock`` when that socket and the process listening at it are this user's (the
socket's ``st_uid`` by lstat, the peer's uid from the kernel: :func:`peer_uid`; another user's socket, planted in
a group-writable git dir, gets not a byte, and the command answers itself), sends one JSON request (the
arguments, the current directory, the whole environment, the umask, which of stdout/stderr is a terminal, this
git-nerve's version, package directory and Python) and prints the answer's output byte for byte, in the order the command wrote it, then exits with its code.
Anything else (git's location variables set, anything unusual about the repository, no socket, a path too long for
a socket, refused, a timeout, a malformed answer, the server's refusal) is ``None``: the command runs itself, as if
there were no server. A server never makes a command fail or print anything different from the direct path.
"""

from __future__ import annotations

import os
import sys

#: the socket's name in ``<common>/nerve``
SOCKET = "warm.sock"
PROTOCOL = 1
#: "0" in the environment: no server is used or started (the direct path, e.g. for a benchmark's baseline)
ENV_OFF = "NERVE_WARM"
#: a file the client appends one line to about each command (``served <server pid>`` or ``direct <why>``): tests
ENV_TRACE = "NERVE_WARM_TRACE"
#: seconds a command waits for its answer before it answers itself
TIMEOUT = 30.0
#: AF_UNIX's path limit in bytes, its terminating NUL included (sun_path): 108 on Linux, 104 on macOS and the BSDs
MAX_PATH = 108 if sys.platform.startswith("linux") else 104
#: variables that move where git looks or how the command runs: with any set, the command runs itself
UNUSUAL = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES",
           "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
           "GIT_IMPLICIT_WORK_TREE", "GIT_NAMESPACE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE",
           "GIT_QUARANTINE_PATH", "GIT_GRAFT_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE",
           "_GIT_WORKER_COMPLETE", "NERVE_FAULT", "NERVE_WAITS")

#: the common dir of this command's clone when a server could have answered and none listens there (no socket, or
#: a dead server's): after answering itself the command may start one (:func:`git_nerve.warm.start.after_direct`)
missing: str | None = None


def plain(argv: list[str]) -> bool:
    """``status --json [--stale]``, ``show TASK --json`` or ``conflicts --json``, each flag once, nothing else, as
    the one table of options reads them (git_nerve/options.py, which cli/verbs.plain_args reads too; the server
    checks with that again)."""
    if argv[:1] not in (["status"], ["show"], ["conflicts"]):
        return False
    from ..options import plain as read

    kw = read(f"worker {argv[0]}", argv[1:])
    return kw is not None and kw["as_json"] and kw.get("task_id", "") is not None


def socket_path(common: str) -> str | None:
    """``<common>/nerve/warm.sock``, or None when the path is too long for a Unix socket (no server then)."""
    path = os.path.join(common, "nerve", SOCKET)
    return path if len(os.fsencode(path)) < MAX_PATH else None


def identity() -> dict:
    """Which git-nerve asks: a server of another version, install or Python refuses (and stops)."""
    from .. import __version__

    return {"protocol": PROTOCOL, "version": __version__,
            "package": os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python": sys.executable,
            "fsencoding": sys.getfilesystemencoding(), "utf8": sys.flags.utf8_mode}


def answer(argv: list[str]) -> int | None:
    """The exit code of the command ``argv`` as the clone's server answered it, its output printed; None when no
    server answered (nothing printed: the command runs itself)."""
    global missing
    if not plain(argv) or os.environ.get(ENV_OFF) == "0" or any(v in os.environ for v in UNUSUAL):
        return None
    from ..dotgit import locate

    found = locate()
    path = socket_path(found[1]) if found is not None else None
    if path is None:
        _trace("direct " + ("unusual repository" if found is None else "socket path too long"))
        return None
    try:
        reply, why = _ask(path, argv)
    except KeyboardInterrupt:  # as the direct path says it (cli/common.run_mapped)
        sys.stderr.write("interrupted\n")
        return 130
    if reply is None:
        if why == "none":
            missing = found[1]
        _trace(f"direct {why}")
        return None
    if not _printable(reply["out"]):
        _trace("direct unprintable")
        return None
    _trace(f"served {reply.get('pid')}")
    return _print(reply)


def _request(argv: list[str]) -> bytes:
    import json

    mask = os.umask(0o022)
    os.umask(mask)
    streams = (sys.stdout, sys.stderr)
    return (json.dumps({**identity(), "argv0": sys.argv[0], "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ),
                        "umask": mask, "tty": [bool(s is not None and s.isatty()) for s in streams]})
            + "\n").encode("utf-8", "surrogateescape")


def _ask(path: str, argv: list[str]) -> tuple[dict | None, str]:
    """(the server's answer, "") or (None, why): "none" when nothing listens at ``path`` (no socket, or a dead
    server's), else what went wrong."""
    import _socket

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, "none"  # the usual case without a server: no request built (json, the environment)
    except OSError as exc:
        return None, f"ask: {exc}"
    if st.st_uid != os.getuid() or (st.st_mode & 0o170000) != 0o140000:  # S_IFSOCK (stat itself is not imported)
        return None, "the socket is not this user's"
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(TIMEOUT)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            return None, "none"
        if peer_uid(sock) != os.getuid():  # the process behind it, whoever owns the file by now
            return None, "the server is not this user's"
        try:
            request = _request(argv)
        except (OSError, ValueError) as exc:
            return None, f"request: {exc}"
        sock.sendall(request)
        sock.shutdown(_socket.SHUT_WR)
        chunks = []
        while True:
            data = sock.recv(1 << 16)
            if not data:
                break
            chunks.append(data)
    except OSError as exc:  # a timeout among them
        return None, f"ask: {exc}"
    finally:
        sock.close()
    return _parse(b"".join(chunks))


def peer_uid(sock) -> int | None:
    """The user id of the process at the other end of the connected Unix socket ``sock``, from the kernel; None
    when this system does not say (then nothing is sent). Linux: ``SO_PEERCRED`` (struct ucred: pid, uid, gid).
    macOS and the BSDs: ``LOCAL_PEERCRED`` at level ``SOL_LOCAL`` (struct xucred: version, uid, ...), what
    ``getpeereid`` reads; written from the headers and untested here (no macOS machine in this CI). Both put the
    uid at byte 4, in the machine's byte order."""
    import _socket

    try:
        if sys.platform.startswith("linux"):
            raw = sock.getsockopt(_socket.SOL_SOCKET, getattr(_socket, "SO_PEERCRED", 17), 12)
        elif sys.platform == "darwin" or "bsd" in sys.platform:
            raw = sock.getsockopt(0, getattr(_socket, "LOCAL_PEERCRED", 1), 76)  # SOL_LOCAL, sizeof(struct xucred)
        else:
            return None
    except OSError:
        return None
    return int.from_bytes(raw[4:8], sys.byteorder) if len(raw) >= 8 else None


def _parse(raw: bytes) -> tuple[dict | None, str]:
    import json

    try:
        reply = json.loads(raw.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None, "malformed answer"
    if not isinstance(reply, dict) or "refused" in reply:
        return None, f"refused: {reply.get('refused') if isinstance(reply, dict) else '?'}"
    out, code = reply.get("out"), reply.get("code")
    if type(code) is not int or not isinstance(out, list) \
            or not all(isinstance(c, list) and len(c) == 2 and c[0] in (1, 2) and isinstance(c[1], str) for c in out):
        return None, "malformed answer"
    return reply, ""


def _printable(out: list) -> bool:
    """Every chunk can be written by this process's streams (else the direct path meets the same error, its way)."""
    try:
        for fd, text in out:
            stream = sys.stdout if fd == 1 else sys.stderr
            text.encode(stream.encoding or "utf-8", stream.errors or "strict")
    except (UnicodeError, LookupError, AttributeError):
        return False
    return True


def _print(reply: dict) -> int:
    """The command's output as it wrote it (stdout and stderr interleaved as they were), through this process's own
    streams (their encoding is this process's, as the direct path's would be)."""
    try:
        for fd, text in reply["out"]:
            stream = sys.stdout if fd == 1 else sys.stderr
            stream.write(text)
            stream.flush()
    except BrokenPipeError:  # piped into `head`: not an error (as cli/common.run_mapped)
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0
    return reply["code"]


def _trace(line: str) -> None:
    where = os.environ.get(ENV_TRACE)
    if not where:
        return
    try:
        with open(where, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {line}\n")
    except OSError:
        pass
