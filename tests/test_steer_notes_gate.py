"""The notes hook's sh gate (steer/notes-hook.sh, steer/pending.py): with nothing pending for the task, the
command Claude Code runs after every tool call starts no Python; a note or a stop queued is never missed,
also one queued while the hook was reading the bus."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

from fixtures.repos import worker as wk
from git_nerve.bus import steer
from git_nerve.bus.connection import Bus
from git_nerve.fs import notes_marker
from git_nerve.paths import discover, stop_request_path
from git_nerve.steer import delivery, notes_hook
from git_nerve.workflow.adapters import claude
from git_nerve.workflow.adapters.base import AgentContext, StartFrame
from git_nerve.workflow.adapters.command import Invocation

BIN = Path(sys.executable).parent
PAYLOAD = json.dumps({"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_response": "x" * 200_000})


def hook_command(wt: Path, task_id: str = "t1") -> str:
    """The command the claude adapter writes into the run's Claude Code settings."""
    paths = discover(wt)
    start = StartFrame(task_id=task_id, workflow="develop", content="c", workdir=str(wt))
    inv = Invocation(argv=[], env={}, workdir=str(wt), tmpdir=str(wt), git_dir=str(paths.git_dir),
                     common_dir=str(paths.common_dir),
                     ctx=AgentContext(start=start, rounds=[], workdir=str(wt), task_id=task_id))
    command = claude.notes_command(inv)
    assert command is not None and "notes-hook.sh" in command, command
    return command


def no_python_env(tmp_path: Path) -> dict:
    """PATH without any python (only `cat`), and a PYTHONHOME under which any Python that starts dies loudly."""
    bin_dir = tmp_path / "nopython-bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "cat").exists():
        (bin_dir / "cat").symlink_to(shutil.which("cat"))
    return {"PATH": str(bin_dir), "HOME": os.environ.get("HOME", str(tmp_path)),
            "PYTHONHOME": str(tmp_path / "no-such-python-home")}


def run_hook(command: str, wt: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    # Claude Code runs a hook command through the shell, in the project directory, the hook JSON on stdin
    return subprocess.run(["/bin/sh", "-c", command], cwd=wt, input=PAYLOAD, capture_output=True, text=True,
                          timeout=30, env=env)


def tell(work: Path, *args: str) -> None:
    subprocess.run([str(BIN / "git-nerve"), "tell", *args], cwd=work, check=True, capture_output=True)


def marker(work: Path, task_id: str = "t1") -> Path:
    return notes_marker(wk.bus_path(work).parent, task_id)


def test_with_nothing_pending_the_hook_starts_no_python_and_says_nothing(repo, tmp_path):
    wt = wk.spawn(repo.work, "t1")
    command = hook_command(wt)
    res = run_hook(command, wt, env=no_python_env(tmp_path))
    assert (res.returncode, res.stdout, res.stderr) == (0, "", ""), res
    # the same environment kills any Python that starts: with a note pending, the hook fails loudly in it
    tell(repo.work, "--task", "t1", "now there is one")
    res = run_hook(command, wt, env=no_python_env(tmp_path))
    assert res.returncode != 0 and res.stderr and "now there is one" not in res.stdout, res


def test_a_note_queued_between_two_calls_is_delivered_by_the_next_and_settled_by_a_commit(repo, tmp_path):
    wt = wk.spawn(repo.work, "t1")
    command = hook_command(wt)
    assert run_hook(command, wt).stdout == ""
    tell(repo.work, "--task", "t1", "use the new API")
    assert marker(repo.work).exists()
    res = run_hook(command, wt)
    assert res.returncode == 0 and "use the new API" in json.loads(res.stdout)["hookSpecificOutput"]["additionalContext"]
    # delivered once; the marker stays until a commit has acted on the note (the hook records it)
    assert run_hook(command, wt).stdout == "" and marker(repo.work).exists()
    (wt / "CHANGES").write_text("a line\n")
    git(wt, "add", "CHANGES")
    git(wt, "commit", "-qm", "changelog")
    assert run_hook(command, wt).stdout == ""
    with Bus(wk.bus_path(repo.work)) as bus:
        assert steer.deliveries_for(bus.conn, "t1")[0].acted is not None
    assert not marker(repo.work).exists()
    res = run_hook(command, wt, env=no_python_env(tmp_path))  # nothing pending again: no Python
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")


def test_a_note_committed_while_the_hook_reads_the_bus_is_delivered_at_the_next_call(repo, monkeypatch):
    wt = wk.spawn(repo.work, "t1")
    real = delivery.deliver

    def deliver_then_a_tell_commits(bus, task_id, **kw):
        got = real(bus, task_id, **kw)
        tell(repo.work, "--task", "t1", "second, queued during the hook's read")
        return got

    with monkeypatch.context() as m:
        m.setattr(delivery, "deliver", deliver_then_a_tell_commits)
        got = notes_hook.collect(str(wt), reader="claude-code (hook)", via="hook", pid=None)
    assert got["notes"] == [] and got["stop"] is None  # it read the bus before the note's commit
    assert marker(repo.work).exists()  # nothing else to keep it for: the tell's own marker, set after its commit
    out = run_hook(hook_command(wt), wt).stdout
    assert "second, queued during the hook's read" in json.loads(out)["hookSpecificOutput"]["additionalContext"]


def test_a_hook_that_fails_leaves_the_marker_for_the_next_call(repo, monkeypatch):
    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "keep me")

    def broken(*a, **kw):
        raise RuntimeError("disk on fire")

    with monkeypatch.context() as m, pytest.raises(RuntimeError):
        m.setattr(delivery, "deliver", broken)
        notes_hook.collect(str(wt), reader="claude-code (hook)", via="hook", pid=None)
    assert marker(repo.work).exists()
    assert "keep me" in run_hook(hook_command(wt), wt).stdout


