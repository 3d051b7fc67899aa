"""Notes and stops reaching the REAL Claude Code (pinned) while it works, through its hooks.

The shipped claude adapter installs `git nerve notes --hook claude` as Claude Code's
PostToolUse hook in the run's private settings. The scripted model (mode ``notes``,
a delay per request) makes the coder take several tool steps, so the test can
`git nerve tell` between two of them. Asserted from the model's log (what Claude Code
really sent), the bus (deliveries, outbox) and git.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fixtures.repos.build import git
from git_nerve.bus import steer
from git_nerve.bus.connection import Bus
from git_nerve.demo.scripted_model.scenario import CODER_LINE
from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.real_agents import AgentRepo, _check, agent_pids, chat_params, stop_process, tell_stop
from tests.agent_drivers import DRIVERS, env_for

pytestmark = pytest.mark.real

NOTE = "Nerve note: please keep the README line short."


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return DRIVERS["claude"].install()


def _wait(pred, timeout: float, proc) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended first: {proc.communicate()}")
        time.sleep(0.1)
    raise AssertionError("timed out")


def _carries(e) -> bool:
    """The request holds the note: in a text block, or beside a tool's result (where Claude Code puts hook context)."""
    return NOTE in e.prompt or any(NOTE in r for r in e.results)


def _coder_steps(model) -> list[int]:
    return [e.step for e in model.entries("coder")]


def _deliveries(repo: AgentRepo):
    with Bus(repo.work / ".git" / "nerve" / "bus.db") as bus:
        return steer.deliveries_for(bus.conn, "t1"), steer.outbox_after(bus.conn)


def _claude_pids(repo: AgentRepo) -> set[int]:
    """Claude Code's processes working in the task's worktree (the native binary is named claude)."""
    out = set()
    for pid in agent_pids(repo.worktree):
        try:
            with open(f"/proc/{pid}/comm") as fh:
                if fh.read().strip() == "claude":
                    out.add(pid)
        except OSError:
            pass
    return out


def test_a_note_told_mid_run_reaches_the_next_request_and_is_acted_on(tmp_path, claude_bin):
    repo = AgentRepo.create(tmp_path, "claude")
    with ScriptedModel(mode="notes", params=chat_params(repo)) as model:
        model.delay_seconds = 1.5
        env = env_for(DRIVERS["claude"], claude_bin, model)
        proc = repo.start_develop(env)
        seen_pids: set[int] = set()
        try:
            # the coder has read its thread (step 1 asked): tell the note now, between two tool calls
            _wait(lambda: any(s >= 1 for s in _coder_steps(model)), 120, proc)
            seen_pids |= _claude_pids(repo)
            told_after = max(_coder_steps(model))
            _check(["git", "nerve", "tell", "--task", "t1", NOTE], repo.work, env)
            _wait(lambda: any(_carries(e) for e in model.entries("coder")), 60, proc)
            seen_pids |= _claude_pids(repo)
            out, err = proc.communicate(timeout=300)
        finally:
            stop_process(proc)
        coder = model.entries("coder")
    result = json.loads(out)
    assert result["outcome"] == "completed", (out, err)

    # the model's NEXT request after the note was queued carries it (the hook ran after the tool call
    # in flight), never the ones before
    with_note = [e.step for e in coder if _carries(e)]
    assert with_note and min(with_note) <= told_after + 2, (told_after, with_note)
    assert not any(_carries(e) for e in coder if e.step <= told_after)

    # the bus: delivered once, to the claude process (a real pid that was alive), by the hook; then acted on
    # by the coder's commit
    deliveries, outbox = _deliveries(repo)
    assert len(deliveries) == 1, deliveries
    d = deliveries[0]
    assert d.via == "hook" and d.reader == "claude-code (hook)", d
    assert d.pid in seen_pids, (d.pid, seen_pids)
    commits = repo.new_commits()
    assert len(commits) == 1
    assert f"+{CODER_LINE}" in git(repo.worktree, "show", "--format=", commits[0])
    assert d.acted == f"commit {commits[0][:7]}", d
    texts = [line.text for line in outbox]
    assert any(t.startswith("note delivered to claude-code (hook) (pid ") and NOTE in t for t in texts), texts
    assert any(t.startswith(f"note acted on by claude-code (hook): commit {commits[0][:7]}") for t in texts), texts

    # `git worker show --json` and `git nerve outbox --json` say the same
    shown = json.loads(_check(["git", "worker", "show", "t1", "--json"], repo.work, env))
    notes = [m for m in shown.get("told", shown.get("inbox", [])) if m.get("kind") == "note"]
    assert notes and notes[0]["delivery"]["state"] == "acted on", shown
    assert notes[0]["delivery"]["delivered"]["pid"] == d.pid


def test_stop_mid_run_ends_claude_at_its_next_tool_call_and_keeps_the_edit(tmp_path, claude_bin):
    repo = AgentRepo.create(tmp_path, "claude")
    git(repo.work, "config", "nerve.heartbeatInterval", "30")  # the hook, not the runner's tick, must stop it
    with ScriptedModel(mode="notes", params=chat_params(repo)) as model:
        model.delay_seconds = 1.5
        env = env_for(DRIVERS["claude"], claude_bin, model)
        proc = repo.start_develop(env)
        try:
            # the coder has edited README.md (the edit's result came back): stop it now
            _wait(lambda: any(s >= 3 for s in _coder_steps(model)), 120, proc)
            assert CODER_LINE in (repo.worktree / "README.md").read_text()
            out, err, took = tell_stop(repo.work, proc, env, 120)
        finally:
            stop_process(proc)
        last_step = max(_coder_steps(model))
    result = json.loads(out)
    assert result["outcome"] == "stopped", (out, err)
    assert took < 15, took  # well before the runner's next heartbeat tick (30 s): the hook ended it
    assert agent_pids(repo.worktree) == []
    assert last_step <= 5, last_step  # no more model requests once the stop was answered
    assert [r["role"] for r in result["rounds"]] == ["coder"]

    # nothing lost: the edit is still in the worktree and kept under the archive ref
    assert repo.new_commits() == []
    assert CODER_LINE in (repo.worktree / "README.md").read_text()
    ref = "refs/nerve/archive/t1"
    snap = git(repo.work, "rev-parse", ref)
    assert git(repo.work, "rev-parse", f"{snap}^1") == repo.base
    assert CODER_LINE in git(repo.work, "show", f"{ref}:README.md")
    assert ref in result["reason"], result  # the run's own answer says where the work is

    _, outbox = _deliveries(repo)
    texts = [line.text for line in outbox]
    assert any(t.startswith("stop delivered to claude-code (hook) (pid ") for t in texts), texts
    assert any(t.startswith("stop acted on: the agent ended at its next safe point") and ref in t for t in texts), texts
    assert os.path.exists(repo.worktree)
