"""Issue 36, points 5 and 6 (a takeover is a takeover), through a real `git daemon` on 127.0.0.1 and clones
playing the machines: what a person said to a task reaches whichever machine holds it, once, and the teller sees
where; the fenced holder's own push cannot make the new holder's `done` fail; a machine online and working keeps
its task under ``takeover = "auto"``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from fixtures.repos import build
from tests import shared_support as ss
from tests.shared_support import daemon  # noqa: F401  (the fixture)
from tests.waiting import wait_until


def _row(work: Path, task: str):
    return ss.row(work, task)


def _owner(bare: Path, task: str) -> str:
    tip = build.git(bare, "rev-parse", f"refs/nerve/claims/{task}")
    return json.loads(build.git(bare, "show", f"{tip}:record.json"))["owner"]


def _gone_silent(one: Path, two: Path, lease: float) -> None:
    """``two`` saw ``one``'s log; then ``one`` says nothing for longer than the lease."""
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)
    time.sleep(lease + 0.5)


def test_the_fenced_holders_plain_push_is_archived_by_the_new_holders_done(tmp_path, daemon):
    url = daemon.url("project.git")
    bare = daemon.base / "project.git"
    one, two = ss.team(tmp_path, url, ["one", "two"], lease=2)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    wt_one = Path(_row(one, "t").worktree)
    build.commit_file(wt_one, "one.txt", "one's work\n")
    _gone_silent(one, two, 2)
    ss.ok(["worker", "takeover", "t"], two)
    ss.ok(["worker", "start", "--task", "t"], two)
    wt_two = Path(_row(two, "t").worktree)
    build.commit_file(wt_two, "two.txt", "two's work\n")
    # one is back and pushes its task's branch by hand before any sync (the hook does not know yet)
    pushed = subprocess.run(["git", "push", "--no-verify", "origin", "feat/t"], cwd=wt_one, capture_output=True,
                            text=True)
    assert pushed.returncode == 0, pushed.stderr
    theirs = build.git(one, "rev-parse", "feat/t")
    assert build.git(bare, "rev-parse", "feat/t") == theirs
    proc = ss.run(["worker", "done", "--task", "t"], two)
    assert proc.returncode == 0, proc.stderr
    assert "failed to push some refs" not in proc.stdout + proc.stderr
    kept = [ln for ln in proc.stderr.splitlines() if ln.startswith("kept: ")]
    assert len(kept) == 1 and "after this machine took t over from one" in kept[0], proc.stderr
    assert "archived under refs/nerve/archive/t" in kept[0] and theirs[:12] in kept[0]
    mine = build.git(two, "rev-parse", "feat/t")
    assert build.git(bare, "rev-parse", "feat/t") == mine
    build.git(two, "merge-base", "--is-ancestor", theirs, "refs/nerve/archive/t")
    assert _owner(bare, "t") == "two"


def _working(tmp_path, url: str, lease: float) -> tuple[Path, Path, Path]:
    one, two = ss.team(tmp_path, url, ["one", "two"], lease=lease, shared='takeover = "auto"\n')
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)  # two has seen one's log: from now on it judges one's lease
    return one, two, Path(_row(one, "t").worktree)


def _alive_for(seconds: float, beat) -> None:
    """``beat`` (a sign of life of machine one) every half second for ``seconds``: the time passing is the point."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        beat()
        time.sleep(0.5)


def test_a_machine_committing_keeps_its_task_under_takeover_auto(tmp_path, daemon):
    """one commits in its task's worktree (no `git nerve sync`, no transition) for longer than the lease; two's
    plain `git nerve sync` with ``takeover = "auto"`` takes nothing (before: it took the WORKING task). Once one
    stops, two takes it after the lease."""
    bare = daemon.base / "project.git"
    one, two, wt = _working(tmp_path, daemon.url("project.git"), lease=3)
    n = iter(range(1000))
    _alive_for(4.5, lambda: build.commit_file(wt, "work.txt", f"step {next(n)}\n"))
    report = json.loads(ss.ok(["nerve", "sync", "--json"], two).stdout)
    assert report.get("taken_over", []) == [] and _owner(bare, "t") == "one", report
    assert _row(two, "t") is None

    def taken() -> bool:
        return bool(json.loads(ss.ok(["nerve", "sync", "--json"], two).stdout).get("taken_over"))

    wait_until(taken, 30, what="two taking the task of silent one over", interval=0.5)
    assert _owner(bare, "t") == "two"


def test_heartbeats_keep_a_machines_task_under_takeover_auto(tmp_path, daemon):
    bare = daemon.base / "project.git"
    one, two, wt = _working(tmp_path, daemon.url("project.git"), lease=3)
    _alive_for(4.5, lambda: ss.ok(["worker", "heartbeat", "--status", "testing"], wt))
    report = json.loads(ss.ok(["nerve", "sync", "--json"], two).stdout)
    assert report.get("taken_over", []) == [] and _owner(bare, "t") == "one", report
