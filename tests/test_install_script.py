"""install.sh for real, on a fresh (temporary) HOME: the README's install line, where things go,
`git worker --help` through man, completion through bash-completion, a reinstall, and an uninstall
that removes exactly what the install recorded."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, ROOT
from realtools import CACHE, REAL_ENV

INSTALL = ROOT / "install.sh"
BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")


def _path_without_dev_venv() -> str:
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p and Path(p) != BIN)


def install_env(**extra: str) -> dict[str, str]:
    """The hermetic environment (temporary HOME) without this checkout's venv on PATH, with the
    machine's pip settings and proxies passed through and a pip cache outside HOME and the repository."""
    env = dict(os.environ)
    env["PATH"] = _path_without_dev_venv()
    for key, value in REAL_ENV.items():
        if key.startswith("PIP_") or key.lower() in {"http_proxy", "https_proxy", "no_proxy", "all_proxy"}:
            env[key] = value
    env["PIP_CACHE_DIR"] = str(CACHE / "pip-cache-install")
    env.pop("MANPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env.update(extra)
    return env


def sh(command: str | list[str], cwd: Path, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    argv = ["sh", "-c", command] if isinstance(command, str) else command
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) + ("/" if p.is_dir() and not p.is_symlink() else "")
            for p in root.rglob("*")}


def local_tree(home: Path) -> set[str]:
    return {p for p in tree(home) if p.startswith(".local")}


def with_parents(files: set[str]) -> set[str]:
    out = set(files)
    for f in files:
        parts = f.split("/")[:-1]
        out |= {"/".join(parts[: i + 1]) + "/" for i in range(len(parts))}
    return out


def readme_install_line() -> str:
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert blocks[0] == "./install.sh --demo"
    return blocks[0]


