"""What each task costs (issue 39): a run's rounds record what their agents reported, status / show / thread /
`git nerve usage` / the MCP state tool show it, prices fill only unknown costs, and a budget stops the run at its
next safe point, with a thread round naming it."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from pydantic import BaseModel

from git_nerve.bus import rounds, workers
from git_nerve.bus.connection import Bus
from git_nerve.shared.vet import event_fault
from git_nerve.workflow import END, Role, Thread, Workflow
from git_nerve.workflow.adapters.usage import Usage
from git_nerve.workflow.costs import since_time
from thread_support import thread_rounds


class Step(BaseModel):
    done: bool


def reply(done: bool) -> str:
    return f"Worked.\n```json\n{json.dumps({'done': done})}\n```\n"


def until_done(thread: Thread):
    last = thread.last("worker")
    if last is None:
        return "worker"
    return END if last.metadata.get("done") else "worker"


def use(monkeypatch, adapter, name: str = "nerve_usage_flow", *, rounds_to_done: int = 3) -> str:
    answers = iter([reply(False)] * (rounds_to_done - 1) + [reply(True)])

    def agent(prompt, ctx):
        adapter(ctx)
        return next(answers)

    module = types.ModuleType(name)
    module.workflow = Workflow(name="loop", roles={"worker": Role(agent, "Do the next step.", Step)},
                               moderator=until_done, max_rounds=10)
    monkeypatch.setitem(sys.modules, name, module)
    return f"{name}:workflow"


@pytest.fixture
def task(repo, gw):
    assert gw(["spawn", "t1", "-d", "Add a greeting"], repo.work).code == 0
    return types.SimpleNamespace(work=repo.work, bus_path=repo.work / ".git" / "nerve" / "bus.db")


def _status_usage(gw, work: Path) -> dict:
    res = gw(["status", "--json"], work)
    assert res.code == 0, res
    return next(r for r in json.loads(res.out) if r["task_id"] == "t1")["usage"]


def test_each_round_records_what_its_agent_reported_and_every_view_shows_it(task, gn, gw, monkeypatch):
    assert _status_usage(gw, task.work) == {"input_tokens": None, "cached_input_tokens": None,
                                             "output_tokens": None, "cost_usd": None}
    ref = use(monkeypatch, lambda ctx: ctx.usage.append(Usage("model-a", 1000, 100, 20, 5, 0.25)))
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 0, res
    assert _status_usage(gw, task.work) == {"input_tokens": 3000, "cached_input_tokens": 300, "output_tokens": 60,
                                             "cost_usd": 0.75}
    got = thread_rounds(task.bus_path)
    assert [r.metadata["usage"] for r in got] == [{"input_tokens": 1000, "cached_input_tokens": 100,
                                                   "output_tokens": 20, "cost_usd": 0.25, "models": ["model-a"]}] * 3
    table = gw(["status"], task.work)
    assert "USAGE" in table.out and "3.1k $0.75" in table.out
    thread = gn(["thread", "t1"], task.work)
    assert "[#1 worker]" in thread.out and "(1.0k tokens in (100 cached), 20 out, $0.2500)" in thread.out
    shown = gw(["show", "t1"], task.work)
    assert "#2 worker (agent model-a): 1.0k in (100 cached), 20 out, $0.2500" in shown.out
    assert "total: 3.0k in (300 cached), 60 out, $0.7500" in shown.out
    as_json = json.loads(gw(["show", "t1", "--json"], task.work).out)
    assert as_json["usage"]["total"]["input_tokens"] == 3000 and len(as_json["usage"]["rounds"]) == 3
    report = json.loads(gn(["usage", "--json"], task.work).out)
    assert report["total"] == {"input_tokens": 3000, "cached_input_tokens": 300, "output_tokens": 60,
                               "cost_usd": 0.75, "rounds": 3}
    assert [(r["task"], r["rounds"]) for r in report["by_task"]] == [("t1", 3)]
    assert [r["model"] for r in report["by_model"]] == ["model-a"] and report["by_role"][0]["role"] == "worker"
    assert report["by_machine"][0]["machine"] == "here" and len(report["by_day"]) == 1
    text = gn(["usage"], task.work)
    assert text.code == 0 and text.out.startswith("total: 3.0k in (300 cached), 60 out, $0.7500, 3 round(s)")
    assert json.loads(gn(["usage", "--since", "2999-01-01", "--json"], task.work).out)["total"]["rounds"] == 0
    bad = gn(["usage", "--since", "yesterday-ish"], task.work)
    assert bad.code == 2 and "--since 'yesterday-ish'" in bad.err
    from git_nerve.console.state import summary
    from git_nerve.worker import lifecycle

    repo = lifecycle.open_repo(task.work)
    try:
        page = summary(repo)
    finally:
        repo.close()
    assert page["workers"][0]["usage"]["output_tokens"] == 60
    assert page["usage"]["total"]["cost_usd"] == 0.75 and len(page["usage"]["by_day"]) == 1


def test_a_cost_comes_from_the_price_table_only_where_the_agent_gave_none(task, gn, gw, monkeypatch):
    (task.work / "nerve.toml").write_text('[prices."model-a"]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n'
                                          'cached_input_per_mtok = 0.3\n', encoding="utf-8")
    ref = use(monkeypatch, lambda ctx: ctx.usage.append(Usage("model-a", 1_000_000, 500_000, 100_000)),
              rounds_to_done=1)
    assert gn(["run", ref, "--task", "t1"], task.work).code == 0
    assert _status_usage(gw, task.work)["cost_usd"] == pytest.approx(1.5 + 0.15 + 1.5)
    # a model with no price, and an agent that reported nothing: the cost is unknown, and says so
    ref = use(monkeypatch, lambda ctx: ctx.usage.append(Usage("model-b", 10, 0, 10)), "nerve_usage_b", rounds_to_done=1)
    assert gn(["run", ref, "--task", "t1"], task.work).code == 0
    assert _status_usage(gw, task.work) == {"input_tokens": 1_000_010, "cached_input_tokens": 500_000,
                                             "output_tokens": 100_010, "cost_usd": None}
    assert "$?" in gw(["status"], task.work).out
    ref = use(monkeypatch, lambda ctx: None, "nerve_usage_c", rounds_to_done=1)
    assert gn(["run", ref, "--task", "t1"], task.work).code == 0
    assert "not reported by the agent" in gw(["show", "t1"], task.work).out


def test_a_one_token_budget_stops_the_run_after_its_first_report(task, gn, gw, monkeypatch):
    (task.work / "nerve.toml").write_text("[budget]\ntask_tokens = 1\n", encoding="utf-8")
    calls = []
    ref = use(monkeypatch, lambda ctx: (calls.append(1), ctx.usage.append(Usage("m", 7, 0, 3)))[0])
    res = gn(["run", ref, "--task", "t1", "--json"], task.work)
    data = json.loads(res.out)
    assert res.code == 1 and data["outcome"] == "stopped" and data["exit_code"] == 1
    assert "over budget task_tokens = 1: task t1 used 10 tokens (7 input, 3 output)" in data["reason"]
    assert len(calls) == 1  # no second agent started
    got = thread_rounds(task.bus_path)
    assert [r.role for r in got] == ["worker", "budget"]
    assert "task_tokens = 1" in got[-1].content and got[-1].metadata["kind"] == "budget"
    bus = Bus(task.bus_path)
    try:
        assert "over budget task_tokens" in (workers.get(bus.conn, "t1").heartbeat_status or "")
    finally:
        bus.close()
    again = gn(["run", ref, "--task", "t1", "--json"], task.work)  # a new run of a task over its budget spends nothing
    assert again.code == 1 and json.loads(again.out)["outcome"] == "stopped" and len(calls) == 1


def test_dollar_budgets_count_only_known_costs(task, gn, monkeypatch):
    (task.work / "nerve.toml").write_text("[budget]\nrun_usd = 0.5\n", encoding="utf-8")
    ref = use(monkeypatch, lambda ctx: ctx.usage.append(Usage("m", 1, 0, 1, None, 0.3)), rounds_to_done=5)
    data = json.loads(gn(["run", ref, "--task", "t1", "--json"], task.work).out)
    assert data["outcome"] == "stopped" and len(data["rounds"]) == 2 and "run_usd = 0.5" in data["reason"]
    (task.work / "nerve.toml").write_text("[budget]\nday_usd = 0.5\n", encoding="utf-8")  # today: $0.60 here
    data = json.loads(gn(["run", ref, "--task", "t1", "--json"], task.work).out)
    assert data["outcome"] == "stopped" and data["rounds"] == [] and "day_usd = 0.5" in data["reason"]
    assert "cost $0.6000 today (UTC)" in data["reason"]
    (task.work / "nerve.toml").write_text("[budget]\nday_usd = -1\n", encoding="utf-8")
    res = gn(["run", ref, "--task", "t1"], task.work)
    assert res.code == 2 and "budget.day_usd" in res.err


def test_another_machines_usage_events_are_vetted_on_arrival():
    ok = {"machine": "m2", "id": "m2:1", "kind": "usage", "task": "t1", "ts": 1.0,
          "payload": {"round": 1, "role": "coder", "model": "x", "input_tokens": 5, "cached_input_tokens": 0,
                      "output_tokens": 1, "cost_usd": None}}
    assert event_fault(ok, "m2") is None
    for bad, why in [({"input_tokens": -1}, "input_tokens is not a count"),
                     ({"output_tokens": 1.5}, "output_tokens is not a count"),
                     ({"cost_usd": float("nan")}, "cost_usd is not an amount"),
                     ({"cost_usd": True}, "cost_usd is not an amount"),
                     ({"model": "x" * 500}, "model is not a short text"),
                     ({"evil": 1}, "fields no usage has")]:
        assert why in (event_fault({**ok, "payload": {**ok["payload"], **bad}}, "m2") or ""), bad


def test_since_accepts_dates_times_and_ages():
    assert since_time("2026-11-29") == 1795910400.0
    assert since_time("7d", now=1_000_000.0) == 1_000_000.0 - 7 * 86400
    assert since_time(None) is None


def test_a_budget_stops_a_streaming_cli_mid_turn(task, monkeypatch, tmp_path):
    """Claude Code streams each API call's usage (stream-json): a budget crossed by it stops the agent while it
    still works, through the run's stop, and what it streamed is recorded."""
    import subprocess

    from fixtures.agents import install
    from git_nerve.workflow.adapters import create_claude
    from git_nerve.workflow.runner import run_task

    subprocess.run(["git", "config", "nerve.heartbeatInterval", "0.2"], cwd=task.work, check=True)
    (task.work / "nerve.toml").write_text("[budget]\ntask_tokens = 100\n", encoding="utf-8")
    fakes = install(monkeypatch, tmp_path / "fakes")
    streamed = json.dumps({"type": "assistant", "message": {"id": "msg_1", "model": "claude-x", "usage": {
        "input_tokens": 400, "output_tokens": 100, "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0}}}) + "\n"
    fakes.script([{"stream": streamed, "sleep": 60, "stdout": reply(True)}])
    module = types.ModuleType("nerve_usage_claude")
    module.workflow = Workflow(name="loop", roles={"worker": Role(create_claude(), "Do it.", Step)},
                               moderator=until_done, max_rounds=3)
    monkeypatch.setitem(sys.modules, "nerve_usage_claude", module)
    result = run_task("nerve_usage_claude:workflow", task="t1", cwd=task.work)
    assert result.outcome == "stopped", result
    assert result.reason.startswith("over budget task_tokens = 100: task t1 used 500 tokens"), result.reason
    assert result.duration_s < 40  # not the agent's 60 s: stopped mid-turn
    got = thread_rounds(task.bus_path)
    assert [r.role for r in got] == ["worker", "budget"]
    assert got[0].metadata["usage"]["input_tokens"] == 400 and got[0].metadata["usage"]["output_tokens"] == 100


def test_usage_travels_with_the_tasks_events_so_every_machine_counts_the_same(tmp_path):
    from git_nerve import clock
    from git_nerve.bus import usage as bus_usage
    from tests import shared_support as ss

    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t", "--description", "make the parser strict"], one)
    held = ss.bus(one)
    try:
        with held.write() as conn:  # what a run's round records (workflow/loop.py)
            bus_usage.record(conn, "t", clock.now(), round=1, role="coder", adapter="claude", run="1", entries=[
                {"model": "m", "input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 30,
                 "reasoning_tokens": None, "cost_usd": 0.02, "cost_from": "agent"}])
    finally:
        held.close()
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)
    rows = {m: next(r for r in json.loads(ss.ok(["worker", "status", "--json"], w).stdout) if r["task_id"] == "t")
            for m, w in (("one", one), ("two", two))}
    assert rows["one"]["usage"] == rows["two"]["usage"] == {"input_tokens": 1200, "cached_input_tokens": 200,
                                                           "output_tokens": 30, "cost_usd": 0.02}
    report = json.loads(ss.ok(["nerve", "usage", "--json"], two).stdout)
    assert [(r["machine"], r["rounds"]) for r in report["by_machine"]] == [("one", 1)]
    assert json.loads(ss.ok(["nerve", "usage", "--json"], one).stdout)["by_machine"] == report["by_machine"]
