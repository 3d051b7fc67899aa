"""Work nobody waits on (the radar's recompute, the knowledge sync, the listener, the background sync, the
post-commit hook's background part) runs at a lower priority than the agents' own commands: on a machine whose
cores are busy with agents, `start`, `heartbeat`, `status` and `done` get a CPU first (issue 27)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from git_nerve import detach
from git_nerve.git.cli import clean_env
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent


def test_a_detached_background_process_runs_at_the_background_niceness(tmp_path):
    mod = tmp_path / "mods"
    mod.mkdir()
    (mod / "tell_niceness.py").write_text("import os\nprint('niceness', os.nice(0), flush=True)\n")
    log = tmp_path / "nerve" / "bg.log"
    env = {**clean_env(), "PYTHONPATH": str(mod)}
    proc = detach.start("tell_niceness", [], cwd=tmp_path, log=log, env=env)
    assert proc.wait(30) == 0
    assert wait_until(lambda: log.is_file() and "niceness" in log.read_text(), 10)
    expected = max(os.nice(0), detach.BACKGROUND_NICENESS) if shutil.which("nice") else os.nice(0)
    assert log.read_text().split() == ["niceness", str(expected)]


def test_background_work_started_by_background_work_is_not_lowered_again(tmp_path):
    """Absolute, not added on: a recompute started by the hook's already lowered part runs at the same niceness,
    not at the bottom (19), where any other load would starve it."""
    code = ("import os, sys; from git_nerve import detach; detach.lower_own_priority(); "
            "print(detach.lower_priority(detach.BACKGROUND_NICENESS), os.nice(0))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", str(max(os.nice(0), detach.BACKGROUND_NICENESS))]


def test_the_post_commit_hooks_background_part_lowers_its_own_priority(tmp_path):
    """The shim starts it with NERVE_HOOK_BACKGROUND=1 (`&`, never waited on); a foreground hook (pre-push, which
    the push waits for) keeps the caller's priority."""
    code = "import os, sys; from git_nerve.hooks import run; run.main(['post-merge']); print(os.nice(0))"
    env = {**clean_env(), "PYTHONPATH": str(ROOT)}
    bg = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, "NERVE_HOOK_BACKGROUND": "1"},
                        capture_output=True, text=True, check=True).stdout.split()[-1]
    fg = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                        check=True).stdout.split()[-1]
    assert int(bg) == max(os.nice(0), detach.BACKGROUND_NICENESS) and int(fg) == os.nice(0)