@pytest.mark.slow
@pytest.mark.timeout(1200)  # three installs and two demos, each real
def test_the_readme_line_on_a_fresh_home_then_help_completion_reinstall_and_uninstall(tmp_path):
    home = Path(os.environ["HOME"])
    # what install.sh writes is under ~/.local (build tools pip runs may leave their own dotfiles in HOME)
    before = local_tree(home)
    env = install_env()
    bin_dir = home / ".local" / "bin"

    # 1. The README's line, verbatim (plus the demo's fast form and a directory, to keep the test short), with
    #    ~/.local/bin not on PATH: installs, says how to put it on PATH, and shows the demo from what it
    #    installed: exit 0 (before, `./install.sh && git nerve demo` stopped at exit 3 with no demo).
    res = sh(readme_install_line() + " --fast --dir " + str(tmp_path / "first-demo"), ROOT, env, timeout=1200)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "is not a git command" not in res.stderr and "CONFLICTED" in res.stdout  # the demo ran through
    assert f"under {home}/.local" in res.stdout  # says where, root included: no silent /usr/local
    line = f'export PATH="{bin_dir}:$PATH" && git nerve demo'
    assert line in [row.strip() for row in res.stderr.splitlines()], res.stderr
    assert sh([str(INSTALL)], ROOT, env).returncode == 3  # without --demo: installed, not on PATH (as before)
    manifest = home / ".local" / "share" / "git-nerve" / "install-manifest"
    recorded = [row.split(" ", 2)[2] for row in manifest.read_text().splitlines()]
    assert all(p.startswith(f"{home}/") for p in recorded), recorded  # nothing outside HOME (no /usr/local)
    for path in (bin_dir / "git-worker", bin_dir / "git-nerve", home / ".local/share/man/man1/git-worker-spawn.1",
                 home / ".local/share/bash-completion/completions/git-worker",
                 home / ".local/share/zsh/site-functions/_git-nerve",
                 home / ".local/share/fish/vendor_completions.d/git-worker.fish",
                 home / ".local/share/git-nerve/venv/pyvenv.cfg"):
        assert path.exists(), path
        assert str(path) in recorded or str(path.parent) in recorded, path

    # 2. The printed line works as printed (the demo's fast form, to keep the test short).
    before_demo = local_tree(home)
    demo = sh(line + " --fast --dir " + str(tmp_path / "demo"), tmp_path, env, timeout=600)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "CONFLICTED" in demo.stdout
    demo_made = {p for p in local_tree(home) - before_demo if not p.endswith("/")}  # the demo's own data (kept)

    on_path = install_env(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    # 3. `git worker --help` opens the whole page, found by man-db from ~/.local/bin on PATH.
    if shutil.which("man", path=env["PATH"]):
        where = sh(["man", "-w", "git-worker"], tmp_path, on_path)
        assert where.stdout.strip() == str(home / ".local/share/man/man1/git-worker.1"), where
        page = sh(["git", "worker", "--help"], tmp_path, {**on_path, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "200"})
        assert page.returncode == 0, page.stderr
        assert "git-worker - Run many agents on one repository: one task = one branch = one worktree." in page.stdout
        assert "Exit codes:" in page.stdout and "git-worker-merge(1)" in page.stdout
        page = sh(["git", "nerve", "--help"], tmp_path, {**on_path, "MANPAGER": "cat", "PAGER": "cat"})
        assert page.returncode == 0 and "git-nerve-completion(1)" in page.stdout, page.stderr
    else:
        print("man is not installed: `git worker --help` checked only as the page's place in the manpath")
    assert (bin_dir.parent / "share" / "man" / "man1" / "git-worker.1").is_file()  # man-db's <PATH dir>/../share/man

    # 4. bash-completion finds the installed completion when git's completion asks for `git-worker`.
    if BASH_COMPLETION.is_file():
        script = (f"source {BASH_COMPLETION}\n_completion_loader git\n"
                  "COMP_WORDS=(git worker sp); COMP_CWORD=2; COMP_LINE='git worker sp'; COMP_POINT=13\n"
                  "__git_wrap__git_main; printf '[%s]\\n' \"${COMPREPLY[@]}\"")
        out = sh(["bash", "--norc", "--noprofile", "-c", script], tmp_path, on_path)
        assert out.stdout.splitlines() == ["[spawn ]"], out.stdout + out.stderr
    else:
        print(f"bash-completion is not installed ({BASH_COMPLETION}): its loading of our file is not checked")

    # 5. A rerun with the bin dir on PATH: exit 0, the same things recorded.
    again = sh([str(INSTALL)], ROOT, on_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(row.split(" ", 2)[2] for row in manifest.read_text().splitlines()) == sorted(recorded)

    # 6. Uninstall: everything recorded goes, and nothing else (a file of the user's beside ours stays).
    mine = home / ".local" / "share" / "man" / "man1" / "mine.1"
    mine.write_text(".TH MINE 1\n")
    (bin_dir / "my-tool").write_text("#!/bin/sh\n")
    res = sh([str(INSTALL), "--uninstall"], ROOT, on_path)
    assert res.returncode == 0, res.stdout + res.stderr
    after = local_tree(home)
    kept = with_parents({".local/share/man/man1/mine.1", ".local/bin/my-tool", *demo_made})
    assert after - before == kept, (after - before) ^ kept
    assert before - after == set()
    again = sh([str(INSTALL), "--uninstall"], ROOT, on_path)
    assert again.returncode == 1 and "nothing to uninstall" in again.stderr


def test_a_file_the_install_did_not_make_is_never_overwritten(tmp_path):
    home = Path(os.environ["HOME"])
    bin_dir = home / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    theirs = bin_dir / "git-worker"
    theirs.write_text("#!/bin/sh\necho pip --user's\n")
    res = sh([str(INSTALL)], ROOT, install_env())
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"install.sh: {theirs} exists and was not installed by install.sh under {home}/.local; "
        "move it away, or choose another PREFIX=DIR"]
    assert theirs.read_text() == "#!/bin/sh\necho pip --user's\n"
    assert not (home / ".local" / "share").exists()  # refused before anything was made


def test_an_unknown_argument_is_one_line_and_exit_2(tmp_path):
    res = sh([str(INSTALL), "--bogus"], tmp_path, install_env(PREFIX=str(tmp_path / "p")))
    assert res.returncode == 2
    assert res.stderr == "install.sh: unknown argument '--bogus' (usage: ./install.sh [--demo [DEMO ARGS]] | --uninstall)\n"
    assert not (tmp_path / "p").exists()


def test_uninstall_with_nothing_installed_says_so(tmp_path):
    res = sh([str(INSTALL), "--uninstall"], ROOT, install_env(PREFIX=str(tmp_path / "p")))
    assert res.returncode == 1
    assert res.stderr.strip() == (f"install.sh: nothing to uninstall: no {tmp_path}/p/share/git-nerve/install-manifest "
                                  f"(an install under PREFIX={tmp_path}/p records one)")
    assert not (tmp_path / "p").exists()


@pytest.mark.slow
def test_prefix_overrides_and_uninstall_leaves_the_prefix_as_it_was(tmp_path):
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "other").write_text("x")
    home = Path(os.environ["HOME"])
    home_before = local_tree(home)
    env = install_env(PREFIX=str(prefix))
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env['PATH']}"
    res = sh([str(INSTALL)], tmp_path, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Installing git-nerve under PREFIX={prefix}" in res.stdout
    assert os.readlink(prefix / "bin" / "git-nerve") == str(prefix / "share/git-nerve/venv/bin/git-nerve")
    assert (prefix / "share/man/man1/git-nerve-completion.1").is_file()
    assert local_tree(home) == home_before  # nothing in ~/.local
    ver = sh(["git", "nerve", "--version"], tmp_path, env)
    assert ver.returncode == 0 and "git nerve, version" in ver.stdout
    res = sh([str(INSTALL), "--uninstall"], tmp_path, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert tree(prefix) == {"bin/", "bin/other"}
