"""Cleanups stop what they started (issue 35, point 6): a running `[worktree] setup` is stopped, its whole process
group, before its worktree goes (`cancel --cleanup`, merge); a stale supervisor never writes over a newer setup's
record; a setup its `spawn --wait` left interrupted (killed) is run again by the rerun of that spawn, and by
`git worker setup T`. Real setup commands that sleep and write their pids; every wait polls with a deadline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import git
from fixtures.repos import worker as wk
from fixtures.repos.build import write
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from waiting import wait_until

#: the setup: its shell's pid and a background child's pid into ../setup-pids-<task>, then it waits for
#: ../go-<task> and leaves a `ready` file in the worktree
SETUP = ("sh -c 'echo $$ >> ../setup-pids-$NERVE_TASK_ID; sleep 300 & echo $! >> ../setup-pids-$NERVE_TASK_ID; "
         "while [ ! -e ../go-$NERVE_TASK_ID ]; do sleep 0.05; done; touch ready; kill $!'")


def _toml(work: Path, setup: str = SETUP) -> None:
    write(work, "nerve.toml", "[worktree]\nsetup = " + json.dumps(setup) + "\n")
    git(work, "add", "nerve.toml")
    git(work, "commit", "-q", "-m", "nerve.toml")
    # the person's own setup, trusted as they would (issue 35 §4: an untrusted setup is skipped)
    subprocess.run(["git", "nerve", "trust"], cwd=work, check=True, capture_output=True)


def _side(work: Path, name: str) -> Path:
    """A file beside the task worktrees (the setup's ``../name``)."""
    return work.parent / f"{work.name}.worktrees" / name


def _pids(work: Path, task: str = "t1", n: int = 2) -> list[int]:
    path = _side(work, f"setup-pids-{task}")
    lines = wait_until(lambda: path.exists() and len(path.read_text().split()) >= n and path.read_text().split(),
                       what="the setup's pids")
    return [int(x) for x in lines]


def _gone(pid: int) -> bool:
    """No such process, or a zombie (ended; this machine's pid 1 may never reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    ps = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True)
    return ps.stdout.strip().startswith("Z") or ps.stdout.strip() == ""


def _status(gw, work: Path) -> dict:
    res = gw("status --json", work)
    assert res.code == 0, res
    return {r["task_id"]: r for r in json.loads(res.out)}


def _lock(work: Path, task: str = "t1") -> Path:
    return work / ".git" / "nerve" / "setup" / f"{task}.lock"


def test_cancel_cleanup_stops_the_running_setup_and_its_children_before_the_worktree_goes(repo, gw):
    work = repo.work
    _toml(work)
    assert gw("spawn t1 --no-fetch", work).code == 0
    pids = _pids(work)
    assert _status(gw, work)["t1"]["setup"] == "running"

    res = gw("cancel t1 --cleanup --force", work)

    assert res.code == 0, res
    assert not wk.worktree(work, "t1").exists()
    assert all(_gone(p) for p in pids)  # stopped and waited for before the removal: no polling needed
    _side(work, "go-t1").touch()


def test_merge_stops_a_setup_still_running(repo, gw):
    work = repo.work
    _toml(work)
    wk.drive(work, "t1", "APPROVED")  # (no setup: the in-process spawn of the fixture)
    assert gw("setup t1", work).code == 0
    pids = _pids(work)
    res = gw("merge t1", work)
    assert res.code == 0, res
    assert all(_gone(p) for p in pids)
    _side(work, "go-t1").touch()


def test_a_stale_supervisor_never_writes_over_the_newer_setup(repo, gw):
    """retry after `cancel --cleanup`: a new setup runs; the supervisor of the old one (its generation older)
    recording its end afterwards leaves the new record alone."""
    work = repo.work
    _toml(work)
    assert gw("spawn t1 --no-fetch", work).code == 0
    _pids(work)
    row = wk.row(work, "t1")
    from git_nerve.bus import Bus
    from git_nerve.bus import prep as busprep

    with Bus(wk.bus_path(work)) as bus:
        old = busprep.get(bus.conn, "t1")
    assert gw("cancel t1 --cleanup --force", work).code == 0
    assert gw("retry t1", work).code == 0
    _pids(work, n=4)
    assert _status(gw, work)["t1"]["setup"] == "running"

    stale = subprocess.run([sys.executable, "-m", "git_nerve.worktree_prep.setup_run", str(wk.bus_path(work)), "t1",
                            row.worktree, old.setup_log, repr(old.setup_started), "--", "false"],
                           cwd=work, capture_output=True, text=True, timeout=60)
    assert stale.returncode == 0, stale

    assert _status(gw, work)["t1"]["setup"] == "running"  # not "failed": the old generation's end is not recorded
    _side(work, "go-t1").touch()
    wait_until(lambda: _status(gw, work)["t1"]["setup"] == "done", what="the new setup done")
    assert (wk.worktree(work, "t1") / "ready").is_file()


def test_spawn_wait_killed_during_its_setup_is_finished_by_its_rerun(repo, gw, sh):
    work = repo.work
    _toml(work)
    spawn = subprocess.Popen(["git", "worker", "spawn", "t1", "--no-fetch", "--wait"], cwd=work,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    pids = _pids(work)
    os.killpg(spawn.pid, signal.SIGKILL)  # the whole process group, as a terminal's kill or the kill harness
    spawn.communicate(timeout=30)
    if _lock(work).exists():  # the setup's own session survives a kill of the spawn's group: the machine's end
        os.killpg(int(_lock(work).read_text().split()[0]), signal.SIGKILL)
    wait_until(lambda: all(_gone(p) for p in pids), what="every process of the setup gone")
    assert _status(gw, work)["t1"]["setup"] == "interrupted"

    _side(work, "go-t1").touch()
    res = sh(["git", "worker", "spawn", "t1", "--no-fetch", "--wait"], work)

    assert res.code == 0, res
    assert "Setup:    done" in res.out, res
    assert (wk.worktree(work, "t1") / "ready").is_file()
    assert _status(gw, work)["t1"]["setup"] == "done"


def test_spawn_wait_rerun_waits_for_the_setup_its_killed_spawn_left_running(repo, gw, sh):
    work = repo.work
    _toml(work)
    spawn = subprocess.Popen(["git", "worker", "spawn", "t1", "--no-fetch", "--wait"], cwd=work,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    _pids(work)
    os.killpg(spawn.pid, signal.SIGKILL)
    spawn.communicate(timeout=30)
    rerun = subprocess.Popen(["git", "worker", "spawn", "t1", "--no-fetch", "--wait"], cwd=work,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _side(work, "go-t1").touch()
    out, err = rerun.communicate(timeout=60)
    assert rerun.returncode == 0, (out, err)
    assert "Setup:    done" in out
    assert _status(gw, work)["t1"]["setup"] == "done"
    assert len(_side(work, "setup-pids-t1").read_text().split()) == 2  # ran once: waited for, not run twice


def test_git_worker_setup_runs_an_interrupted_setup_again(repo, gw):
    work = repo.work
    _toml(work, "sh -c 'echo ran >> ../runs-$NERVE_TASK_ID; touch ready'")
    assert gw("spawn t1 --no-fetch --wait", work).code == 0
    (wk.worktree(work, "t1") / "ready").unlink()

    res = gw("setup t1 --wait", work)

    assert res.code == 0, res
    assert "Setup:    done" in res.out
    assert _side(work, "runs-t1").read_text() == "ran\nran\n"
    assert (wk.worktree(work, "t1") / "ready").is_file()
    js = gw("setup t1 --wait --json", work)
    assert js.code == 0 and json.loads(js.out)["setup"] == "done", js
    assert gw("cancel t1 --cleanup --force", work).code == 0
    res = gw("setup t1", work)
    assert res.code == 3 and "is FAILED" in res.err and len(res.err.strip().splitlines()) == 1, res
    res = gw("setup nope", work)
    assert res.code != 0 and len(res.err.strip().splitlines()) == 1, res
