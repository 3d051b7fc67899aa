"""The warm reader talks only to its owner (issue 35, point 5).

In a group-shared repository another user can plant a listening socket at `.git/nerve/warm.sock` (a nerve dir left
group-writable): the person's `git worker status --json` answers itself and the listener receives not one byte
(asserted at the listener). A socket file of the person's own with another user's process behind it gets nothing
either (the kernel's peer credentials). A real server answers malformed requests with a refusal and answers a good
one afterwards. The second user is uid 65534 (`nobody`), through `setpriv`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fixtures.repos import build
from git_nerve.warm import client
from test_warm import TASKS, Clone, _same, _settled, _stop, warm  # noqa: F401  (warm: a fixture)
from waiting import wait_until

NOBODY = 65534
SETPRIV = shutil.which("setpriv")


def _nobodys_python() -> str | None:
    """A Python that uid 65534 can start (root's own, e.g. under pyenv, may sit in a directory only root reads)."""
    for python in ("/usr/bin/python3", "/usr/local/bin/python3", os.path.realpath(sys.executable)):
        if SETPRIV and os.path.exists(python) and subprocess.run(
                [SETPRIV, "--reuid", str(NOBODY), "--regid", "0", "--clear-groups", python, "-c", "pass"],
                capture_output=True, timeout=60).returncode == 0:
            return python
    return None

LISTENER = r'''
import json, os, socket, sys, time
path, out, ready, stop, mode = sys.argv[1:6]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
if mode == "drop":  # the socket file is root's; the process behind it is nobody's
    os.setgid(65534)
    os.setuid(65534)
s.listen(8)
s.settimeout(0.1)
conns = got = 0
def note():
    with open(out + ".tmp", "w") as fh:
        json.dump({"conns": conns, "bytes": got}, fh)
    os.replace(out + ".tmp", out)
note()
open(ready, "w").close()
deadline = time.monotonic() + 120
while not os.path.exists(stop) and time.monotonic() < deadline:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    conns += 1
    c.settimeout(2)
    try:
        while True:
            data = c.recv(65536)
            if not data:
                break
            got += len(data)
        c.sendall(json.dumps({"code": 0, "out": [[1, "\x1b[31mPWNED\n"]], "pid": 1}).encode())
    except OSError:
        pass
    c.close()
    note()
note()
'''

needs_root = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                                reason="a second user needs root to become uid 65534 (these tests run as root in CI)")


@pytest.fixture
def shared_clone(hermetic):
    """A clone with four live tasks in a directory every user may traverse (pytest's own is its user's only), in a
    `git init --shared=group` repository."""
    top = Path(tempfile.mkdtemp(prefix="nw", dir="/tmp"))
    top.chmod(0o1777)
    env = {k: v for k, v in hermetic.items() if k != "NERVE_WARM"}
    env.update(NERVE_WARM_TRACE=str(top / "trace"), NERVE_WARM_IDLE="60")
    work = build.simple(top / "c").work
    clone = Clone(work, env, top / "trace")
    for t in TASKS:
        res = clone.git(["worker", "spawn", t, "--no-fetch"], NERVE_WARM="0")
        assert res.returncode == 0, res
    build.git(work, "config", "core.sharedRepository", "group")
    for d in [top / "c", work, work / ".git"]:
        d.chmod(0o2775)
    yield clone, top
    _stop(clone)
    shutil.rmtree(top, ignore_errors=True)