def test_a_note_to_every_task_marks_every_live_task(repo):
    wt1, wt2 = wk.spawn(repo.work, "t1"), wk.spawn(repo.work, "t2")
    tell(repo.work, "--all", "everyone: rebase on main")
    for task, wt in (("t1", wt1), ("t2", wt2)):
        assert "everyone: rebase on main" in run_hook(hook_command(wt, task), wt).stdout


def test_the_runners_stop_request_passes_the_gate(repo):
    wt = wk.spawn(repo.work, "t1")
    stop_request_path(discover(wt).git_dir).write_text('stopped by queued message: "halt"\n')
    out = json.loads(run_hook(hook_command(wt), wt).stdout)
    assert out["continue"] is False and "halt" in out["stopReason"]


def test_the_marker_is_the_tasks_however_its_id_is_spelled(repo):
    wt = wk.spawn(repo.work, "Ab1")
    tell(repo.work, "--task", "Ab1", "case does not matter")
    assert "case does not matter" in run_hook(hook_command(wt, "AB1"), wt).stdout


GATE = Path(notes_hook.__file__).with_name("notes-hook.sh")


@pytest.mark.parametrize("shell", [s for s in ("/bin/sh", "dash", "bash", "busybox") if shutil.which(s)])
def test_the_gate_is_plain_posix_sh(shell, tmp_path):
    """Under every POSIX shell at hand: no marker, the command is not run and the input is read and dropped;
    a marker (or the stop-request file), the command runs in the gate's place with the input untouched."""
    argv = [shell, "sh", GATE] if shell == "busybox" else [shell, GATE]
    marker_file, stop_file, ran = tmp_path / "marker", tmp_path / "stop-request", tmp_path / "ran"
    command = ["/bin/sh", "-c", f"cat > '{ran}'"]
    res = subprocess.run([*argv, marker_file, stop_file, *command], input=PAYLOAD, capture_output=True, text=True)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "") and not ran.exists()
    for present in (marker_file, stop_file):
        present.write_text("")
        res = subprocess.run([*argv, marker_file, stop_file, *command], input=PAYLOAD, capture_output=True, text=True)
        assert res.returncode == 0 and ran.read_text() == PAYLOAD
        present.unlink()
        ran.unlink()
