"""`pip install`, `pipx install` and `uv tool install` of the package (its source tree and a built
wheel) each give working `git worker` / `git nerve` whose `--help` opens the complete man page.

pipx and uv are the real tools at pinned versions (tests/realtools.py caches them outside the
repository); each install goes into the test's temporary HOME, from the pip index this machine is
configured with. uv 0.13 does not install man pages (astral-sh/uv#4731): the first git-nerve command
links them where man finds them (git_nerve/manlink.py), which this test checks too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, ROOT
from realtools import CACHE, REAL_ENV, pip_tool

PIPX = ("pipx", "1.18.4")
UV = ("uv", "0.13.9")
NAME_LINE = "git-worker - Run many agents on one repository: one task = one branch = one worktree."

pytestmark = [pytest.mark.slow, pytest.mark.real]


def tool_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p and Path(p) != BIN)
    for key, value in REAL_ENV.items():
        if key.startswith(("PIP_", "UV_")) or key.lower() in {"http_proxy", "https_proxy", "no_proxy", "all_proxy"}:
            env[key] = value
    env["PIP_CACHE_DIR"] = str(CACHE / "pip-cache-install")
    env["UV_CACHE_DIR"] = str(CACHE / "uv-cache")
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["UV_PYTHON"] = shutil.which("python3", path=env["PATH"]) or sys.executable
    if "PIP_INDEX_URL" in REAL_ENV and "UV_DEFAULT_INDEX" not in env:
        env["UV_DEFAULT_INDEX"] = REAL_ENV["PIP_INDEX_URL"]
    for key in ("MANPATH", "VIRTUAL_ENV", "PIPX_HOME", "PIPX_BIN_DIR", "PIPX_MAN_DIR", "UV_TOOL_DIR", "UV_TOOL_BIN_DIR"):
        env.pop(key, None)
    env["HOME"] = str(home)
    env.update(extra)
    return env


def run(argv: list[str], cwd: Path, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return proc


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The checkout's files (tracked and new, not ignored) copied out, so a build writes nothing here."""
    dest = tmp_path_factory.mktemp("src") / "git-nerve"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel, follow_symlinks=False)
    return dest


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    env = tool_env(Path(os.environ["HOME"]))
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)], source.parent, env)
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("git_nerve-*.whl")
    return built


def check_help(home: Path, env: dict, cwd: Path) -> None:
    for program in ("worker", "nerve"):
        ver = run(["git", program, "--version"], cwd, env)
        assert ver.returncode == 0, ver.stderr
        assert ver.stdout.startswith(f"git {program}, version ")
    if shutil.which("man", path=env["PATH"]) is None:
        pytest.skip("man is not installed on this machine: `git worker --help` cannot open a page")
    shown = {**env, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "200"}
    page = run(["git", "worker", "--help"], cwd, shown)
    assert page.returncode == 0, page.stderr
    assert NAME_LINE in page.stdout and "Exit codes:" in page.stdout and "git-worker-merge(1)" in page.stdout
    page = run(["git", "nerve", "--help"], cwd, shown)
    assert page.returncode == 0 and "git-nerve-completion(1)" in page.stdout, page.stderr
    page = run(["man", "git-worker-spawn"], cwd, shown)
    assert page.returncode == 0 and "--description" in page.stdout.replace("\u2010", "-"), page.stderr


@pytest.mark.parametrize("what", ["source", "wheel"])
def test_pip_install_into_a_virtualenv(what, source, wheel, tmp_path):
    home = Path(os.environ["HOME"])  # the hermetic HOME (its XDG_* dirs point inside it)
    env = tool_env(home)
    venv = tmp_path / "venv"
    assert run([env["UV_PYTHON"], "-m", "venv", str(venv)], tmp_path, env).returncode == 0
    proc = run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(source if what == "source" else wheel)],
               tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert (venv / "share/man/man1/git-worker.1").is_file()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"  # an activated virtualenv
    check_help(home, env, tmp_path)


@pytest.mark.parametrize("what", ["source", "wheel"])
def test_pipx_install(what, source, wheel, tmp_path):
    pipx = pip_tool(*PIPX, "pipx")
    home = Path(os.environ["HOME"])  # the hermetic HOME (its XDG_* dirs point inside it)
    env = tool_env(home)
    proc = run([str(pipx), "install", str(source if what == "source" else wheel)], tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (home / ".local/bin/git-worker").exists()
    assert (home / ".local/share/man/man1/git-worker.1").exists()  # pipx links the pages
    env["PATH"] = f"{home / '.local/bin'}{os.pathsep}{env['PATH']}"
    check_help(home, env, tmp_path)


@pytest.mark.parametrize("what", ["source", "wheel"])
def test_uv_tool_install(what, source, wheel, tmp_path):
    uv = pip_tool(*UV, "uv")
    home = Path(os.environ["HOME"])  # the hermetic HOME (its XDG_* dirs point inside it)
    env = tool_env(home)
    proc = run([str(uv), "tool", "install", str(source if what == "source" else wheel)], tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bin_dir = home / ".local/bin"
    assert (bin_dir / "git-worker").is_symlink()
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    page = home / ".local/share/man/man1/git-worker.1"
    assert not page.exists()  # uv left the pages in its tool virtualenv
    # the first command run through uv's link puts them where man-db looks from ~/.local/bin
    first = run(["git", "worker", "--version"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    assert page.is_symlink() and page.resolve().is_file()
    assert str(page.resolve()).startswith(str(home / ".local/share/uv/tools/git-nerve/"))
    check_help(home, env, tmp_path)
    # a page the user has there is never replaced
    mine = home / ".local/share/man/man1/git-nerve-demo.1"
    mine.unlink()
    mine.write_text(".TH MINE 1\n")
    assert run(["git", "nerve", "--version"], tmp_path, env).returncode == 0
    assert mine.read_text() == ".TH MINE 1\n"
    # before `uv tool uninstall`: the links git-nerve made go, the user's page stays; nothing dangles after
    man1 = home / ".local/share/man/man1"
    links = sorted(p.name for p in man1.iterdir() if p.is_symlink())
    assert links and "git-nerve-demo.1" not in links
    res = run(["git", "nerve", "uninstall-links"], tmp_path, env)
    assert res.returncode == 0, res.stderr
    said = res.stdout.splitlines()
    assert sorted(line.rsplit("/", 1)[1] for line in said if line.startswith("removed ")) == links
    assert [line for line in said if not line.startswith("removed ")] == [
        f"kept {mine}: not a symbolic link"]  # the user's own page at a name git-nerve once linked
    assert [p.name for p in man1.iterdir() if p.is_symlink()] == [] and mine.read_text() == ".TH MINE 1\n"
    proc = run([str(uv), "tool", "uninstall", "git-nerve"], tmp_path, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p for p in man1.iterdir() if p.is_symlink() and not p.exists()] == []  # no dangling link left
