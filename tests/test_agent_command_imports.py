"""The agent's commands (start, done, status --json, show --json, heartbeat) import neither typing nor click (issue
27: under load a command's wall time is its CPU time over its share of the cores)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fixtures.repos import build


@pytest.mark.parametrize("argv, where", [
    (["start"], "wt"), (["done", "--allow-empty"], "wt"), (["status", "--json"], "work"), (["show", "t1", "--json"], "work"),
    (["heartbeat"], "wt"),
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
    assert "git_nerve.worker.lifecycle" in loaded or argv == ["heartbeat"]
    assert not {"typing", "click"} & loaded
