"""Security: no shell anywhere, files under <git-common-dir>/nerve/ that honour
the umask and are never world-writable, and API keys that never reach the
bus, threads, outbox, logs or output."""

from __future__ import annotations

import ast
import os
import stat
import subprocess
from pathlib import Path

import pytest
import reliability_support as rs

from fixtures.repos import build

SOURCES = [rs.ROOT / "git_nerve", rs.ROOT / "bench", rs.ROOT / "fixtures"]


def _python_files() -> list[Path]:
    files = []
    for root in SOURCES:
        for path in root.rglob("*"):
            if path.is_file() and (path.suffix == ".py" or path.read_bytes()[:40].startswith(b"#!/usr/bin/env python")):
                files.append(path)
    return files


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


SHELL_CALLS = {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput", "os.execl", "os.execlp",
               "asyncio.create_subprocess_shell", "pty.spawn", "commands.getoutput"}


def shell_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        where = f"{path.relative_to(rs.ROOT) if path.is_relative_to(rs.ROOT) else path}:{node.lineno}"
        if name in SHELL_CALLS or name.endswith((".system", ".popen")) and name.split(".")[0] in ("os",):
            found.append(f"{where}: {name}()")
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                found.append(f"{where}: {name}(shell=...)")
        if name.startswith("subprocess.") and node.args and isinstance(node.args[0], (ast.Constant, ast.JoinedStr)):
            found.append(f"{where}: {name}() with a command string instead of an argv list")
    return found


def test_no_shell_anywhere():
    files = _python_files()
    assert len(files) > 40, "the scan must see the sources"
    found = [hit for path in files for hit in shell_uses(path)]
    assert not found, "\n".join(found)


def test_the_shell_scan_catches_what_it_looks_for(tmp_path):
    bad = tmp_path / "probe.py"
    bad.write_text("import os, subprocess\nos.system('ls')\nsubprocess.run(['ls'], shell=True)\n"
                   "subprocess.check_output(f'git {x}')\nos.popen('ls')\nsubprocess.run(['ls'], shell=False)\n",
                   encoding="utf-8")
    assert [hit.split(": ", 1)[0].rsplit(":", 1)[1] for hit in shell_uses(bad)] == ["2", "3", "4", "5"]


# -- file modes ------------------------------------------------------------------------------------------------


def _nerve_modes(common: Path) -> list[tuple[str, int]]:
    nerve_dirs = [common / "nerve", *(common / "worktrees").glob("*/nerve")]
    return [(str(p.relative_to(common)), stat.S_IMODE(p.lstat().st_mode))
            for d in nerve_dirs if d.exists() for p in [d, *d.rglob("*")]]


def _flow(tmp_path: Path, umask: int, seen: list, *, shared: bool = False) -> None:
    """The whole lifecycle (hooks, knowledge index, threads, steering) under ``umask``, noting file modes;
    ``shared``: in a group-shared git dir (`git init --shared=group`: core.sharedRepository, group-writable
    setgid directories)."""
    work = build.simple(tmp_path).work
    if shared:
        build.git(work, "config", "core.sharedRepository", "group")
        (work / ".git" / "nerve").mkdir(exist_ok=True)  # as an older git-nerve left it: group-writable
        for d in [work / ".git", *(p for p in (work / ".git").rglob("*") if p.is_dir())]:
            d.chmod(0o2775)
    (work / "knowledge.yaml").write_text('include:\n  - "**/*.md"\n', encoding="utf-8")
    build.git(work, "add", "knowledge.yaml")
    build.git(work, "commit", "-q", "-m", "knowledge config")

    def run(argv, cwd):
        proc = subprocess.run(argv, cwd=cwd, env=dict(os.environ), capture_output=True, text=True, umask=umask,
                              check=False)
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)

    run(["git", "worker", "spawn", "t1", "-d", "modes"], work)
    wt = work.parent / "project.worktrees" / "t1"
    run(["git", "worker", "start"], wt)
    (wt / "notes.md").write_text("# notes\n", encoding="utf-8")
    run(["git", "add", "notes.md"], wt)
    run(["git", "commit", "-q", "-m", "notes"], wt)
    run(["git", "worker", "heartbeat", "--status", "writing"], wt)
    run(["git", "nerve", "post", "--role", "tester", "all good"], wt)
    run(["git", "nerve", "tell", "--task", "t1", "a note"], work)
    run(["git", "nerve", "knowledge", "sync"], wt)
    run(["git", "worker", "done"], wt)
    seen.extend(_nerve_modes(rs.common_dir(work)))  # the worktree's own nerve dir goes with the merge
    run(["git", "worker", "approve", "t1"], work)
    run(["git", "worker", "merge", "t1"], work)
    run(["git", "nerve", "knowledge", "sync"], work)
    seen.extend(_nerve_modes(rs.common_dir(work)))


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077], ids=["umask-000", "umask-022", "umask-077"])
def test_files_under_nerve_honour_the_umask_and_are_never_world_writable(tmp_path, umask):
    seen: list[tuple[str, int]] = []
    _flow(tmp_path, umask, seen)
    names = {Path(rel).name for rel, _ in seen}
    assert {"bus.db", ".worker-ctx.json", "knowledge.db"} <= names and any(n.endswith(".lock") for n in names)
    bad = set()
    for rel, mode in seen:
        if mode & stat.S_IWOTH:
            bad.add(f"{oct(mode)} {rel}: world-writable")
        elif mode & umask:
            bad.add(f"{oct(mode)} {rel}: ignores umask {oct(umask)}")
    assert not bad, "\n".join(sorted(bad))


