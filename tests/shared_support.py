"""Real git servers and clones for the shared-mode tests (issue 24): a bare remote served over file://, by
`git daemon` on 127.0.0.1, or by `git http-backend` behind a small CGI server; clones each with its own
``nerve.machine``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.repos import build

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """`git daemon` serving every repository under ``base`` (receive-pack on) on a fixed free port."""

    def __init__(self, base: Path):
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.groups: list[int] = []  # every daemon's process group (its connection children too), ended by stop()

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack", f"--base-path={self.base}",
             "--listen=127.0.0.1", f"--port={self.port}", str(self.base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.groups.append(self.proc.pid)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("git daemon did not start")

    def stop(self) -> None:
        """The daemon and every process of its sessions (a connection's child a test killed the daemon under
        included): nothing a test started outlives it."""
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait(timeout=10)
            self.proc = None
        self.groups.clear()


def origin(root: Path) -> Path:
    """A bare repository holding a small project (``root/srv/project.git``)."""
    seed = build.simple(root / "seed")
    srv = root / "srv"
    srv.mkdir()
    bare = srv / "project.git"
    build.git(root, "clone", "-q", "--bare", str(seed.work), str(bare))
    return bare


def clone(root: Path, url: str, machine: str) -> Path:
    work = root / machine
    build.git(root, "clone", "-q", url, str(work))
    build.git(work, "config", "nerve.machine", machine)
    return work


def run(args: list[str], cwd: Path, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """``git worker ...`` / ``git nerve ...`` as a real process (races need real processes); ``env``: more
    variables (``NERVE_FAULT``)."""
    prog = "git-worker" if args[0] == "worker" else "git-nerve"
    return subprocess.run([str(BIN / prog), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def ok(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    proc = run(args, cwd)
    assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


def merge_at_once(task: str, works: dict[str, Path]) -> tuple[str, subprocess.CompletedProcess]:
    """`git worker merge TASK` on two machines at the same instant (real processes behind a barrier); asserts that
    exactly one merged: (that machine, the other's process)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    barrier = threading.Barrier(len(works))

    def merge(work: Path):
        barrier.wait()
        return run(["worker", "merge", task], work)

    with ThreadPoolExecutor(max_workers=len(works)) as pool:
        procs = dict(zip(works, pool.map(merge, works.values())))
    won = [m for m, p in procs.items() if p.returncode == 0]
    assert len(won) == 1, {m: (p.returncode, p.stdout, p.stderr) for m, p in procs.items()}
    (loser,) = [p for m, p in procs.items() if m != won[0]]
    return won[0], loser


def team(root: Path, url: str, machines: list[str], *, init: bool = True, lease: float | None = None,
         shared: str = "") -> list[Path]:
    """Clones of ``url``, the first turning shared mode on (its nerve.toml committed and pushed), every one
    initialised (``init=False``: the others only cloned after that, as a benchmark needs them)."""
    works = [clone(root, url, m) for m in machines[:1]]
    first = works[0]
    ok(["nerve", "init", "--shared"], first)
    if lease is not None:  # [shared] is the file's last table
        with open(first / "nerve.toml", "a", encoding="utf-8") as f:
            f.write(f"lease = {lease}\n")
    if shared:  # more lines of [shared] (``takeover = "idle"``)
        with open(first / "nerve.toml", "a", encoding="utf-8") as f:
            f.write(shared)
    build.git(first, "add", "nerve.toml")
    build.git(first, "commit", "-q", "-m", "git-nerve: shared mode")
    build.git(first, "push", "-q", "origin", "HEAD:main")
    for m in machines[1:]:
        w = clone(root, url, m)
        if init:
            ok(["nerve", "init"], w)
        works.append(w)
    return works


def bus(work: Path):
    from git_nerve.bus.connection import Bus

    return Bus(Path(build.git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "nerve" / "bus.db")


class SmartHttp:
    """``git http-backend`` behind a small threaded HTTP server on 127.0.0.1 (smart HTTP, pushes allowed)."""

    def __init__(self, base: Path):
        import http.server
        import threading

        self.base = base
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self):
                backend._cgi(self)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def _cgi(self, req) -> None:
        path, _, query = req.path.partition("?")
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else b""
        env = {**os.environ, "GIT_PROJECT_ROOT": str(self.base), "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
               "QUERY_STRING": query, "REQUEST_METHOD": req.command, "REMOTE_USER": "tester", "REMOTE_ADDR": "127.0.0.1",
               "CONTENT_TYPE": req.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(length),
               "HTTP_CONTENT_ENCODING": req.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": req.headers.get("Git-Protocol", "")}
        proc = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env)
        head, _, rest = proc.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, rest = proc.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers.append((key, value.strip()))
        req.send_response(status)
        for key, value in headers:
            req.send_header(key, value)
        req.end_headers()
        req.wfile.write(rest)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def daemon(tmp_path):
    """A `git daemon` on 127.0.0.1 serving the test's bare remote (``origin``), stopped after the test."""
    bare = origin(tmp_path)
    d = Daemon(bare.parent)
    d.start()
    yield d
    d.stop()


def row(work: Path, task: str):
    """``task``'s worker row in the bus of the clone at ``work`` (None when it has none)."""
    from git_nerve.bus import workers

    with bus(work) as b:
        return workers.get(b.conn, task)


def ready(work: Path, task: str, *, approve: bool, sync: bool) -> str:
    """spawn, start, a commit, done (and ``approve``) on ``work``'s machine, then (``sync``) a sync: its events
    published; the task's tip."""
    ok(["worker", "spawn", task, "-d", f"the {task} task"], work)
    ok(["worker", "start", "--task", task], work)
    wt = Path(row(work, task).worktree)
    build.commit_file(wt, f"{task}.txt", f"{task}'s work\n")
    ok(["worker", "done", "--task", task], work)
    if approve:
        ok(["worker", "approve", task], work)
    if sync:
        ok(["nerve", "sync"], work)
    return build.git(wt, "rev-parse", "HEAD").strip()


def rounds_of(work: Path, task: str) -> list[tuple]:
    """(role, content, the machine it came from) of each round of ``task``'s thread on ``work``'s machine."""
    from git_nerve.bus import rounds

    with bus(work) as b:
        found = rounds.load(b.conn, task, list(range(1, rounds.count(b.conn, task) + 1)))
    return [(r.role, r.content, (r.metadata or {}).get("from_machine")) for r in found]


def merges_of(origin: Path, tip: str, branch: str = "main") -> list[str]:
    """The merge commits on ``origin``'s ``branch`` whose second parent is ``tip``."""
    lines = build.git(origin, "rev-list", "--merges", "--parents", branch).splitlines()
    return [ln.split()[0] for ln in lines if ln.split()[2:3] == [tip]]
