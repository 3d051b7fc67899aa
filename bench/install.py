#!/usr/bin/env python3
"""What installing git-nerve costs, four ways side by side in one run (issue 43). Prints, asserts nothing.

For install.sh, pip (a new virtualenv), pipx and uv (``uv tool install``): the wall time of the install, the number
of packages it put in git-nerve's environment and their size on disk, each in a HOME of its own (so nothing is
shared between them but pip's and uv's download caches, which the first round fills: the rounds after it are the
figures to quote). pipx and uv are taken from PATH, else from the test suite's tool cache (tests/realtools.py
installs them there at pinned versions); one that is missing is named and skipped.

    .venv/bin/python bench/install.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIPX = ("pipx", "1.18.4")
UV = ("uv", "0.13.9")


def _tool(name: str, version: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    cache = Path(os.environ.get("GIT_NERVE_TOOL_CACHE") or Path.home() / ".cache" / "git-nerve-tools")
    candidate = cache / "pip" / f"{name}@{version}" / "bin" / name
    return str(candidate) if candidate.is_file() else None


def _env(home: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "VIRTUAL_ENV", "PIPX_", "UV_"))}
    env.update(HOME=str(home), PIP_CACHE_DIR=str(cache / "pip"), UV_CACHE_DIR=str(cache / "uv"),
               XDG_DATA_HOME=str(home / ".local/share"), XDG_BIN_HOME=str(home / ".local/bin"),
               XDG_CACHE_HOME=str(home / ".cache"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    return env


def _site_packages(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def _measure(venv: Path) -> tuple[int, int]:
    """(packages, bytes) of a virtualenv's site-packages: one per .dist-info, pip and setuptools left out."""
    site = _site_packages(venv)
    dists = [d for d in site.glob("*.dist-info") if not d.name.lower().startswith(("pip-", "setuptools-"))]
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink())
    return len(dists), size


def _install_sh(home: Path, env: dict) -> Path:
    run(["sh", str(ROOT / "install.sh")], env, ok=(0, 3))
    return home / ".local/share/git-nerve/venv"


def _pip(home: Path, env: dict) -> Path:
    venv = home / "venv"
    run([sys.executable, "-m", "venv", str(venv)], env)
    run([str(venv / "bin/python"), "-m", "pip", "install", "--quiet", str(ROOT)], env)
    return venv


def _pipx(pipx: str):
    def install(home: Path, env: dict) -> Path:
        env = {**env, "PIPX_HOME": str(home / "pipx"), "PIPX_BIN_DIR": str(home / ".local/bin")}
        run([pipx, "install", str(ROOT)], env)
        return home / "pipx" / "venvs" / "git-nerve"
    return install


def _uv(uv: str):
    def install(home: Path, env: dict) -> Path:
        env = {**env, "UV_TOOL_DIR": str(home / "uv-tools"), "UV_TOOL_BIN_DIR": str(home / ".local/bin")}
        run([uv, "tool", "install", str(ROOT)], env)
        return home / "uv-tools" / "git-nerve"
    return install


def run(argv: list[str], env: dict, ok: tuple[int, ...] = (0,)) -> None:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds of every installer (the first fills the caches)")
    args = ap.parse_args()
    ways = {"install.sh": _install_sh, "pip": _pip}
    for name, (tool, version) in {"pipx": PIPX, "uv": UV}.items():
        path = _tool(tool, version)
        if path:
            ways[name] = _pipx(path) if name == "pipx" else _uv(path)
        else:
            print(f"{name}: not found on PATH nor in the tool cache; skipped")
    work = Path(tempfile.mkdtemp(prefix="git-nerve-bench-install-"))
    times: dict[str, list[float]] = {w: [] for w in ways}
    sizes: dict[str, tuple[int, int]] = {}
    try:
        for r in range(args.rounds):
            for name, install in ways.items():  # interleaved: a machine's drift touches every way alike
                home = work / f"{name}-{r}"
                home.mkdir()
                env = _env(home, work / "cache")
                t0 = time.monotonic()
                venv = install(home, env)
                times[name].append(time.monotonic() - t0)
                sizes[name] = _measure(venv)
                shutil.rmtree(home)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(times["pip"][1:] or times["pip"])
    print(f"{'installer':<12} {'first (s)':>10} {'warm (s)':>9} {'vs pip':>7} {'packages':>9} {'size (MB)':>10}")
    for name in ways:
        warm = statistics.median(times[name][1:] or times[name])
        count, size = sizes[name]
        print(f"{name:<12} {times[name][0]:>10.1f} {warm:>9.1f} {warm / base:>6.2f}x {count:>9} {size / 1e6:>10.1f}")
    print(f"(first: caches empty but for earlier runs of this machine; warm: the median of rounds 2..{args.rounds})")


if __name__ == "__main__":
    main()