def _listen(top: Path, sock: Path, mode: str) -> tuple[subprocess.Popen, Path, Path]:
    script, out, ready, stop = top / "listener.py", top / "heard.json", top / "ready", top / "stop"
    script.write_text(LISTENER, encoding="utf-8")
    if mode == "plant":
        python = _nobodys_python()
        if python is None:
            pytest.skip("no setpriv, or no Python uid 65534 can start")
        argv = [SETPRIV, "--reuid", str(NOBODY), "--regid", "0", "--clear-groups", python]
    else:
        argv = [sys.executable]
    proc = subprocess.Popen([*argv, str(script), str(sock), str(out), str(ready), str(stop), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(ready.exists, what="the listener ready", alive=proc)
    return proc, out, stop


def _heard(proc: subprocess.Popen, out: Path, stop: Path) -> dict:
    stop.touch()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return json.loads(out.read_text(encoding="utf-8"))


@needs_root
def test_a_socket_another_user_planted_receives_nothing_and_the_command_answers_itself(shared_clone):
    clone, top = shared_clone
    _settled(clone)
    # the nerve dir as an older git-nerve left it (group-writable; the next bus opening makes it 0700 again):
    # another user of the group plants a listener before the person's next command
    (clone.common / "nerve").chmod(0o2775)
    proc, out, stop = _listen(top, clone.sock, "plant")
    assert clone.sock.lstat().st_uid == NOBODY

    res = clone.git(["worker", "status", "--json"], SECRET_TOKEN="hunter2")

    heard = _heard(proc, out, stop)
    assert heard == {"conns": 0, "bytes": 0}
    assert b"PWNED" not in res.stdout + res.stderr and res.returncode == 0, res
    assert clone.lines()[-1].split(None, 1)[1] == "direct the socket is not this user's"
    _same(res, clone.direct(["status", "--json"]))
    assert clone.sock.lstat().st_uid == NOBODY  # kept: no server of ours replaced it or started
    assert (clone.common / "nerve").stat().st_mode & 0o077 == 0  # the direct answer's bus opening closed it


@needs_root
def test_a_socket_of_ours_with_another_users_process_behind_it_gets_no_byte(shared_clone):
    clone, top = shared_clone
    _settled(clone)
    proc, out, stop = _listen(top, clone.sock, "drop")
    assert clone.sock.lstat().st_uid == os.getuid()

    res = clone.git(["worker", "status", "--json"], SECRET_TOKEN="hunter2")

    heard = _heard(proc, out, stop)
    assert heard["bytes"] == 0, heard
    assert b"PWNED" not in res.stdout + res.stderr and res.returncode == 0, res
    assert clone.lines()[-1].split(None, 1)[1] == "direct the server is not this user's"
    _same(res, clone.direct(["status", "--json"]))


def _ask(sock: Path, payload: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(sock))
        try:
            s.sendall(payload)
        except OSError:  # an oversized request: the server stopped reading, refused and closed
            pass
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            data = s.recv(1 << 16)
            if not data:
                break
            chunks.append(data)
    return json.loads(b"".join(chunks))


def test_malformed_requests_are_refused_and_the_server_serves_on(warm, monkeypatch):
    clone = warm()
    clone.start()
    pid = clone.server_pid()
    monkeypatch.chdir(clone.work)
    good = json.loads(client._request(["status", "--json"]))

    def bad(**changes) -> bytes:
        return json.dumps({**good, **changes}).encode()

    requests = {
        "NUL in cwd": bad(cwd=str(clone.work) + "\0x"),
        "NUL in an env value": bad(env={**good["env"], "X": "a\0b"}),
        "NUL in an env name": bad(env={**good["env"], "X\0Y": "1"}),
        "NUL in argv": bad(argv=["show", "t1\0", "--json"]),
        "huge umask": bad(umask=1 << 80),
        "negative umask": bad(umask=-1),
        "umask of the wrong type": bad(umask="022"),
        "argv a string": bad(argv="status --json"),
        "env a list": bad(env=[["A", "b"]]),
        "tty of the wrong shape": bad(tty="yes"),
        "relative cwd": bad(cwd="."),
        "no identity": json.dumps({"argv": ["status", "--json"]}).encode(),
        "not JSON": b"\xff\xfe{",
        "a list": b"[1, 2]",
        "nested too deep": b"[" * 200_000,
    }
    for what, payload in requests.items():
        reply = _ask(clone.sock, payload)
        assert "refused" in reply and reply.get("pid") == pid, (what, reply)
    try:  # the server reads no more than its limit: the client may see the reset of its unread rest instead
        reply = _ask(clone.sock, b" " * ((1 << 22) + (1 << 16)))
        assert reply.get("refused") == "request too large", reply
    except ConnectionResetError:
        pass
    assert clone.server_pid() == pid
    assert "Traceback" not in clone.log.read_text(encoding="utf-8")
    clone.served(["status", "--json"])
    assert clone.server_pid() == pid
