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


def _inbox(work: Path, task: str) -> list[tuple[str, str]]:
    from git_nerve.bus import steer

    with ss.bus(work) as b:
        return [(m.kind, m.text) for m in steer.about_task(b.conn, task, all_since=None)]


def _told(work: Path) -> list[dict]:
    return [d for d in json.loads(ss.ok(["nerve", "outbox", "--json"], work).stdout) if d.get("task")]


def test_what_was_said_while_the_holder_was_offline_reaches_the_new_holder_once(tmp_path, daemon):
    """one holds t and goes silent; three tells a note and posts a review comment, two tells a note and a stop
    (each answered "pending delivery" on one); the lease runs out and two takes t over: two's inbox has the three
    messages and its thread the post and both notes, exactly once however often it syncs; three's and two's
    `git nerve outbox` say where each was delivered; one, back and fenced, queues none of them."""
    bare = daemon.base / "project.git"
    one, two, three = ss.team(tmp_path, daemon.url("project.git"), ["one", "two", "three"], lease=2)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    for w in (one, two, three):
        ss.ok(["nerve", "sync"], w)
    assert "pending delivery" in ss.ok(["nerve", "tell", "--task", "t", "cover the empty input"], three).stdout
    ss.ok(["nerve", "post", "--task", "t", "--role", "reviewer", "please rename parse()"], three)
    ss.ok(["nerve", "tell", "--task", "t", "and the unicode case"], two)
    ss.ok(["nerve", "tell", "--task", "t", "stop"], two)
    ss.ok(["nerve", "sync"], three)
    ss.ok(["nerve", "sync"], two)
    assert {d["status"] for d in _told(three)} == {"pending"}
    view = json.loads(ss.ok(["worker", "show", "t", "--json"], three).stdout)
    assert [(t["kind"], t["status"]) for t in view["told"]] == [
        ("note", "pending delivery on one (queued there at its next sync)"),
        ("post", "pending delivery on one (queued there at its next sync)")]
    time.sleep(2.5)  # one stays silent past the lease
    ss.ok(["worker", "takeover", "t"], two)
    assert _owner(bare, "t") == "two"
    expected = [("note", "cover the empty input"), ("note", "and the unicode case"), ("stop", "stop")]
    assert _inbox(two, "t") == expected  # at once, by the takeover
    for _ in range(2):
        ss.ok(["nerve", "sync"], two)
    ss.ok(["nerve", "sync", "--rebuild"], two)
    assert _inbox(two, "t") == expected  # never twice
    rounds = [(r[0], r[1]) for r in ss.rounds_of(two, "t")]
    assert sorted(r for r in rounds if r[0] in ("human", "reviewer")) == [
        ("human", "and the unicode case"), ("human", "cover the empty input"), ("reviewer", "please rename parse()")]
    mine = _told(two)
    assert [(d["kind"], d["status"]) for d in mine] == [("note", "delivered"), ("stop", "delivered")]
    assert all("delivered on two" in d["text"] for d in mine), mine
    ss.ok(["nerve", "sync"], two)  # publishes its receipts

    def delivered_on_two() -> list[dict]:
        ss.ok(["nerve", "sync"], three)
        got = _told(three)
        return got if [d["status"] for d in got] == ["delivered", "delivered"] else []

    got = wait_until(delivered_on_two, 30, what="three's outbox saying where its note and post went", interval=0.3)
    assert [d["kind"] for d in got] == ["note", "post"] and all(d["machine"] == "two" for d in got)
    assert "delivered on two (inbox #" in got[0]["text"] and "delivered on two (round " in got[1]["text"]
    shown = ss.ok(["nerve", "outbox"], three).stdout
    assert "told elsewhere" in shown and "delivered on two" in shown
    shown = ss.ok(["worker", "show", "t"], three).stdout  # held by two: its `told` lines
    assert "told note" in shown and "'cover the empty input': delivered on two (inbox #" in shown
    ss.ok(["nerve", "sync"], one)  # one is back: fenced, it queues nothing of it
    assert _inbox(one, "t") == [("stop", "stop: taken over by machine two")]  # the fence's own stop only
