"""`git nerve run`: rounds on the bus, the moderator loop and its limit, the extract retry,
adapter errors, heartbeats, steering hooks, Ctrl-C, task states."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from pydantic import BaseModel

from fixtures.agents import alive, install, wait_for
from fixtures.repos.build import git
from git_nerve.bus import messages, rounds, workers
from git_nerve.bus.connection import Bus
from git_nerve.workflow import END, Role, Thread, Workflow, fail
from git_nerve.workflow.adapters import AdapterTimeout, create_exec
from git_nerve.workflow.runner import run_task
from thread_support import thread_rounds
from waiting import wait_until

BIN = Path(sys.executable).parent


class Step(BaseModel):
    done: bool
    note: str = ""


def reply(done: bool, note: str = "") -> str:
    return f"Worked on it.\n```json\n{json.dumps({'done': done, 'note': note})}\n```\n"


def until_done(thread: Thread):
    last = thread.last("worker")
    if last is None:
        return "worker"
    if Thread.failed(last):
        return fail(f"worker failed: {last.metadata.get('error') or last.metadata.get('extract_error')}")
    return END if last.metadata.get("done") else "worker"


def use(monkeypatch, workflow: Workflow, name: str = "nerve_test_flow") -> str:
    """Make ``workflow`` loadable as ``name:workflow`` (an installed module)."""
    module = types.ModuleType(name)
    module.workflow = workflow
    monkeypatch.setitem(sys.modules, name, module)
    return f"{name}:workflow"


def flow(adapter, *, max_rounds: int = 12, prompt="Do the next step.", moderator=until_done) -> Workflow:
    return Workflow(name="loop", roles={"worker": Role(adapter, prompt, Step)}, moderator=moderator, max_rounds=max_rounds)


@pytest.fixture
def task(repo, gw):
    res = gw(["spawn", "t1", "-d", "Add a greeting"], repo.work)
    assert res.code == 0, res
    bus = Bus(repo.work / ".git" / "nerve" / "bus.db")
    w = workers.get(bus.conn, "t1")
    bus.close()
    return types.SimpleNamespace(work=repo.work, worktree=Path(w.worktree), bus_path=repo.work / ".git" / "nerve" / "bus.db")


def task_messages(task, kind: str) -> list[messages.Message]:
    bus = Bus(task.bus_path)
    try:
        return messages.for_task(bus.conn, "t1", kinds=(kind,))
    finally:
        bus.close()


def state(task) -> str:
    bus = Bus(task.bus_path)
    try:
        return workers.get(bus.conn, "t1").state
    finally:
        bus.close()


def test_the_moderator_loops_until_done_and_each_result_is_a_round(task, gn, monkeypatch):
    seen: list[tuple[str, str, int]] = []
    answers = iter([reply(False, "half"), reply(False, "most"), reply(True, "all")])

    def adapter(prompt, ctx):
        seen.append((ctx.workdir, ctx.role, len(ctx.rounds)))
        assert "git nerve thread" in prompt and "- done (boolean, required)" in prompt and "Do the next step." in prompt
        return next(answers)

    ref = use(monkeypatch, flow(adapter))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 0, res
    assert res.out.startswith("workflow loop on t1: completed (done)")
    assert "#3 worker" in res.out and "read them with `git nerve thread t1`" in res.out
    assert seen == [(str(task.worktree), "worker", 0), (str(task.worktree), "worker", 1), (str(task.worktree), "worker", 2)]
    got = thread_rounds(task.bus_path)
    assert [(r.round, r.role, r.metadata["note"]) for r in got] == [(1, "worker", "half"), (2, "worker", "most"), (3, "worker", "all")]
    meta = got[0].metadata
    assert meta["done"] is False and meta["workflow"] == "loop" and meta["adapter"] == "adapter"
    assert isinstance(meta["duration_s"], float)
    assert "Worked on it." in got[0].content
    assert state(task) == "WORKING"  # started from ASSIGNED
    assert [m.payload["outcome"] for m in task_messages(task, "workflow_end")] == ["completed"]


def test_the_round_limit_ends_the_loop(task, gn, monkeypatch):
    ref = use(monkeypatch, flow(lambda p, c: reply(False), max_rounds=3))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 1
    assert "round_limit (round limit reached (3 agent runs); the moderator wanted worker next)" in res.out
    assert len(thread_rounds(task.bus_path)) == 3
    res = gn(["run", ref, "--task", "t1", "--max-rounds", "2", "--json"], task.work)
    data = json.loads(res.out)
    assert res.code == 1 and data["outcome"] == "round_limit" and [r["round"] for r in data["rounds"]] == [4, 5]
    assert data["first_round"] == 4  # a second run sees only its own rounds


def test_a_second_run_starts_from_its_own_rounds(task, gn, monkeypatch):
    ref = use(monkeypatch, flow(lambda p, c: reply(True)))
    assert gn(["run", ref, "--task", "t1"], task.work).code == 0
    assert gn(["run", ref, "--task", "t1"], task.work).code == 0  # not ended at once by the old round
    assert len(thread_rounds(task.bus_path)) == 2


def test_the_extract_retry_feeds_the_error_back_to_the_agent(task, gn, monkeypatch):
    prompts: list[str] = []

    def adapter(prompt, ctx):
        prompts.append(prompt)
        return "I finished, no block though." if len(prompts) == 1 else reply(True, "fixed format")

    ref = use(monkeypatch, flow(adapter))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 0, res
    assert len(prompts) == 2 and "could not be read" in prompts[1]
    (only,) = thread_rounds(task.bus_path)
    assert only.metadata["extract_retries"] == 1 and only.metadata["note"] == "fixed format"
    assert only.content == "I finished, no block though."


def test_an_unreadable_result_is_recorded_and_the_moderator_decides(task, gn, monkeypatch):
    ref = use(monkeypatch, flow(lambda p, c: "no structured result at all"))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 1 and "failed (worker failed: no fenced" in res.out
    (only,) = thread_rounds(task.bus_path)
    assert "after one retry" in only.metadata["extract_error"] and "done" not in only.metadata
    assert only.content == "no structured result at all"


def test_adapter_errors_become_rounds(task, gn, monkeypatch, tmp_path):
    install(monkeypatch, tmp_path / "fakes")
    ref = use(monkeypatch, flow(create_exec(["failing-agent", "4"])))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 1 and "non_zero_exit" in res.out
    (only,) = thread_rounds(task.bus_path)
    assert only.metadata["error"] == "non_zero_exit" and only.metadata["exit_code"] == 4
    assert "exitCode=4" in only.content and "model provider returned an error" in only.content

    def times_out(prompt, ctx):
        raise AdapterTimeout("slowpoke", 300)

    ref = use(monkeypatch, flow(times_out), "nerve_test_flow2")
    assert gn(["run", ref, "--task", "t1"], task.work).code == 1
    last = thread_rounds(task.bus_path)[-1].metadata
    assert last == {
        "adapter": "times_out", "duration_s": last["duration_s"], "workflow": "loop",
        "error": "timeout", "timeout_s": 300, "head": git(task.work, "rev-parse", "feat/t1"), "commits": [],
    }


def test_an_agent_that_cannot_be_started_is_no_round_but_the_run_log_and_show_say_it(task, gn, gw, monkeypatch):
    """`claude` not on PATH (issue 37): no `[#1 worker] ... spawn_failed` round for the next agent to read as
    history; the run log of that round and `git worker show` name it, and the run ends with an error."""
    from git_nerve.workflow import runlog

    ref = use(monkeypatch, flow(create_exec(["no-such-agent-cli"])))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 1 and "could not be started" in res.out and "spawn_failed" in res.out, res
    assert thread_rounds(task.bus_path) == []
    (failed,) = task_messages(task, "agent_launch_failed")
    assert failed.payload["role"] == "worker" and failed.payload["error"] == "spawn_failed"
    assert "no-such-agent-cli" in failed.payload["message"] and failed.payload["round"] == 1
    log = runlog.read(task.work / ".git", "t1")
    assert log["round"] == 1 and "the agent could not be started" in log["text"] and "no-such-agent-cli" in log["text"]
    assert Path(failed.payload["log"]).is_file()
    shown = gw("show t1", task.work).out
    assert "agent_launch_failed" in shown and "worker (no-such-agent-cli) could not be started" in shown
    assert gn("thread t1", task.work).out.count("[#") == 0  # the agent's thread: its briefing only


def test_a_broken_moderator_or_prompt_ends_the_run_with_a_reason(task, gn, monkeypatch):
    ref = use(monkeypatch, flow(lambda p, c: reply(True), moderator=lambda t: "nobody"))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 1 and "the moderator chose 'nobody', which is not a role of loop" in res.out

    def bad_prompt(start, rounds):
        raise KeyError("issue")

    ref = use(monkeypatch, flow(lambda p, c: reply(True), prompt=bad_prompt), "nerve_test_flow2")
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 1 and "the prompt of role worker raised KeyError" in res.out
    assert thread_rounds(task.bus_path) == []


def test_heartbeats_while_the_agent_runs_and_on_tick(task, monkeypatch):
    subprocess.run(["git", "config", "nerve.heartbeatInterval", "0.1"], cwd=task.work, check=True)
    ticks: list[str] = []

    def slow(prompt, ctx):
        time.sleep(0.8)  # makes time pass on purpose: several 0.1 s heartbeat intervals while the agent runs
        return reply(True)

    ref = use(monkeypatch, flow(slow))
    result = run_task(ref, task="t1", cwd=task.worktree, on_tick=lambda t: ticks.append(t))
    assert result.outcome == "completed"
    beats = [m for m in task_messages(task, "heartbeat") if m.payload["source"] == "workflow"]
    assert len(beats) >= 4 and beats[0].payload["status"] == "loop: worker running (slow)"
    assert len(ticks) >= 3 and set(ticks) == {"t1"}


def test_on_tick_can_stop_the_running_agent(task, monkeypatch, tmp_path):
    fakes = install(monkeypatch, tmp_path / "fakes")
    subprocess.run(["git", "config", "nerve.heartbeatInterval", "0.2"], cwd=task.work, check=True)
    ticks = iter([None, "stop: a person asked to stop"])
    ref = use(monkeypatch, flow(create_exec(["slow-agent", "30"])))
    t0 = time.monotonic()
    result = run_task(ref, task="t1", cwd=task.work, on_tick=lambda t: next(ticks, None))
    assert time.monotonic() - t0 < 10
    assert result.outcome == "stopped" and result.reason == "stop: a person asked to stop" and result.exit_code == 1
    (only,) = thread_rounds(task.bus_path)
    assert only.metadata["error"] == "aborted" and "stopped: stop: a person asked to stop" in only.content
    assert not [p for p in fakes.pid_list() if alive(p)]


def test_a_stop_asks_a_clean_stop_agent_to_end_itself_and_its_uncommitted_work_is_archived(task, monkeypatch):
    """An adapter whose CLI can end itself (claude's notes hook) gets the stop through <git-dir>/nerve/stop-request
    and is not killed; what it left uncommitted is kept under refs/nerve/archive/<task>, the worktree untouched."""
    from git_nerve.paths import discover, stop_request_path

    subprocess.run(["git", "config", "nerve.heartbeatInterval", "0.2"], cwd=task.work, check=True)
    request = stop_request_path(discover(task.worktree).git_dir)
    request.parent.mkdir(parents=True, exist_ok=True)
    request.write_text("left behind by a killed run\n")  # must not stop this run's agent
    seen: list[str] = []

    def agent(prompt, ctx):
        (Path(ctx.workdir) / "half-done.txt").write_text("work in progress\n")
        wait_until(request.exists, 20, fail=False)  # its next "safe point"
        seen.append(request.read_text() if request.exists() else "")
        return reply(False)

    agent.clean_stop = True
    ticks = iter([None, "stop: a person asked to stop"])
    ref = use(monkeypatch, flow(agent))
    head = git(task.worktree, "rev-parse", "HEAD")
    result = run_task(ref, task="t1", cwd=task.work, on_tick=lambda t: next(ticks, None))
    assert seen == ["stop: a person asked to stop\n"]
    assert result.outcome == "stopped" and result.reason.startswith("stop: a person asked to stop; uncommitted work")
    assert "refs/nerve/archive/t1" in result.reason
    assert not request.exists()  # the request lives only while its agent runs
    (only,) = thread_rounds(task.bus_path)
    assert "error" not in only.metadata  # it ended itself: no abort
    snap = git(task.work, "rev-parse", "refs/nerve/archive/t1")
    assert git(task.work, "rev-parse", f"{snap}^1") == head
    assert git(task.work, "show", "refs/nerve/archive/t1:half-done.txt") == "work in progress"
    assert (task.worktree / "half-done.txt").read_text() == "work in progress\n"  # left in place too
    assert git(task.worktree, "rev-parse", "HEAD") == head


def test_between_rounds_stops_before_the_next_agent_starts(task, monkeypatch):
    calls: list[int] = []
    ref = use(monkeypatch, flow(lambda p, c: calls.append(1) or reply(False)))
    checks = iter([None, "stop before round 2"])
    result = run_task(ref, task="t1", cwd=task.work, between_rounds=lambda t: next(checks))
    assert result.outcome == "stopped" and result.reason == "stop before round 2"
    assert len(calls) == 1 and len(thread_rounds(task.bus_path)) == 1


def test_task_states_and_bad_input(task, gn, gw, monkeypatch):
    ref = use(monkeypatch, flow(lambda p, c: reply(True)))
    res = gn(["run", ref], task.work)  # the main checkout has no task
    assert res.code == 2 and "pass --task" in res.err
    res = gn(["run", ref], task.worktree)  # inside the worktree: its own task
    assert res.code == 0, res
    assert gw(["done", "--allow-empty"], task.worktree).code == 0
    res = gn(["run", ref], task.worktree)
    assert res.code == 3 and "it is IN_REVIEW" in res.err
    res = gn(["run", "nope", "--task", "t1"], task.work)
    assert res.code == 2 and "unknown workflow 'nope'" in res.err
    res = gn(["run", ref, "--task", "ghost"], task.work)
    assert res.code == 2 and "unknown task 'ghost'" in res.err
    res = gn(["run", ref, "--task", "t1", "--max-rounds", "0"], task.work)
    assert res.code == 2


def test_an_invalid_workflow_is_refused_with_its_problems(task, gn, monkeypatch):
    ref = use(monkeypatch, Workflow(name="bad", roles={"worker": Role(None, "p", Step)}, moderator=until_done))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 2 and "workflow" in res.err and "role worker: has no adapter" in res.err
    assert thread_rounds(task.bus_path) == [] and state(task) == "ASSIGNED"


def test_one_run_per_task_at_a_time(task, gn, monkeypatch):
    from git_nerve.locks import hold

    ref = use(monkeypatch, flow(lambda p, c: reply(True)))
    with hold(task.work / ".git" / "nerve" / "locks" / "run-t1.lock", timeout=0):
        res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 1 and "another `git nerve run` is working on t1" in res.err


SLOW_FLOW = """
from pydantic import BaseModel
from git_nerve.workflow import END, Role, Workflow
from git_nerve.workflow.adapters import create_exec


class Ok(BaseModel):
    ok: bool


workflow = Workflow(
    name="slow",
    roles={"sleeper": Role(create_exec(["slow-agent", "60"], grace=1), "Take your time.", Ok)},
    moderator=lambda thread: END if thread.rounds else "sleeper",
)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_kills_the_agent_group_and_records_it(task, monkeypatch, tmp_path, sig):
    fakes = install(monkeypatch, tmp_path / "fakes")
    path = task.work / ".nerve" / "workflows" / "slow.py"
    path.parent.mkdir(parents=True)
    path.write_text(SLOW_FLOW, encoding="utf-8")
    assert subprocess.run([str(BIN / "git-nerve"), "trust"], cwd=task.work, capture_output=True).returncode == 0
    proc = subprocess.Popen([str(BIN / "git-nerve"), "run", "slow", "--task", "t1"], cwd=task.work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(fakes.pid_list()) >= 2, timeout=20)  # the agent and its grandchild run
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in out
    (only,) = thread_rounds(task.bus_path)
    assert only.role == "sleeper" and only.metadata["error"] == "aborted"
    assert f"interrupted ({'Ctrl-C' if sig == signal.SIGINT else 'SIGTERM'})" in only.content
    assert not [p for p in fakes.pid_list() if alive(p)]


def test_nerve_toml_adapter_defaults_apply_to_a_run(task, gn, monkeypatch, tmp_path):
    install(monkeypatch, tmp_path / "fakes")
    (task.work / "nerve.toml").write_text("[adapters.slow-agent]\ntimeout = 0.5\n", encoding="utf-8")
    ref = use(monkeypatch, flow(create_exec(["slow-agent", "30"])))
    t0 = time.monotonic()
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 1 and time.monotonic() - t0 < 10
    (only,) = thread_rounds(task.bus_path)
    assert only.metadata["error"] == "timeout" and only.metadata["timeout_s"] == 0.5
    (task.work / "nerve.toml").write_text("[adapters.slow-agent]\ntimeout = 'soon'\n", encoding="utf-8")
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 2 and "nerve.toml: adapters.slow-agent.timeout" in res.err


def test_help_texts(gn, tmp_path):
    res = gn("run --help", tmp_path)
    assert res.code == 0 and "--max-rounds" in res.out and "git nerve thread" in res.out
    res = gn("validate --help", tmp_path)
    assert res.code == 0 and "one line per problem" in res.out


def test_a_role_can_override_the_extract_settings(task, gn, monkeypatch):
    from fixtures.agents import ChatServer, Reply, completion

    server = ChatServer().reply(Reply(body=completion('{"done": true, "note": "via llm"}')))
    try:
        role = Role(lambda p, c: "All done, no block.", "Do it.", Step,
                    extract={"provider": "llm", "base_url": server.base_url, "model": "extractor"})
        ref = use(monkeypatch, Workflow(name="x", roles={"worker": role}, moderator=until_done))
        res = gn(["run", ref, "--task", "t1"], task.work)
    finally:
        server.close()
    assert res.code == 0, res
    (only,) = thread_rounds(task.bus_path)
    assert only.metadata["note"] == "via llm" and only.metadata["extract_via"] == "llm"
    bad = Role(lambda p, c: "x", "Do it.", Step, extract={"provider": "llm"})
    ref = use(monkeypatch, Workflow(name="x", roles={"worker": bad}, moderator=until_done), "nerve_test_flow2")
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 2 and "role worker: invalid extract override" in res.err
