"""Shell completion for the real entry points: click's protocol (commands, options, task ids from the
bus), git's bash completion calling `_git_worker` under real bash, zsh and fish where installed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BIN
from realtools import apt_tool

GIT_BASH_COMPLETION = Path("/usr/share/bash-completion/completions/git")


@pytest.fixture
def tasks(repo, sh):
    """A repository with three tasks: fix-login (IN_REVIEW), fix-logout (ASSIGNED), docs (ASSIGNED)."""
    for task, desc in (("fix-login", "Fix login"), ("fix-logout", "Fix logout"), ("docs", "Docs")):
        assert sh(["git", "worker", "spawn", task, "-d", desc], repo.work).code == 0
    rows = {r["task_id"]: r for r in json.loads(sh(["git", "worker", "status", "--json"], repo.work).out)}
    login = Path(rows["fix-login"]["worktree"])
    assert sh(["git", "worker", "start"], login).code == 0
    (login / "login.txt").write_text("fixed\n")
    subprocess.run(["git", "add", "login.txt"], cwd=login, check=True)
    subprocess.run(["git", "commit", "-qm", "fix login"], cwd=login, check=True)
    res = sh(["git", "worker", "done"], login)
    assert res.code == 0, res
    return repo


def protocol(program: str, words: list[str], cwd: Path, shell: str = "bash") -> list[str]:
    """What click's completion protocol answers for the real console script."""
    env = {**os.environ, "COMP_WORDS": " ".join([program, *words]), "COMP_CWORD": str(len(words)),
           f"_{program.replace('-', '_').upper()}_COMPLETE": f"{shell}_complete"}
    proc = subprocess.run([str(BIN / program)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if line.startswith("plain,")]


def test_commands_and_options_come_from_the_installed_program(tmp_path):
    assert protocol("git-worker", ["sp"], tmp_path) == ["spawn"]
    assert {"approve", "merge", "status", "conflicts"} <= set(protocol("git-worker", [""], tmp_path))
    assert {"--all", "--check", "--batch", "--delete-branch"} <= set(protocol("git-worker", ["merge", "--"], tmp_path))
    assert protocol("git-nerve", ["compl"], tmp_path) == ["completion"]
    assert set(protocol("git-nerve", ["completion", ""], tmp_path)) == {"bash", "zsh", "fish"}
    assert "hook-run" not in protocol("git-nerve", ["ho"], tmp_path)


def test_task_ids_come_from_the_bus_filtered_by_what_the_command_accepts(tasks):
    work = tasks.work
    assert protocol("git-worker", ["show", ""], work) == ["docs", "fix-login", "fix-logout"]
    assert protocol("git-worker", ["show", "fix-"], work) == ["fix-login", "fix-logout"]
    assert protocol("git-worker", ["approve", ""], work) == ["fix-login"]  # the one IN_REVIEW
    assert protocol("git-worker", ["merge", ""], work) == []  # nothing APPROVED
    assert protocol("git-worker", ["cancel", "--reason", "x", "d"], work) == ["docs"]
    assert protocol("git-nerve", ["thread", "fix-lo"], work) == ["fix-login", "fix-logout"]
    assert protocol("git-nerve", ["tell", "--task", "do"], work) == ["docs"]
    # outside a repository, or before `git nerve init`: nothing, silently, and no bus is made
    assert protocol("git-worker", ["show", ""], work.parent) == []


def test_completion_creates_no_bus_and_writes_nothing(repo):
    before = sorted(p.relative_to(repo.work) for p in repo.work.rglob("*"))
    assert protocol("git-worker", ["show", ""], repo.work) == []
    assert sorted(p.relative_to(repo.work) for p in repo.work.rglob("*")) == before


def _bash(script: str, cwd: Path) -> str:
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _complete_git(line: str, setup: str) -> str:
    words = line.split(" ")
    return f"""
{setup}
COMP_WORDS=({' '.join(repr(w) if w else "''" for w in words)}); COMP_CWORD={len(words) - 1}
COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}
__git_wrap__git_main
printf '[%s]\\n' "${{COMPREPLY[@]}}"
"""


@pytest.mark.skipif(not GIT_BASH_COMPLETION.is_file(), reason=f"git's bash completion ({GIT_BASH_COMPLETION}) is not installed")
def test_git_worker_tab_under_real_bash_through_gits_completion(tasks, sh):
    script = sh(["git", "nerve", "completion", "bash"], tasks.work)
    assert script.code == 0
    setup = f"source {GIT_BASH_COMPLETION}\nsource <(git nerve completion bash)"
    out = _bash(_complete_git("git worker sp", setup), tasks.work)
    assert out.splitlines() == ["[spawn ]"]  # git's completion adds no space itself: ours does
    out = _bash(_complete_git("git worker show fix-", setup), tasks.work)
    assert out.splitlines() == ["[fix-login ]", "[fix-logout ]"]
    out = _bash(_complete_git("git worker approve ", setup), tasks.work)
    assert out.splitlines() == ["[fix-login ]"]
    out = _bash(_complete_git("git nerve tell --t", setup), tasks.work)
    assert out.splitlines() == ["[--task ]"]
    # the bare command form
    out = _bash("source <(git nerve completion bash)\nCOMP_WORDS=(git-worker merge --del); COMP_CWORD=2\n"
                "__git_worker_complete; printf '[%s]\\n' \"${COMPREPLY[@]}\"", tasks.work)
    assert out.splitlines() == ["[--delete-branch]"]


def test_zsh_script_loads_and_registers(tmp_path, sh):
    zsh = str(apt_tool("zsh", "zsh"))  # the real zsh, from Debian's packages when the machine has none
    script = sh(["git", "nerve", "completion", "zsh"], tmp_path).out
    (tmp_path / "comp.zsh").write_text(script)
    proc = subprocess.run([zsh, "-f", "-c", f"autoload -U compinit && compinit -u -D && source {tmp_path}/comp.zsh "
                           "&& print -r -- $_comps[git-worker] $_comps[git-nerve] && whence -w _git-worker"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:2] == ["_git-worker", "_git-nerve"]


def test_fish_completes_commands_and_task_ids(tasks, sh):
    fish = str(apt_tool("fish", "fish"))  # the real fish, from Debian's packages when the machine has none
    script = sh(["git", "nerve", "completion", "fish"], tasks.work).out
    comp = tasks.work.parent / "comp.fish"
    comp.write_text(script)
    env = {**os.environ, "XDG_CONFIG_HOME": str(tasks.work.parent / "fishcfg")}
    proc = subprocess.run([fish, "--no-config", "-c", f"source {comp}; complete -C 'git-worker sp'; "
                           "complete -C 'git-worker approve '"],
                          cwd=tasks.work, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [line.split("\t")[0] for line in proc.stdout.splitlines()]
    assert lines == ["spawn", "fix-login"]
