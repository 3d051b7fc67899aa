"""A spawn asks git only what it cannot answer itself (issue 27: one spawn near `git worktree add -b`), and every
answer it gives itself is the one git would give: `git -c` and GIT_CONFIG_* settings still count."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from conftest import git
from fixtures.repos.hooks import hooks_dir
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.git.refs import plainly_valid
from git_nerve.hooks import install as hooks


def _spawn(work: Path, task: str, env: dict | None = None) -> list[str]:
    """`git worker spawn TASK` as a user runs it; the git commands it ran (GIT_TRACE)."""
    trace = work.parent / f"trace-{task}.txt"
    proc = subprocess.run(["git", "worker", "spawn", task], cwd=work, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {}), "GIT_TRACE": str(trace)})
    assert proc.returncode == 0, proc.stderr
    return [ln.split("trace: built-in: git ", 1)[1] for ln in trace.read_text().splitlines() if "trace: built-in: git " in ln]


def _config_env(**settings: str) -> dict:
    """GIT_CONFIG_COUNT/KEY/VALUE for ``settings`` (git's own environment configuration, as `git -c` passes)."""
    env = {"GIT_CONFIG_COUNT": str(len(settings))}
    for i, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key.replace("__", "."), value
    return env


def test_a_spawn_checks_the_branch_name_and_the_hooks_without_git(repo):
    work = repo.work
    _spawn(work, "t1")  # installs the hooks
    ran = _spawn(work, "t2")
    assert not [c for c in ran if c.startswith(("check-ref-format", "config --get", "config --show-scope"))
                or "--git-path hooks" in c], ran
    assert len([c for c in ran if c.startswith("show-ref")]) <= 2
    assert all(hooks.is_ours(hooks_dir(work) / name) for name in hooks.HOOKS)
    wt = work.parent / f"{work.name}.worktrees" / "t2"
    assert git(wt, "rev-parse", "--abbrev-ref", "HEAD") == "feat/t2"


def test_hooks_missing_from_the_hooks_path_the_environment_sets_are_installed_there(repo):
    work = repo.work
    _spawn(work, "t1")  # our hooks in .git/hooks
    elsewhere = work / ".git" / "other-hooks"  # this repository's own (git-nerve writes only there)
    ran = _spawn(work, "t2", _config_env(core__hooksPath=str(elsewhere)))
    assert any("--git-path hooks" in c for c in ran)  # a core.hooksPath is git's to resolve
    assert all(hooks.is_ours(elsewhere / name) for name in hooks.HOOKS)


def test_git_lfs_set_up_through_the_environment_gets_its_hooks_chained(repo):
    work = repo.work
    _spawn(work, "t1")
    directory = hooks_dir(work)
    assert not any(b"git lfs " in p.read_bytes() for p in directory.iterdir() if p.is_file())
    _spawn(work, "t2", _config_env(filter__lfs__process="git-lfs filter-process"))
    assert any(b"git lfs " in p.read_bytes() for p in directory.iterdir() if p.is_file())


def test_a_reference_name_is_plainly_valid_only_where_git_says_it_is_valid(tmp_path):
    names = ["refs/heads/feat/a", "refs/heads/-x", "refs/heads/.x", "refs/heads/x.", "refs/heads/x.lock",
             "refs/heads/a..b", "refs/heads//a", "refs/heads/a/", "heads", "refs/heads/@", "refs/heads/a@{b",
             "refs/heads/a b", "refs/heads/a~b", "refs/heads/x.lock/y", "refs/heads/_a", "refs/heads/ä",
             "refs/heads/a*", "/refs/heads/a", "refs/heads/a.b-c_d"]
    rng = random.Random(27)
    names += ["refs/" + "".join(rng.choice("ab.-_/@{~^:?*[\\ lock") for _ in range(rng.randint(1, 9)))
              for _ in range(400)]
    git(tmp_path, "init", "-q", "r")
    for name in names:
        if plainly_valid(name):
            assert subprocess.run(["git", "check-ref-format", name], cwd=tmp_path / "r").returncode == 0, name
    assert plainly_valid("refs/heads/feat/t1") and plainly_valid("refs/heads/my-prefix.x/task_2")


def _worker(work: Path, *args: str, env: dict | None = None) -> tuple[int, str, str]:
    proc = subprocess.run(["git", "worker", *args], cwd=work, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


def test_a_plain_spawn_starts_without_click(repo):
    code, _out, err = _worker(repo.work, "spawn", "t1", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert code == 0, err
    imported = [ln.rsplit("|", 1)[1].strip() for ln in err.splitlines() if ln.startswith("import time:")]
    assert "git_nerve.worktree_prep.prepare" in imported  # it did spawn
    assert not [m for m in imported if m == "click" or m.startswith("click.")]


def test_the_click_free_spawn_prints_and_exits_as_the_click_command_does(repo):
    """Each case twice: plain arguments (the click-free path), then the same with --no-fetch repeated, which
    only click reads (its path): the same exit code, the same bytes."""
    work = repo.work
    assert _worker(work, "spawn", "warm")[0] == 0  # the hooks installed: the first spawn says so
    assert _worker(work, "spawn", "same", "-d", "first")[0] == 0
    cases = [
        (["spawn", "{t}", "-d", "first task"], True),  # created (output differs only by the task's name)
        (["spawn", "same", "--description=first"], False),  # exists: the same input again
        (["spawn", "same", "-d", "another"], False),  # exists with another description: exit 2
        (["spawn", "bad id"], False),  # invalid id: exit 2, nothing made
        (["spawn", "{t}", "--from", "no-such-ref"], True),  # exit 2, nothing made
        (["spawn", "{t}", "--json"], True),
        (["spawn", "same", "--adopt", "--wait"], False),
    ]
    for args, per_path in cases:
        seen = []
        for path, extra in (("fast", []), ("click", ["--no-fetch"])):
            argv = [a.replace("{t}", f"c-{path}") for a in args] + ["--no-fetch", *extra]
            code, out, err = _worker(work, *argv)
            if per_path:
                out, err = out.replace("c-click", "c-fast"), err.replace("c-click", "c-fast")
            seen.append((code, _without_times(out), err))
        assert seen[0] == seen[1], args
    assert _worker(work, "spawn", "--no-fetch")[0] == 2  # no task id: click's usage error


def _without_times(out: str) -> str:
    """--json's timestamps and ports differ between two spawns made one after the other."""
    import json

    try:
        data = json.loads(out)
    except ValueError:
        import re

        return re.sub(r"Port: +\d+", "Port: N", out)  # each new task has a port block of its own
    return json.dumps({k: v for k, v in data.items() if not k.endswith(("_at", "heartbeat", "activity", "port", "age"))},
                      sort_keys=True)
