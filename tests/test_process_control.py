"""Process control without /proc (issue 42): the agent-helper sweep, the group stop and the zombie checks answer
the same with /proc mounted, with /proc hidden and a ps that asks the kernel (as on macOS), and, with no table at
all, take the safe side. Each case runs a real agent process tree in a child Python whose /proc is hidden in a
private mount namespace (tests/processes.py: without_proc)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.agents import alive
from processes import without_proc
from waiting import wait_until

#: where the child Python runs: "proc" (as it is), "ps" (no /proc, a ps that answers), "none" (no /proc, no ps)
MODES = ["proc", "ps", "none"]

#: an agent that leaves two helpers behind and exits 0: one in its own process group, one in a session of its own
#: (as Codex's `bwrap --new-session`), both with their output away from the agent's pipes
AGENT = """
sleep 300 </dev/null >/dev/null 2>&1 &
echo "$!" >> "$1"
setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo "$!" >> "$1"
"""

SWEEP = """
import json, sys, uuid
from git_nerve.workflow.adapters.process import RUN_MARKER, run_process
pids, agent = sys.argv[1], sys.argv[2]
env = {"PATH": __import__("os").environ["PATH"], RUN_MARKER: uuid.uuid4().hex}
run_process(["sh", "-c", agent, "sh", pids], name="agent", cwd=None, input_text=None, timeout=60, env=env)
"""


def _run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def _argv(mode: str, argv: list[str], work: Path) -> list[str]:
    return argv if mode == "proc" else without_proc(argv, work, ps=mode == "ps")


def _helpers(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text(encoding="utf-8").split()]


def _stop(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


@pytest.mark.parametrize("mode", ["proc", "ps"])
def test_the_sweep_kills_the_helpers_an_agent_left_even_in_a_session_of_their_own(mode, tmp_path):
    pids = tmp_path / "pids"
    res = _run(_argv(mode, [sys.executable, "-c", SWEEP, str(pids), AGENT], tmp_path))
    helpers = _helpers(pids)
    try:
        assert res.returncode == 0, res.stderr
        assert len(helpers) == 2
        wait_until(lambda: not any(alive(p) for p in helpers), 10, what="the sweep to kill both helpers")
    finally:
        _stop(helpers)


def test_with_no_process_table_the_run_still_ends_and_says_nothing_was_found(tmp_path):
    """Linux with /proc hidden and no ps that answers: nothing can be listed, so nothing is killed by guess; the
    run ends as it would (the group kill needs no table)."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc here at all (macOS): its ps answers from the kernel, so no machine without a process "
                    "table can be made")
    pids = tmp_path / "pids"
    res = _run(_argv("none", [sys.executable, "-c", SWEEP, str(pids), AGENT], tmp_path))
    helpers = _helpers(pids)
    try:
        assert res.returncode == 0, res.stderr
        assert len(helpers) == 2 and all(alive(p) for p in helpers)
    finally:
        _stop(helpers)


TIMEOUT = """
import sys, time
from git_nerve.workflow.adapters.base import AdapterTimeout
from git_nerve.workflow.adapters.process import run_process
pids, agent = sys.argv[1], sys.argv[2]
t0 = time.monotonic()
try:
    run_process(["sh", "-c", agent, "sh", pids], name="agent", cwd=None, input_text=None, timeout=0.5, grace=0.5)
except AdapterTimeout:
    print(time.monotonic() - t0)
"""

#: an agent that ignores SIGTERM, with a grandchild in its group that holds its pipes
STUBBORN = """
trap '' TERM
sleep 300 &
echo "$!" >> "$1"
echo "$$" >> "$1"
wait
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_timeout_stops_the_whole_group_with_or_without_proc(mode, tmp_path):
    pids = tmp_path / "pids"
    res = _run(_argv(mode, [sys.executable, "-c", TIMEOUT, str(pids), STUBBORN], tmp_path))
    members = _helpers(pids)
    try:
        assert res.returncode == 0 and res.stdout.strip(), res.stderr
        assert float(res.stdout) < 120  # a deadline, not a speed: the grace then SIGKILL, not the agent's 300 s sleep
        assert len(members) == 2
        wait_until(lambda: not any(alive(p) for p in members), 10, what="the group to be killed")
    finally:
        _stop(members)


ZOMBIE = """
import json, os, subprocess, sys
from pathlib import Path
from git_nerve import proctable
from git_nerve.knowledge import status, trigger
git_dir = Path(sys.argv[1])
child = subprocess.Popen(["true"])
os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
trigger.lock_path(git_dir).write_text(str(child.pid))
zombie_running = status._running(git_dir)
trigger.lock_path(git_dir).write_text(str(os.getppid()))
me = proctable.process(os.getpid())
print(json.dumps({"zombie": proctable.zombie(child.pid), "me_zombie": proctable.zombie(os.getpid()),
                  "zombie_running": zombie_running, "parent_running": status._running(git_dir),
                  "me": [me.name, me.ppid] if me else None, "ppid": os.getppid()}))
child.wait()
"""


@pytest.mark.parametrize("mode", ["proc", "ps"])
def test_a_zombie_is_told_from_a_running_process_with_or_without_proc(mode, tmp_path):
    """`git nerve knowledge status` names a running sync by the pid its lock records: an exited one its parent has
    not reaped yet is not running (it used to read /proc for that, and said "running" on macOS)."""
    git_dir = tmp_path / "git"
    (git_dir / "nerve").mkdir(parents=True)
    res = _run(_argv(mode, [sys.executable, "-c", ZOMBIE, str(git_dir)], tmp_path))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["zombie"] is True and got["me_zombie"] is False
    assert got["zombie_running"] is None
    assert got["parent_running"] == got["ppid"]
    assert got["me"] is not None and got["me"][0].startswith("python") and got["me"][1] == got["ppid"]


def test_the_ps_answers_are_the_proc_answers(tmp_path):
    """Where /proc is mounted it is read; ps gives the same table (pid, parent, group, state, name)."""
    from git_nerve import proctable

    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:  # asleep first (just after the fork it runs, and may not be `sleep` yet): then both must say so
        wait_until(lambda: (p := proctable.process(sleeper.pid)) is not None and p.name == "sleep"
                   and p.state[:1] == "S", timeout=30)
        from_proc = proctable.process(sleeper.pid)
        rows = proctable._ps_rows(["-p", str(sleeper.pid)])
        assert from_proc is not None and rows and len(rows) == 1
        assert rows[0][:3] + (rows[0].name,) == from_proc[:3] + (from_proc.name,)
        assert rows[0].state[:1] == from_proc.state[:1] == "S"  # ps adds flags ("Ss": a session leader)
        assert from_proc.pgid == sleeper.pid and from_proc.ppid == os.getpid() and from_proc.name == "sleep"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert proctable.process(sleeper.pid) is None
