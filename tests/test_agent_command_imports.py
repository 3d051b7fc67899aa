"""The agent's commands (start, done, status --json, show --json, heartbeat) import neither typing nor click (issue
27: under load a command's wall time is its CPU time over its share of the cores); an agent's reads (`git nerve
thread`, `git nerve knowledge query`, issue 37) not even dataclasses or yaml."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fixtures.repos import build


@pytest.mark.parametrize("argv, where", [
    (["start"], "wt"), (["done", "--allow-empty"], "wt"), (["status", "--json"], "work"), (["show", "t1", "--json"], "work"),
    (["heartbeat"], "wt"), (["heartbeat", "--status=x", "--progress", "0.5", "--json"], "wt"),
])
def test_agent_commands_import_no_typing_or_click(tmp_path, argv, where):
    """Each costs a command CPU its work does not need (typing ~3 ms, click ~18 ms; bench/startup.py)."""
    work = build.simple(tmp_path).work
    subprocess.run(["git", "worker", "spawn", "t1", "--no-fetch"], cwd=work, check=True, capture_output=True)
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    subprocess.run(["git", "worker", "start"], cwd=wt, check=True, capture_output=True)
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
            f"sys.argv = ['git-worker', *{argv!r}]\n"
            "from git_nerve.cli.entry import worker_main\nworker_main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=wt if where == "wt" else work, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")).split()[1:])
    assert "git_nerve.worker.lifecycle" in loaded or argv[0] == "heartbeat"
    assert "git_nerve.options" in loaded  # the arguments read by the one table of options (issue 42)
    assert not {"typing", "click"} & loaded


@pytest.mark.parametrize("argv", [["thread"], ["thread", "--json"], ["knowledge", "query", "greeting"]])
def test_an_agents_reads_import_no_typing_click_yaml_or_dataclasses(tmp_path, argv):
    """A new task's thread (its briefing and where-to-look line: a knowledge index exists) and a query: the imports
    were most of their time (issue 37: `git nerve thread` was 10.7x `python -c pass`, the same for 1 or 200 rounds)."""
    work = build.simple(tmp_path).work
    subprocess.run(["git", "config", "nerve.knowledge", "true"], cwd=work, check=True)
    subprocess.run(["git", "worker", "spawn", "t1", "--no-fetch", "-d", "say hello"], cwd=work, check=True,
                   capture_output=True)
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    subprocess.run(["git", "nerve", "knowledge", "sync"], cwd=wt, check=True, capture_output=True)
    code = ("import sys, atexit\n"
            "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
            f"sys.argv = ['git-nerve', *{argv!r}]\n"
            "from git_nerve.cli.entry import nerve_main\nnerve_main()\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=wt, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")).split()[1:])
    assert "git_nerve.knowledge.query" in loaded  # the thread's hints ran a search too
    assert not {"typing", "click", "yaml", "dataclasses", "git_nerve.cli.common"} & loaded
