"""Steering running work end to end: `tell stop` to a running `git nerve run` and `git worker run`,
a note reaching the next role, `git worker merge --all` with skip, add, stop and a conflict."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

from conftest import git
from pydantic import BaseModel

from fixtures.agents import alive, install, wait_for
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.bus import rounds, steer
from git_nerve.bus.connection import Bus
from git_nerve.workflow import END, Role, Workflow

BIN = Path(sys.executable).parent

LOOP_FLOW = """
from pydantic import BaseModel
from git_nerve.workflow import Role, Workflow
from git_nerve.workflow.adapters import create_exec


class Ok(BaseModel):
    ok: bool


workflow = Workflow(
    name="loop",
    roles={"sleeper": Role(create_exec(["slow-agent", "3"], grace=1), "Take your time.", Ok)},
    moderator=lambda thread: "sleeper",
    max_rounds=5,
)
"""


def thread(work: Path, task_id: str) -> list[rounds.Round]:
    with Bus(wk.bus_path(work)) as bus:
        return rounds.load(bus.conn, task_id, list(range(1, rounds.last_round(bus.conn, task_id) + 1)))


def outbox(work: Path) -> list[steer.OutboxLine]:
    with Bus(wk.bus_path(work)) as bus:
        return steer.outbox_after(bus.conn)


def test_tell_stop_ends_a_running_workflow_before_its_next_agent(repo, gn, monkeypatch, tmp_path):
    fakes = install(monkeypatch, tmp_path / "fakes")
    wk.spawn(repo.work, "t1")
    path = repo.work / ".nerve" / "workflows" / "loop.py"
    path.parent.mkdir(parents=True)
    path.write_text(LOOP_FLOW, encoding="utf-8")
    assert gn(["trust"], repo.work).code == 0  # the person's own workflow file (issue 35: runs once trusted)
    proc = subprocess.Popen([str(BIN / "git-nerve"), "run", "loop", "--task", "t1"], cwd=repo.work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: fakes.calls(), timeout=20)  # the first agent runs
        res = gn(["tell", "--task", "t1", "stop: the spec changed, wait for me"], repo.work)
        assert res.code == 0, res
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, (out, err)
    (line,) = outbox(repo.work)
    assert line.consumer == "task:t1" and line.kind == "stop"
    assert line.text.startswith('stopped by queued message: "stop: the spec changed, wait for me" (queued at 20')
    assert out.startswith(f"workflow loop on t1: stopped ({line.text})")
    assert f"steer: {line.text}" in err
    assert len(fakes.calls()) == 1  # the running agent finished; no next one started
    (only,) = [r for r in thread(repo.work, "t1") if r.role == "sleeper"]
    assert only.metadata["ok"] is True and "slow agent: done" in only.content
    wait_for(lambda: not [p for p in fakes.pid_list() if alive(p)], timeout=10)
    # the consumer acted once: the next run is not stopped by the same message
    (path.parent / "noop.py").write_text(LOOP_FLOW.replace('lambda thread: "sleeper"', "lambda thread: END").replace(
        "import Role,", "import END, Role,"), encoding="utf-8")
    assert gn(["trust"], repo.work).code == 0
    res = gn(["run", "noop", "--task", "t1"], repo.work)
    assert res.code == 0 and res.out.startswith("workflow loop on t1: completed"), res


class Said(BaseModel):
    summary: str


def test_a_note_told_while_a_role_runs_reaches_the_next_roles_thread(repo, gn, sh, monkeypatch):
    wk.spawn(repo.work, "t1")
    seen: dict[str, list] = {}

    def coder(prompt, ctx):
        res = sh([str(BIN / "git-nerve"), "tell", "--task", "t1", "use the new logger everywhere"], repo.work)
        assert res.code == 0, res
        return 'Coded.\n```json\n{"summary": "coded"}\n```'

    def reviewer(prompt, ctx):
        seen["rounds"] = [(r.role, r.content) for r in ctx.rounds]
        seen["thread"] = sh([str(BIN / "git-nerve"), "thread", "--json"], Path(ctx.workdir)).out
        return 'Reviewed.\n```json\n{"summary": "reviewed"}\n```'

    flow = Workflow(
        name="pair",
        roles={"coder": Role(coder, "Code.", Said), "reviewer": Role(reviewer, "Review.", Said)},
        moderator=lambda t: END if t.last("reviewer") else ("reviewer" if t.last("coder") else "coder"),
    )
    module = types.ModuleType("steer_pair_flow")
    module.workflow = flow
    monkeypatch.setitem(sys.modules, "steer_pair_flow", module)
    res = gn(["run", "steer_pair_flow:workflow", "--task", "t1"], repo.work)
    assert res.code == 0, res
    # appended at once, while the coder was still running: before the coder's own round
    assert [role for role, _ in seen["rounds"]] == ["human", "coder"]
    assert seen["rounds"][0] == ("human", "use the new logger everywhere")
    assert [r["role"] for r in json.loads(seen["thread"])["rounds"]] == ["human", "coder"]
    assert 'steer: note for t1 (in its thread): "use the new logger everywhere"' in res.err
    assert outbox(repo.work) == []  # a note is not an action


def test_tell_stop_stops_the_command_under_git_worker_run(repo, gn, monkeypatch, tmp_path):
    fakes = install(monkeypatch, tmp_path / "fakes")
    wt = wk.spawn(repo.work, "t1")
    git(repo.work, "config", "nerve.heartbeatInterval", "0.3")
    proc = subprocess.Popen([str(BIN / "git-worker"), "run", "--", "slow-agent", "60"], cwd=wt,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(fakes.pid_list()) >= 2, timeout=20)  # the agent and its grandchild run
        assert gn(["tell", "stop"], wt).code == 0  # inside the worktree: addressed to its task
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + 15, (out, err)  # SIGTERM
    (line,) = outbox(repo.work)
    assert line.consumer == "task:t1" and line.text.startswith('stopped by queued message: "stop" (queued at ')
    assert f"(stopped: {line.text})" in err
    last = thread(repo.work, "t1")[-1]
    assert last.metadata["stopped"] == line.text and last.metadata["signal"] == "SIGTERM"
    wait_for(lambda: not [p for p in fakes.pid_list() if alive(p)], timeout=10)


# -- git worker merge --all ---------------------------------------------------------------------


def approve_in_order(work: Path, *task_ids: str) -> None:
    with wk.opened(work) as repo:
        from git_nerve.worker import lifecycle

        for t in task_ids:
            lifecycle.approve(repo, t, by="tester")


def check_that_tells(tmp_path: Path, message: str) -> str:
    """A --check command that queues ``message`` during the first merge (and passes)."""
    script = tmp_path / "check_tells.py"
    script.write_text(
        "import pathlib, subprocess, sys\n"
        f"marker = pathlib.Path({str(tmp_path / 'told')!r})\n"
        "if not marker.exists():\n"
        "    marker.touch()\n"
        f"    subprocess.run([{str(BIN / 'git-nerve')!r}, 'tell', {message!r}], check=True, stdout=subprocess.DEVNULL)\n",
        encoding="utf-8",
    )
    return f"{sys.executable} {script}"


def merges(work: Path) -> list[str]:
    """The tasks merged into main, oldest first."""
    subjects = git(work, "log", "--merges", "--reverse", "--format=%s", "main").splitlines()
    return [s.split("(")[1].rstrip(")") for s in subjects]


def test_merge_all_follows_approval_order_with_skip_and_add(repo, gw, gn, tmp_path):
    work = repo.work
    for t in ("a", "b", "c"):
        wk.drive(work, t, "IN_REVIEW")
    approve_in_order(work, "a", "c", "b")  # approval order a, c, b (spawn order a, b, c)
    assert gn(["tell", "skip a"], work).code == 0
    res = gw(["merge", "--all", "--json", "--check", check_that_tells(tmp_path, "add a")], work)
    assert res.code == 0, res
    out = json.loads(res.out)
    # skip took a out; the check of c's merge queued `add a`, which put a back before b
    assert merges(work) == ["c", "a", "b"]
    assert [m["task_id"] for m in out["merged"]] == ["c", "a", "b"]
    assert all(m["state"] == "COMPLETED" for m in out["merged"])
    assert out["skipped"] == [] and out["pending"] == [] and out["stopped"] is None and out["failed"] == []
    lines = outbox(work)
    assert [(x.consumer, x.kind) for x in lines] == [("merge-all", "skip"), ("merge-all", "add")]
    assert lines[0].text.startswith('skip a: taken out of the merge queue; queued message: "skip a" (queued at 20')
    assert lines[1].text.startswith('add a: put in the merge queue (position 1); queued message: "add a" (queued at 20')
    assert out["outbox"] == [x.text for x in lines]
    assert [ln for ln in res.err.splitlines() if ln.startswith("steer: ")] == [f"steer: {x.text}" for x in lines]


def test_merge_all_stops_after_the_current_merge_and_a_skipped_task_stays_approved(repo, gw, gn, tmp_path):
    work = repo.work
    for t in ("a", "b", "c"):
        wk.drive(work, t, "APPROVED")
    assert gn(["tell", "skip b"], work).code == 0
    res = gw(["merge", "--all", "--check", check_that_tells(tmp_path, "stop, the release is frozen")], work)
    assert res.code == 1, res
    assert merges(work) == ["a"]  # the merge under way when `stop` came finished; nothing after it
    assert [wk.state(work, t) for t in ("a", "b", "c")] == ["COMPLETED", "APPROVED", "APPROVED"]
    stop = outbox(work)[-1]
    assert stop.kind == "stop" and stop.text.startswith('stopped by queued message: "stop, the release is frozen" (queued at ')
    assert res.out.startswith("Merged: a into main as ")
    assert res.out.splitlines()[-1] == f"merged 1 task(s): a; skipped: b; left APPROVED: c; {stop.text}"
    # the queue's messages were acted on once: the next run merges what is left
    res = gw(["merge", "--all"], work)
    assert res.code == 0, res
    assert merges(work) == ["a", "b", "c"]


def test_merge_all_goes_on_after_a_conflict(repo, gw):
    work = repo.work
    wk.drive(work, "x", "APPROVED", greeting="Hi")
    wk.drive(work, "y", "APPROVED", greeting="Hey")  # the same line: conflicts once x is merged
    wk.drive(work, "z", "APPROVED")
    res = gw(["merge", "--all"], work)
    assert res.code == 6, res
    assert merges(work) == ["z", "x"]  # z conflicts with nothing: it goes first (the radar saw x and y collide)
    assert wk.state(work, "y") == "WORKING"
    assert "merge y failed: merging y into main conflicts" in res.err
    assert res.out.splitlines()[-1] == "merged 2 task(s): z, x; failed: y"


def test_merge_all_with_nothing_approved(repo, gw):
    wk.spawn(repo.work, "t1")
    res = gw(["merge", "--all"], repo.work)
    assert res.code == 0 and res.out == "nothing to merge: no task is APPROVED\n"
