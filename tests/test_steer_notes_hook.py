"""`git nerve notes --hook claude` (an agent CLI's hook) and `git nerve notes` on real repositories:
hook JSON in -> the CLI's JSON out, each note delivered once with the CLI's pid, a stop answered with
continue:false, any error exit 0 with nothing injected; notes acted on by the task's next commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import git

from fixtures.repos import worker as wk
from git_nerve.bus import steer
from git_nerve.bus.connection import Bus
from git_nerve.steer import notes_hook
from startup_support import loaded_after

BIN = Path(sys.executable).parent


def hook(cwd: Path, payload, *, cli: str = "claude", env: dict | None = None) -> subprocess.CompletedProcess:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run([str(BIN / "git-nerve"), "notes", "--hook", cli], cwd=cwd, input=data,
                          capture_output=True, text=True, timeout=30, env=env)


def tell(work: Path, *args: str) -> None:
    subprocess.run([str(BIN / "git-nerve"), "tell", *args], cwd=work, check=True, capture_output=True)


def deliveries(work: Path):
    with Bus(wk.bus_path(work)) as bus:
        return steer.deliveries_for(bus.conn, "t1"), steer.outbox_after(bus.conn)


def test_a_note_is_injected_once_as_post_tool_use_context_with_the_cli_pid(repo):
    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "use the new API")
    res = hook(wt / "src", {"hook_event_name": "PostToolUse", "cwd": str(wt), "tool_name": "Bash"})
    assert res.returncode == 0 and res.stderr == "", res
    out = json.loads(res.stdout)
    ctx = out["hookSpecificOutput"]
    assert ctx["hookEventName"] == "PostToolUse"
    assert "use the new API" in ctx["additionalContext"] and "git nerve tell" in ctx["additionalContext"]

    # once: the next tool call gets nothing new
    again = hook(wt, {"hook_event_name": "PostToolUse", "cwd": str(wt)})
    assert again.returncode == 0 and again.stdout == "", again

    got, outbox = deliveries(repo.work)
    assert len(got) == 1 and got[0].via == "hook" and got[0].reader == "claude-code (hook)"
    # the pid is the process that ran the hook command (this test's python: subprocess.run has no shell)
    assert got[0].pid == os.getpid()
    assert any(line.text.startswith(f"note delivered to claude-code (hook) (pid {os.getpid()}) via hook")
               for line in outbox)


def test_the_pid_recorded_is_the_agent_cli_past_the_shell_that_ran_the_hook(repo):
    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "note one")
    # Claude Code runs a hook command through a shell: the shell is skipped, its parent (us) recorded
    proc = subprocess.run(["/bin/sh", "-c", f"'{BIN / 'git-nerve'}' notes --hook claude; true"], cwd=wt,
                          input=json.dumps({"hook_event_name": "PostToolUse"}), capture_output=True, text=True)
    assert proc.returncode == 0 and "note one" in proc.stdout, proc
    got, _ = deliveries(repo.work)
    assert got[0].pid == os.getpid()


def test_garbage_or_no_task_or_unknown_cli_is_exit_0_nothing_injected_nothing_delivered(repo, tmp_path):
    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "keep it")
    for cwd, payload, cli in [
        (wt, "{not json", "claude"),
        (wt, "[1, 2]", "claude"),
        (wt, {"hook_event_name": "PostToolUse"}, "nosuchcli"),
        (repo.work, {"hook_event_name": "PostToolUse"}, "claude"),  # the main checkout: no task
        (tmp_path, {"hook_event_name": "PostToolUse"}, "claude"),  # not a repository at all
    ]:
        res = hook(cwd, payload, cli=cli)
        assert res.returncode == 0 and res.stdout == "", (payload, cli, res)
        if cwd != repo.work:
            assert res.stderr.startswith("git-nerve notes: nothing delivered (") and res.stderr.count("\n") == 1, res
    assert deliveries(repo.work)[0] == []  # still queued for a door that works


def test_a_queued_stop_answers_continue_false_and_the_outbox_says_it_reached_the_agent(repo):
    from git_nerve.locks import hold

    wt = wk.spawn(repo.work, "t1")
    with hold(wk.bus_path(repo.work).parent / "locks" / "run-t1.lock", timeout=5):  # as the running `git nerve run`
        tell(repo.work, "--task", "t1", "stop")
        res = hook(wt, {"hook_event_name": "PostToolUse", "cwd": str(wt)})
    out = json.loads(res.stdout)
    assert out["continue"] is False and "stop" in out["stopReason"], out
    _, outbox = deliveries(repo.work)
    assert any(line.text.startswith("stop delivered to claude-code (hook)") for line in outbox), outbox


def test_the_runners_stop_request_file_is_answered_too(repo):
    from git_nerve.paths import discover, stop_request_path

    wt = wk.spawn(repo.work, "t1")
    path = stop_request_path(discover(wt).git_dir)
    path.write_text("stopped by queued message: \"halt\"\n")
    out = json.loads(hook(wt, {"hook_event_name": "PostToolUse"}).stdout)
    assert out["continue"] is False and "halt" in out["stopReason"]


def test_a_commit_after_the_delivery_marks_the_note_acted_on(repo):
    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "add a changelog line")
    hook(wt, {"hook_event_name": "PostToolUse"})
    (wt / "CHANGES").write_text("a line\n")
    git(wt, "add", "CHANGES")
    git(wt, "commit", "-qm", "changelog")
    sha = git(wt, "rev-parse", "HEAD")
    assert hook(wt, {"hook_event_name": "PostToolUse"}).stdout == ""  # the next safe point settles it
    got, outbox = deliveries(repo.work)
    assert got[0].acted == f"commit {sha[:7]}" and got[0].acted_at is not None
    assert any(line.text.startswith(f"note acted on by claude-code (hook): commit {sha[:7]}") for line in outbox)


def test_git_nerve_notes_for_a_person_or_an_agent_without_hooks(repo):
    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "first")
    res = subprocess.run([str(BIN / "git-nerve"), "notes", "--json"], cwd=wt, capture_output=True, text=True)
    got = json.loads(res.stdout)
    assert res.returncode == 0 and got["task"] == "t1" and [n["text"] for n in got["notes"]] == ["first"]
    res = subprocess.run([str(BIN / "git-nerve"), "notes"], cwd=wt, capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == "no new notes for t1\n"
    shown = json.loads(subprocess.run([str(BIN / "git-worker"), "show", "t1", "--json"], cwd=repo.work,
                                      capture_output=True, text=True).stdout)
    note = next(m for m in shown["inbox"] if m["kind"] == "note")
    assert note["delivery"]["state"] == "delivered" and note["delivery"]["delivered"]["via"] == "prompt"
    res = subprocess.run([str(BIN / "git-nerve"), "notes"], cwd=repo.work, capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith("error: not in a task's worktree")


def test_the_hook_path_loads_none_of_the_heavy_packages():
    hot = ["git_nerve.cli.entry", "git_nerve.steer.notes_hook", "git_nerve.steer.delivery", "git_nerve.bus.connection"]
    assert loaded_after(hot, ("click", "pygit2", "pydantic", "yaml", "asyncio", "filelock")) == []


# -- the other CLIs' hook formats (issue 40) ----------------------------------------------------------------


def test_qwen_reads_claudes_answer_and_its_deliveries_name_qwen(repo):
    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "mind the tests")
    res = hook(wt, {"hook_event_name": "PostToolUse", "cwd": str(wt), "tool_name": "run_shell_command"}, cli="qwen")
    out = json.loads(res.stdout)
    assert "mind the tests" in out["hookSpecificOutput"]["additionalContext"], out
    assert hook(wt, {"hook_event_name": "PostToolUse", "cwd": str(wt)}, cli="qwen").stdout == ""  # once
    got, outbox = deliveries(repo.work)
    assert [d.reader for d in got] == ["qwen-code (hook)"]
    assert any(line.text.startswith("note delivered to qwen-code (hook)") for line in outbox)


def test_a_stop_makes_qwens_pre_tool_use_refuse_the_next_calls_and_hands_no_note_over(repo):
    from git_nerve.locks import hold

    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "a note for after the call")
    pre = {"hook_event_name": "PreToolUse", "cwd": str(wt), "tool_name": "edit"}
    assert hook(wt, pre, cli="qwen").stdout == ""  # no stop: the call goes ahead
    assert deliveries(repo.work)[0] == []  # and the note waits for PostToolUse
    with hold(wk.bus_path(repo.work).parent / "locks" / "run-t1.lock", timeout=5):
        tell(repo.work, "--task", "t1", "stop")
        out = json.loads(hook(wt, pre, cli="qwen").stdout)
    decision = out["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse" and decision["permissionDecision"] == "deny", out
    assert "this task was stopped" in decision["permissionDecisionReason"]
    _, outbox = deliveries(repo.work)
    assert [line.text.split(" (pid")[0] for line in outbox if line.text.startswith("stop delivered")] == [
        "stop delivered to qwen-code (hook)"]


def test_gemini_gets_the_notes_after_a_tool_call_and_a_stop_ends_it_before_or_after_one(repo):
    """Gemini CLI (0.61.0) names its events AfterTool/BeforeTool; its `continue: false` ends the headless run."""
    from git_nerve.locks import hold

    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "keep it short")
    before = {"hook_event_name": "BeforeTool", "cwd": str(wt), "tool_name": "replace", "tool_input": {}}
    after = {"hook_event_name": "AfterTool", "cwd": str(wt), "tool_name": "replace",
             "tool_response": {"llmContent": "ok"}}
    assert hook(wt, before, cli="gemini").stdout == ""  # no stop: the call goes ahead, the note waits
    assert deliveries(repo.work)[0] == []
    out = json.loads(hook(wt, after, cli="gemini").stdout)
    assert out == {"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": out["hookSpecificOutput"][
        "additionalContext"]}} and "keep it short" in out["hookSpecificOutput"]["additionalContext"], out
    assert hook(wt, after, cli="gemini").stdout == ""  # once
    assert [d.reader for d in deliveries(repo.work)[0]] == ["gemini-cli (hook)"]
    with hold(wk.bus_path(repo.work).parent / "locks" / "run-t1.lock", timeout=5):
        tell(repo.work, "--task", "t1", "stop")
        stopped_before = json.loads(hook(wt, before, cli="gemini").stdout)
        stopped_after = json.loads(hook(wt, after, cli="gemini").stdout)
    assert stopped_before["continue"] is False and "this task was stopped" in stopped_before["stopReason"]
    assert stopped_after["continue"] is False, stopped_after
    _, outbox = deliveries(repo.work)
    assert any(line.text.startswith("stop delivered to gemini-cli (hook)") for line in outbox)


COPILOT_POST = {"sessionId": "s", "timestamp": 1, "toolName": "bash", "toolArgs": {"command": "git status"},
                "toolResult": {"resultType": "success", "textResultForLlm": "clean"}}
COPILOT_PRE = {"sessionId": "s", "timestamp": 1, "toolName": "bash", "toolArgs": {"command": "git status"}}


def test_copilot_gets_the_notes_after_a_tool_call_and_none_before_one(repo):
    wt = wk.spawn(repo.work, "t1")
    tell(repo.work, "--task", "t1", "rename the flag")
    before = hook(wt, {**COPILOT_PRE, "cwd": str(wt)}, cli="copilot")  # preToolUse: hands nothing over
    assert before.returncode == 0 and before.stdout == "" and before.stderr == "", before
    assert deliveries(repo.work)[0] == []
    after = hook(wt, {**COPILOT_POST, "cwd": str(wt)}, cli="copilot")
    out = json.loads(after.stdout)
    assert list(out) == ["additionalContext"] and "rename the flag" in out["additionalContext"], out
    assert hook(wt, {**COPILOT_POST, "cwd": str(wt)}, cli="copilot").stdout == ""  # once
    got, _ = deliveries(repo.work)
    assert [d.reader for d in got] == ["copilot-cli (hook)"]


def test_a_stop_makes_copilots_pre_tool_use_refuse_every_later_call(repo):
    from git_nerve.locks import hold

    wt = wk.spawn(repo.work, "t1")
    with hold(wk.bus_path(repo.work).parent / "locks" / "run-t1.lock", timeout=5):
        tell(repo.work, "--task", "t1", "stop")
        post = json.loads(hook(wt, {**COPILOT_POST, "cwd": str(wt)}, cli="copilot").stdout)
        pres = [json.loads(hook(wt, {**COPILOT_PRE, "cwd": str(wt)}, cli="copilot").stdout) for _ in range(2)]
    assert "this task was stopped" in post["additionalContext"], post
    for pre in pres:
        assert pre["permissionDecision"] == "deny" and "this task was stopped" in pre["permissionDecisionReason"], pre
    _, outbox = deliveries(repo.work)
    assert any(line.text.startswith("stop delivered to copilot-cli (hook)") for line in outbox), outbox


def test_codex_gets_the_notes_before_or_after_a_call_once_and_a_stop_refuses_the_next_calls(repo):
    """Codex 0.169 runs no PostToolUse after an edit (apply_patch): its PreToolUse hands the notes over too."""
    from git_nerve.locks import hold

    wt = wk.spawn(repo.work, "t1")
    pre = {"hook_event_name": "PreToolUse", "cwd": str(wt), "tool_name": "Bash",
           "tool_input": {"command": "apply_patch <<'PATCH'"}}
    post = {"hook_event_name": "PostToolUse", "cwd": str(wt), "tool_name": "Bash", "tool_response": "ok"}
    assert hook(wt, pre, cli="codex").stdout == ""  # nothing queued: nothing said, the call goes ahead
    tell(repo.work, "--task", "t1", "keep the patch small")
    out = json.loads(hook(wt, pre, cli="codex").stdout)
    assert out == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": out[
        "hookSpecificOutput"]["additionalContext"]}} and "keep the patch small" in str(out), out
    assert hook(wt, post, cli="codex").stdout == "" and hook(wt, pre, cli="codex").stdout == ""  # once
    tell(repo.work, "--task", "t1", "and after the call")
    assert "and after the call" in json.loads(hook(wt, post, cli="codex").stdout)["hookSpecificOutput"][
        "additionalContext"]
    got, outbox = deliveries(repo.work)
    assert [d.reader for d in got] == ["codex-cli (hook)"] * 2
    assert sum(line.text.startswith("note delivered to codex-cli (hook)") for line in outbox) == 2

    with hold(wk.bus_path(repo.work).parent / "locks" / "run-t1.lock", timeout=5):
        tell(repo.work, "--task", "t1", "stop")
        refusals = [json.loads(hook(wt, pre, cli="codex").stdout)["hookSpecificOutput"] for _ in range(2)]
        after = json.loads(hook(wt, post, cli="codex").stdout)
    for r in refusals:  # Codex wants a reason with every deny; it takes no continue:false before a call
        assert r["permissionDecision"] == "deny" and "this task was stopped" in r["permissionDecisionReason"], r
    assert after["continue"] is False and "stopped by queued message" in after["stopReason"], after
    _, outbox = deliveries(repo.work)
    assert [line.text.split(" (pid")[0] for line in outbox if line.text.startswith("stop delivered")] == [
        "stop delivered to codex-cli (hook)"]


def test_opencodes_plugin_gets_claudes_answer_and_its_deliveries_name_the_plugin(repo):
    """What the opencode adapter's plugin sends (Claude Code's hook input) and reads back."""
    from git_nerve.locks import hold

    wt = wk.spawn(repo.work, "t1")
    post = {"hook_event_name": "PostToolUse", "cwd": str(wt), "tool_name": "edit"}
    pre = {"hook_event_name": "PreToolUse", "cwd": str(wt), "tool_name": "edit"}
    tell(repo.work, "--task", "t1", "the plugin's note")
    assert hook(wt, pre, cli="opencode").stdout == ""  # before a call: notes wait for the call's output
    out = json.loads(hook(wt, post, cli="opencode").stdout)
    assert "the plugin's note" in out["hookSpecificOutput"]["additionalContext"], out
    assert hook(wt, post, cli="opencode").stdout == ""  # once
    with hold(wk.bus_path(repo.work).parent / "locks" / "run-t1.lock", timeout=5):
        tell(repo.work, "--task", "t1", "stop")
        ended = json.loads(hook(wt, post, cli="opencode").stdout)
    assert ended["continue"] is False and "this task was stopped" in ended["systemMessage"], ended
    got, outbox = deliveries(repo.work)
    assert [d.reader for d in got] == ["opencode (plugin)"]
    assert [line.text.split(" (pid")[0] for line in outbox if " delivered to " in line.text] == [
        "note delivered to opencode (plugin)", "stop delivered to opencode (plugin)"]
