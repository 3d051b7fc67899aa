"""Hermetic test setup: real git repositories, a temporary HOME, no system
config, a fixed identity, an empty template dir, no network."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixtures.repos import build  # noqa: E402

BIN = Path(sys.executable).parent

# A suite started in the background of a non-interactive shell (`.ci/run &`) inherits SIGINT ignored, and so would
# every command a test interrupts (the Ctrl-C tests): a handler set here is reset to the default in each child at
# exec, as in a suite started from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def warm_bytecode() -> None:
    """Write git-nerve's bytecode once: the machine may set PYTHONDONTWRITEBYTECODE, and then every
    `git worker` subprocess a test starts would compile the whole package again (~0.3 s each)."""
    import compileall

    compileall.compile_dir(str(ROOT / "git_nerve"), quiet=2, workers=1)


warm_bytecode()


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    env = build.hermetic_env(home)
    # our console scripts (git-worker, git-nerve) first, so `git worker` is this checkout's
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    # no warm reader (git_nerve/warm) outlives a test: tests/test_warm.py turns it on for its own clones
    env["NERVE_WARM"] = "0"
    env["NERVE_SANDBOX"] = "none"  # fake agents log outside their worktree; tests/test_sandbox.py boxes on purpose
    for key in list(os.environ):
        if key not in env:
            monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield env
    if os.environ.get("HOME") != env["HOME"] or os.environ.get("GIT_CONFIG_GLOBAL") != env["GIT_CONFIG_GLOBAL"]:
        # the rest of the test ran with the real HOME (on a fresh machine: no git identity)
        pytest.fail("the test undid the hermetic environment (monkeypatch.undo() undoes every fixture's "
                    "patches): patch inside `with monkeypatch.context()` instead", pytrace=False)


@pytest.fixture
def repo(tmp_path):
    """A repository on `main` with no remote."""
    return build.simple(tmp_path)


@pytest.fixture
def remote_repo(tmp_path):
    """A clone of a bare `origin`."""
    return build.with_origin(tmp_path)


@pytest.fixture
def diverging_repo(tmp_path):
    return build.diverging(tmp_path)


class Result:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:  # shown by pytest on failure
        return f"Result(code={self.code}, out={self.out!r}, err={self.err!r})"


def run(argv: list[str] | str, cwd: Path, *, input: str | None = None, env: dict | None = None, timeout: float = 120) -> Result:
    """Run a real process (e.g. ``git worker status``) and capture its output."""
    if isinstance(argv, str):
        argv = shlex.split(argv)
    proc = subprocess.run(
        argv, cwd=cwd, text=True, capture_output=True, input=input, env=env or dict(os.environ), timeout=timeout
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def cli(args: list[str] | str, cwd: Path, *, input: str | None = None, prog: str = "worker") -> Result:
    """Run `git worker`/`git nerve` in process (fast), from ``cwd``."""
    from git_nerve.cli.nerve import nerve
    from git_nerve.cli.worker import worker

    if isinstance(args, str):
        args = shlex.split(args)
    command = worker if prog == "worker" else nerve
    old = os.getcwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(command, args, input=input, prog_name=f"git {prog}", catch_exceptions=False)
    finally:
        os.chdir(old)
    return Result(res.exit_code, res.stdout, res.stderr)


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL (tests/pg_support.py), one per test process, started on first use."""
    from tests.pg_support import Server

    server = Server()
    server.start()
    yield server
    server.remove()


@pytest.fixture
def db(pg_server, request, monkeypatch, tmp_path):
    """A database of this test's own (named after its node id); no connection setting of the person running the
    tests leaks in. Every clone's commands start its listener (git_nerve/listener.py): none outlives the test."""
    import hashlib

    from tests.pg_support import stop_listeners

    for key in list(os.environ):
        if key == "NERVE_DATABASE_URL" or key.startswith("PG"):
            monkeypatch.delenv(key)
    yield pg_server.create_database("t_" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:20])
    stop_listeners(tmp_path)


@pytest.fixture
def gw():
    """``gw("spawn t1", cwd)``: `git worker` in process."""
    return lambda args, cwd, **kw: cli(args, cwd, prog="worker", **kw)


@pytest.fixture
def gn():
    """``gn("thread", cwd)``: `git nerve` in process."""
    return lambda args, cwd, **kw: cli(args, cwd, prog="nerve", **kw)


def trusting(gw, gn):
    """``gw`` for tests whose nerve.toml / .worktreeinclude the person wrote themselves: `git nerve trust` (which
    records exactly what is there now) before each spawn and retry, as that person would (issue 35). A module
    overrides its ``gw`` with it: ``def gw(gw, gn): return trusting(gw, gn)``."""
    def run(args, cwd, **kw):
        if (shlex.split(args) if isinstance(args, str) else list(args))[:1] in (["spawn"], ["retry"]):
            assert gn("trust", cwd).code == 0
        return gw(args, cwd, **kw)
    return run


@pytest.fixture
def sh():
    """``sh(["git", "worker", "status"], cwd)``: a real subprocess."""
    return run


def git(cwd: Path, *args: str, **kw) -> str:
    return build.git(cwd, *args, **kw)


def fsck(path: Path) -> None:
    """Assert `git fsck` finds nothing wrong."""
    proc = subprocess.run(["git", "fsck", "--no-progress"], cwd=path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bad = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln and not ln.startswith(("dangling", "notice"))]
    assert not bad, bad


def pytest_collection_modifyitems(items):
    """A test of a real third-party tool may install it first (minutes on a fresh machine): give it room."""
    for item in items:
        if item.get_closest_marker("real") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(1500))
