"""`git worker run -- CMD`: start, heartbeats while CMD runs, the round, --done, signals."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.agents import alive, install, wait_for
from git_nerve.bus import messages, rounds, workers
from git_nerve.bus.connection import Bus
from git_nerve.workflow.wrap import run_command

BIN = Path(sys.executable).parent
PY = sys.executable


@pytest.fixture
def task(repo, gw):
    assert gw(["spawn", "t1", "-d", "wrap me"], repo.work).code == 0
    return repo.work, repo.work.parent / "project.worktrees" / "t1"


def bus_of(work: Path) -> Bus:
    return Bus(work / ".git" / "nerve" / "bus.db")


def last_round(work: Path) -> rounds.Round:
    bus = bus_of(work)
    try:
        n = rounds.last_round(bus.conn, "t1")
        return rounds.load(bus.conn, "t1", [n])[0]
    finally:
        bus.close()


def worker_row(work: Path) -> workers.Worker:
    bus = bus_of(work)
    try:
        return workers.get(bus.conn, "t1")
    finally:
        bus.close()


def state(work: Path) -> str:
    return worker_row(work).state


def test_run_starts_the_task_and_records_exit_code_and_output_tail(task, gw):
    work, worktree = task
    script = (
        "import os, sys, time\nfor i in range(100): print('line', i)\nsys.stdout.flush()\ntime.sleep(0.2)\n"
        "sys.stderr.write('warn: careful\\n')\ntime.sleep(0.2)\nprint('cwd', os.getcwd())\nsys.exit(3)"
    )
    res = gw(["run", "--", PY, "-c", script], worktree)
    assert res.code == 3
    assert "line 99" in res.out and "careful" in res.err  # passed through
    assert "exited 3" in res.err and "round #1 of t1" in res.err
    r = last_round(work)
    assert r.role == Path(PY).name and r.metadata["exit_code"] == 3 and r.metadata["command"] == Path(PY).name
    assert "line 99" in r.content and "line 10" not in r.content  # only the tail
    assert f"cwd {worktree}" in r.content and "warn: careful" in r.content  # both streams, in arrival order
    assert set(r.metadata) == {"command", "exit_code", "duration_s", "commits"}  # the arguments are not recorded
    assert state(work) == "WORKING"
    bus = bus_of(work)
    beats = [m for m in messages.for_task(bus.conn, "t1", kinds=("heartbeat",)) if m.payload.get("source") == "run"]
    bus.close()
    assert len(beats) == 1  # one as CMD started, even though it ended before the first interval


def test_done_after_a_successful_command_only(task, gw):
    work, worktree = task
    res = gw(["run", "--done", "--", PY, "-c", "raise SystemExit(1)"], worktree)
    assert res.code == 1 and state(work) == "WORKING"
    # exit 0 without a commit is the agent's word only: git says there is nothing to review
    res = gw(["run", "--task", "t1", "--done", "--role", "coder", "--", PY, "-c", "print('ok')"], work)
    assert res.code == 1 and "not marked done: no new commit on feat/t1" in res.err and state(work) == "WORKING"
    commit = ("import subprocess, pathlib; pathlib.Path('src/app.py').write_text('x = 1\\n'); "
              "subprocess.run(['git', 'commit', '-qam', 'edit'], check=True); print('ok')")
    res = gw(["run", "--task", "t1", "--done", "--role", "coder", "--", PY, "-c", commit], work)
    assert res.code == 0, res
    assert "done: IN_REVIEW" in res.err and state(work) == "IN_REVIEW"
    assert last_round(work).role == "coder"
    res = gw(["run", "--", PY, "-c", "print('late')"], worktree)
    assert res.code == 3 and "it is IN_REVIEW" in res.err


def test_bad_input_changes_nothing(task, gw):
    work, worktree = task
    res = gw(["run", "--", "no-such-agent-binary", "--flag"], worktree)
    assert res.code == 2 and "command not found: no-such-agent-binary" in res.err
    assert state(work) == "ASSIGNED"
    assert gw(["run"], worktree).code == 2
    res = gw(["run", "--", PY, "-c", "pass"], work)  # the main checkout is no task's worktree
    assert res.code == 2 and "pass --task" in res.err


def test_heartbeats_are_on_the_bus_while_the_command_runs(task):
    work, worktree = task
    subprocess.run(["git", "config", "nerve.heartbeatInterval", "0.2"], cwd=work, check=True)
    proc = subprocess.Popen([str(BIN / "git-worker"), "run", "--", PY, "-c", "import time; time.sleep(1.2)"],
                            cwd=worktree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen_while_running = 0
    status_while_running = set()
    bus = bus_of(work)
    try:
        while proc.poll() is None:
            beats = [m for m in messages.for_task(bus.conn, "t1", kinds=("heartbeat",)) if m.payload.get("source") == "run"]
            status = workers.get(bus.conn, "t1").heartbeat_status
            if proc.poll() is None:
                seen_while_running = max(seen_while_running, len(beats))
                status_while_running.add(status)
            time.sleep(0.1)  # samples the heartbeats while the command runs (its 1.2 s make the time pass)
        w = workers.get(bus.conn, "t1")
    finally:
        bus.close()
    _, err = proc.communicate()
    assert proc.returncode == 0, err
    assert seen_while_running >= 3
    assert f"running {Path(PY).name}" in status_while_running
    assert w.heartbeat_status.startswith(f"run {Path(PY).name} exited 0 at ") and w.state == "WORKING"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["sigterm", "sigint", "sighup"])
def test_signals_are_forwarded_to_the_command(task, sig, tmp_path):
    work, worktree = task
    ready = tmp_path / "ready"
    script = (
        "import signal, sys, time, pathlib\n"
        "def bye(n, f):\n    print('got', signal.Signals(n).name, flush=True); sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, bye); signal.signal(signal.SIGINT, bye); signal.signal(signal.SIGHUP, bye)\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen([str(BIN / "git-worker"), "run", "--", PY, "-c", script],
                            cwd=worktree, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(ready.exists, timeout=20)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 7, err
    assert f"got {sig.name}" in out
    r = last_round(work)
    assert r.metadata["exit_code"] == 7 and f"got {sig.name}" in r.content
    assert status_of(work).startswith(f"run {Path(PY).name} exited 7 at ")


def status_of(work: Path) -> str:
    return worker_row(work).heartbeat_status


def test_a_finished_run_says_how_it_ended_not_running(task, gw, repo):
    """`git worker run -- false`: the row says `run false exited 1 at HH:MM:SS` in status --json and the console's
    summary, never `running false` once it ended; a killed command says which signal."""
    work, worktree = task
    assert gw(["run", "--", "false"], worktree).code == 1
    line = status_of(work)
    assert re.fullmatch(r"run false exited 1 at \d\d:\d\d:\d\d", line), line
    rows = json.loads(gw(["status", "--json"], work).out)
    assert rows[0]["status"] == line
    res = gw(["run", "--", "sh", "-c", "kill -TERM $$"], worktree)
    assert res.code == 143
    assert re.fullmatch(r"run sh killed by SIGTERM at \d\d:\d\d:\d\d", status_of(work)), status_of(work)
    assert gw(["run", "--", "true"], worktree).code == 0
    assert status_of(work).startswith("run true exited 0 at ")


def test_a_tick_can_stop_the_command_and_its_group(task, monkeypatch, tmp_path):
    work, worktree = task
    fakes = install(monkeypatch, tmp_path / "fakes")
    subprocess.run(["git", "config", "nerve.heartbeatInterval", "0.2"], cwd=work, check=True)
    answers = iter([None, "stopped by queued message: \"stop\""])
    t0 = time.monotonic()
    result = run_command(["stubborn-agent"], cwd=worktree, on_tick=lambda t: next(answers, None), grace=0.5)
    assert time.monotonic() - t0 < 10
    assert result.stopped == 'stopped by queued message: "stop"'
    assert result.signal == signal.SIGKILL and result.exit_code == 128 + signal.SIGKILL  # it ignored SIGTERM
    assert result.heartbeats >= 2
    r = last_round(work)
    assert r.metadata["stopped"] == result.stopped and r.metadata["signal"] == "SIGKILL"
    assert "you cannot stop me" in r.content
    assert not [p for p in fakes.pid_list() if alive(p)]


def test_help(gw):
    res = gw(["run", "--help"], Path.cwd())
    assert res.code == 0 and "--done" in res.out and "nerve.heartbeatInterval" in res.out


def test_a_signal_before_the_command_started_is_forwarded_once_it_has(tmp_path):
    """`git worker run` installs its forwarding before it starts the command: a Ctrl-C that arrives in between
    reaches the command (it used to end the wrapper with 130 and leave the command running: a flaky CI run)."""
    from git_nerve.workflow.wrap import _Forwarding

    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGINT, lambda n, f: sys.exit(7))\n"
              "print('ready', flush=True)\n"
              "time.sleep(30)\n")
    with _Forwarding() as forwarding:
        os.kill(os.getpid(), signal.SIGINT)  # before the command exists: kept, not a KeyboardInterrupt
        proc = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert proc.stdout.readline() == "ready\n"
        forwarding.started(proc)
        assert proc.wait(timeout=20) == 7
