"""Notes and a stop reaching the REAL agent CLIs (pinned) mid-run through their own hooks, beyond Claude Code
(tests/test_real_claude_notes.py): Qwen Code's PostToolUse hook, which the qwen adapter installs for the run
in a private system settings file (QWEN_CODE_SYSTEM_SETTINGS_PATH); Copilot CLI's postToolUse hook, in a plugin
written for the run; Codex's PostToolUse and PreToolUse hooks, given for the run as `-c` values; Gemini CLI's
AfterTool and BeforeTool hooks, in the settings of a private Gemini home (GEMINI_CLI_HOME).

One run per CLI (the CI budget): the scripted model (mode ``notes``, a delay per request) makes the coder take
several tool steps; the test tells a note between two of them and asserts at the server that the model's
next request carries it, once; then it tells a stop and the run ends at the next tool call, before the
runner's heartbeat tick could, with the coder's edit kept under the archive ref.
"""

from __future__ import annotations

import json
import time

import pytest

from fixtures.repos.build import git
from git_nerve.bus import steer
from git_nerve.bus.connection import Bus
from git_nerve.demo.scripted_model.scenario import CODER_LINE
from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from tests.real_agents import AgentRepo, _check, agent_pids, chat_params, stop_process
from tests.waiting import wait_until

pytestmark = pytest.mark.real

NOTE = "Nerve note: please keep the README line short."
#: CLI -> the reader its deliveries are recorded with (git_nerve/steer/notes_hook.py READERS)
HOOKED = {"qwen": "qwen-code (hook)", "copilot": "copilot-cli (hook)", "codex": "codex-cli (hook)",
          "opencode": "opencode (plugin)", "gemini": "gemini-cli (hook)"}
#: CLIs whose hooks cannot end the agent (all but opencode, whose plugin aborts its session, and Gemini CLI, whose
#: hook's `continue: false` ends its headless run): from the next call on every tool is refused by the hook, and
#: the runner's heartbeat tick ends the process
REFUSES = {"copilot", "qwen", "codex"}


def _carries(e) -> bool:
    """The request holds the note: in a text block, or beside a tool's result (where the hooks put it)."""
    return NOTE in e.prompt or any(NOTE in r for r in e.results)


def _live(proc, pred):
    """``pred``, failing at once when the run ended first."""
    def check():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended first: {proc.communicate()}")
        return pred()
    return check


@pytest.mark.parametrize("cli", sorted(HOOKED))
def test_a_note_reaches_the_next_request_once_and_a_stop_ends_the_run_at_the_next_tool_call(tmp_path, cli):
    binary = DRIVERS[cli].install()
    repo = AgentRepo.create(tmp_path, cli)
    # the hook, not the runner's tick, must act on the stop: a hook that can only refuse tools leaves the agent to
    # end its turn (the scripted model walks on to its answer through the refusals, the commit refused too)
    git(repo.work, "config", "nerve.heartbeatInterval", "30")
    with ScriptedModel(mode="notes", params=chat_params(repo)) as model:
        model.delay_seconds = 1.5
        env = env_for(DRIVERS[cli], binary, model)
        proc = repo.start_develop(env)
        seen_pids: set[int] = set()
        try:
            steps = lambda: [e.step for e in model.entries("coder")]  # noqa: E731
            wait_until(_live(proc, lambda: any(s >= 1 for s in steps())), timeout=120)
            seen_pids |= set(agent_pids(repo.worktree))
            told_after = max(steps())
            _check(["git", "nerve", "tell", "--task", "t1", NOTE], repo.work, env)
            queued_by = max(steps())  # the request in flight when the note was queued (the tell takes a while)
            wait_until(_live(proc, lambda: any(_carries(e) for e in model.entries("coder"))), timeout=60)
            seen_pids |= set(agent_pids(repo.worktree))
            # the edit is made (its result came back): stop it now, while the model holds its next answer (under
            # load the coder could otherwise finish its last steps before the tell lands, and the stop would go
            # to the next role)
            wait_until(_live(proc, lambda: any(s >= 3 for s in steps())), timeout=60)
            model.hold()
            assert CODER_LINE in (repo.worktree / "README.md").read_text()
            told = time.monotonic()
            _check(["git", "nerve", "tell", "--task", "t1", "stop"], repo.work, env)
            stop_step = max(steps())
            model.release()
            out, err = proc.communicate(timeout=120)
            took = time.monotonic() - told
        finally:
            stop_process(proc)
        coder = model.entries("coder")

    # the note: in the model's NEXT request after it was queued (the hook ran after the tool call in flight),
    # never in one before, and in exactly one request (the hook hands it over once)
    with_note = [e.step for e in coder if _carries(e)]
    assert with_note and min(with_note) <= queued_by + 2, (told_after, queued_by, with_note)
    assert not any(_carries(e) for e in coder if e.step <= told_after)
    last = max(coder, key=lambda e: e.step)  # the whole conversation: the note was added to it once
    assert (last.prompt.count(NOTE) + sum(r.count(NOTE) for r in last.results)) == 1, last
    with Bus(repo.work / ".git" / "nerve" / "bus.db") as bus:
        deliveries, outbox = steer.deliveries_for(bus.conn, "t1"), steer.outbox_after(bus.conn)
    assert len(deliveries) == 1, deliveries
    d = deliveries[0]
    assert d.via == "hook" and d.reader == HOOKED[cli], d
    assert d.pid in seen_pids, (d.pid, seen_pids)
    texts = [line.text for line in outbox]
    assert any(t.startswith(f"note delivered to {HOOKED[cli]} (pid ") and NOTE in t for t in texts), texts

    # the stop: no tool runs after the next call (the hook's refusals below, its delivery record), the run ends
    # (a deadline, not a speed: CI under load took 15.6 s for Copilot CLI), nothing half-written
    result = json.loads(out)
    assert result["outcome"] == "stopped", (out, err)
    assert took < 60, took
    if cli in REFUSES:  # once a tool call was refused by the hook, so was every later one (Qwen Code may also
        # end its turn at the first refusal, sending nothing more); the commit below never ran
        refused = [e.step for e in coder if e.results and "git-nerve: this task was stopped" in e.results[-1]]
        assert all(e.step in refused for e in coder if refused and e.step > min(refused)), (
            stop_step, [(e.step, e.tool_calls[:1], e.results[-1][-100:] if e.results else "") for e in coder])
    assert agent_pids(repo.worktree) == []
    assert [r["role"] for r in result["rounds"]] == ["coder"]
    assert repo.new_commits() == []
    ref = "refs/nerve/archive/t1"
    assert CODER_LINE in git(repo.work, "show", f"{ref}:README.md")
    assert any(t.startswith(f"stop delivered to {HOOKED[cli]} (pid ") for t in texts), texts
    # a CLI whose hook only refuses ends when the runner kills it at its tick, or by itself after a refusal
    ended = ("the agent's process group was killed", "the agent ended at its next safe point")
    ended = ended if cli in REFUSES else ended[1:]
    assert any(t.startswith(tuple(f"stop acted on: {e}" for e in ended)) and ref in t for t in texts), texts

    shown = json.loads(_check(["git", "worker", "show", "t1", "--json"], repo.work, env))
    notes = [m for m in shown.get("told", shown.get("inbox", [])) if m.get("kind") == "note"]
    assert notes and notes[0]["delivery"]["delivered"]["pid"] == d.pid, shown