def test_in_a_group_shared_git_dir_everything_under_nerve_is_its_owners_only(tmp_path):
    """Issue 35: with `git init --shared=group` and umask 002 another user of the group could read the bus, plant a
    socket or replace a record in a group-writable nerve dir: every directory there is 0700, every file 0600."""
    seen: list[tuple[str, int]] = []
    _flow(tmp_path, 0o002, seen, shared=True)
    assert any(rel == "nerve" for rel, _ in seen) and any(rel.endswith("bus.db") for rel, _ in seen)
    bad = sorted({f"{oct(mode)} {rel}" for rel, mode in seen if mode & 0o077})
    assert not bad, "\n".join(bad)


# -- secrets -----------------------------------------------------------------------------------------------------

KEY = "sk-planted-9f8e7d6c5b4a39281706f5e4d3c2b1a0"

LEAK_FLOW = """
import os

from pydantic import BaseModel

from git_nerve.workflow import END, Role, Workflow
from git_nerve.workflow.adapters import create_http


class Ok(BaseModel):
    done: bool = True


agent = create_http(os.environ["NERVE_TEST_URL"], "fake-model", api_key_env="NERVE_PLANTED_KEY")


def moderator(thread):
    return END if len(thread.of("agent")) >= 3 else "agent"


workflow = Workflow(name="leak", roles={"agent": Role(agent, "Do the next step.", Ok)}, moderator=moderator)
"""


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(path)
            except OSError:
                continue
    return found


def test_a_planted_api_key_never_reaches_the_bus_threads_outbox_logs_or_output(repo, tmp_path):
    from fixtures.agents import ChatServer, Reply, completion

    server = ChatServer()
    try:
        server.reply(Reply(body=completion('Done.\n```json\n{"done": true}\n```\n')))
        server.reply(Reply(status=401, echo_auth=True))  # a careless server echoes the credentials
        server.reply(Reply(body=completion('Auth was fine.\n```json\n{"done": true}\n```\n')))
        work = repo.work
        flow = work / ".nerve" / "workflows" / "leak.py"
        flow.parent.mkdir(parents=True)
        flow.write_text(LEAK_FLOW, encoding="utf-8")
        env = {**os.environ, "NERVE_PLANTED_KEY": KEY, "NERVE_TEST_URL": server.base_url}
        outputs = []

        def run(argv, cwd=work, ok=(0,)):
            res = rs.run(argv, cwd, env=env)
            outputs.append(res)
            assert res.code in ok, res
            return res

        run(["git", "nerve", "trust"])  # the person's own workflow file (issue 35: a workflow runs once trusted)
        run(["git", "worker", "spawn", "t1"])
        wt = work.parent / "project.worktrees" / "t1"
        run(["git", "worker", "start"], wt)
        run(["git", "nerve", "run", "leak", "--task", "t1"], ok=(0, 1))
        run(["git", "nerve", "run", "leak", "--task", "t1", "--json"], ok=(0, 1))
        run(["git", "nerve", "tell", "--task", "t1", "note after the run"])
        for argv in (["git", "nerve", "thread", "t1"], ["git", "nerve", "thread", "t1", "--json"],
                     ["git", "nerve", "outbox"], ["git", "nerve", "outbox", "--json"],
                     ["git", "worker", "show", "t1"], ["git", "worker", "show", "t1", "--json"],
                     ["git", "worker", "status", "--json"]):
            run(argv)
        auths = [r["headers"].get("Authorization") for r in server.requests]
        assert f"Bearer {KEY}" in auths, "the key was planted and used"
        thread = rs.run(["git", "nerve", "thread", "t1", "--json"], work, env=env).out
        assert "[redacted]" in thread, "the echoed credentials were scrubbed, not dropped silently"
    finally:
        server.close()
    leaked = [f"{' '.join(r.argv)}: output" for r in outputs if KEY in r.out or KEY in r.err]
    needle = KEY.encode()
    for root in (tmp_path, Path(os.environ["HOME"])):
        leaked += [str(p) for p in _files_holding(root, needle)]
    # the git objects too (commit messages, notes), loose or packed
    all_objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=work,
                                 capture_output=True, check=False).stdout
    if needle in all_objects:
        leaked.append("a git object")
    assert not leaked, "\n".join(leaked)
