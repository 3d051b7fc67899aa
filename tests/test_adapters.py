"""Command adapters against fake agent CLIs: prompts on stdin or in a file, every error kind,
process-group kills on abort and timeout."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from fixtures.agents import alive, install
from git_nerve.workflow.adapters import (
    PROMPT_FILE,
    AdapterAborted,
    AdapterNonZeroExit,
    AdapterSpawnFailed,
    AdapterTimeout,
    AgentContext,
    StartFrame,
    claude_adapter,
    codex_adapter,
    create_aider,
    create_claude,
    create_codex,
    create_cursor,
    create_exec,
    create_hermes,
    cursor_adapter,
    hermes_adapter,
)
from git_nerve.workflow.adapters.base import adapter_name, adapter_problems
from waiting import wait_until


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    return install(monkeypatch, tmp_path / "fakes")


def ctx_for(workdir: Path, abort: threading.Event | None = None) -> AgentContext:
    start = StartFrame(task_id="t1", workflow="wf", content="do it", workdir=str(workdir))
    return AgentContext(start, (), str(workdir), abort or threading.Event(), "t1", "coder")


PROMPT = "Fix the bug in src/app.py; it's \"quoted\" and has $(touch pwned) `touch pwned2` ; rm -rf nothing\n"


@pytest.mark.parametrize(
    "adapter, binary, via",
    [
        (claude_adapter, "claude", "stdin"),
        (codex_adapter, "codex", "stdin"),
        (cursor_adapter, "cursor-agent", "stdin"),
        (hermes_adapter, "hermes", "file"),
    ],
    ids=["claude", "codex", "cursor", "hermes"],  # aider: tests/test_adapters_chat.py (its policy launcher needs aider)
)
def test_cli_adapters_get_the_prompt_off_the_command_line(fakes, tmp_path, adapter, binary, via):
    fakes.script([{"stdout": "done\n```json\n{\"ok\": true}\n```\n", "stderr": "progress...\n"}])
    out = adapter(PROMPT, ctx_for(tmp_path))
    assert "```json" in out and "progress" not in out  # stdout only: codex's progress goes to stderr
    (call,) = fakes.calls()
    assert call["agent"] == binary
    assert call["prompt"] == PROMPT
    assert all("Fix the bug" not in a for a in call["argv"])  # never on the command line
    assert call["cwd"] == str(tmp_path)
    assert call["role"] == "coder" and "NERVE_TASK_ID" in call["env_keys"]
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    if via == "file":
        prompt_file = next(a for a in call["argv"] if "nerve-prompt-" in a)
        assert not Path(prompt_file).exists()  # removed afterwards


def test_factories_pass_model_and_extra_args_the_way_the_cli_takes_them(fakes, tmp_path):
    fakes.script([{"stdout": "a"}] * 4)
    ctx = ctx_for(tmp_path)
    create_claude(model="opus", extra_args=["--max-turns", "3"])("p", ctx)
    create_codex(model="gpt-5")("p", ctx)
    create_cursor(model="sonnet-4")("p", ctx)
    create_hermes(model="anthropic/claude")("p", ctx)
    argvs = [c["argv"] for c in fakes.calls()]
    assert argvs[0][-4:] == ["--model", "opus", "--max-turns", "3"]
    assert argvs[1][-1] == "-" and "gpt-5" in argvs[1]
    assert ["--model", "sonnet-4"] == argvs[2][-2:]
    assert "anthropic/claude" in argvs[3]
    aider = create_aider(model="sonnet", extra_args=["--no-auto-commits"]).argv()
    assert "--no-auto-commits" in aider and "--auto-commits" not in aider and aider[aider.index("--model") + 1] == "sonnet"


def test_codex_gets_the_notes_hooks_for_this_run_only_trusted_by_their_hash_never_all_hooks(fakes, tmp_path):
    from git_nerve.workflow.adapters.codex import trust_hash

    fakes.script([{"stdout": "a"}] * 2)
    create_codex()("p", ctx_for(tmp_path))
    create_codex(extra_args=["-c", "hooks.PostToolUse=[]"])("p", ctx_for(tmp_path))
    ours, theirs = [c["argv"] for c in fakes.calls()]
    given = [ours[i + 1] for i, a in enumerate(ours) if a == "-c"]
    hooks = {g.split("=", 1)[0]: g.split("=", 1)[1] for g in given if g.startswith("hooks.")}
    assert sorted(hooks) == ["hooks.PostToolUse", "hooks.PreToolUse", "hooks.state"], given
    assert "notes --hook codex" in hooks["hooks.PostToolUse"] and "notes --hook codex" in hooks["hooks.PreToolUse"]
    command = hooks["hooks.PostToolUse"].split('command="', 1)[1].split('",timeout', 1)[0].replace('\\"', '"')
    # trust for exactly these two (Codex's key: the session-flags layer, event, group 0, handler 0)
    assert hooks["hooks.state"] == (
        '{"/<session-flags>/config.toml:post_tool_use:0:0"={trusted_hash="%s"},'
        '"/<session-flags>/config.toml:pre_tool_use:0:0"={trusted_hash="%s"}}'
        % (trust_hash("PostToolUse", command), trust_hash("PreToolUse", command)))
    assert not any("bypass" in a for a in ours)
    # hooks the person gives in extra_args win whole: none of ours, no trust given
    assert not any(a.startswith(("hooks.PreToolUse", "hooks.state")) for a in theirs)
    assert theirs[theirs.index("hooks.PostToolUse=[]") - 1] == "-c"


def test_spawn_failed_when_the_binary_is_not_on_path(fakes, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # claude's checks also look for credentials
    adapter = create_claude(binary="no-such-agent-cli")
    with pytest.raises(AdapterSpawnFailed) as info:
        adapter("hello", ctx_for(tmp_path))
    assert info.value.kind == "spawn_failed"
    assert "no-such-agent-cli" in info.value.message and "PATH" in info.value.message
    assert adapter_problems(adapter) == ["`no-such-agent-cli` is not on PATH"]
    assert adapter_problems(claude_adapter) == []  # the fake is on PATH


def test_non_zero_exit_carries_the_exit_code_and_both_tails(fakes, tmp_path):
    adapter = create_exec(["failing-agent", "7"], name="cursor-agent")
    with pytest.raises(AdapterNonZeroExit) as info:
        adapter("hello", ctx_for(tmp_path))
    err = info.value
    assert err.kind == "non_zero_exit" and err.exit_code == 7
    assert "failing agent: started" in err.stdout_tail
    assert "model provider returned an error" in err.stderr_tail
    assert err.message.startswith("cursor-agent: exitCode=7 stdout=")
    assert err.facts() == {"error": "non_zero_exit", "exit_code": 7}


def _pids_gone(fakes) -> None:
    pids = fakes.pid_list()
    assert len(pids) >= 2, pids  # the agent and its grandchild
    wait_until(lambda: not any(alive(p) for p in pids), 3, interval=0.02, fail=False)
    assert not [p for p in pids if alive(p)]


def test_timeout_kills_the_whole_process_group(fakes, tmp_path):
    adapter = create_exec(["slow-agent", "30"], timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(AdapterTimeout) as info:
        adapter("hello", ctx_for(tmp_path))
    assert time.monotonic() - t0 < 5
    assert info.value.kind == "timeout" and "0.5s" in info.value.message
    assert "slow agent: working" in info.value.stdout_tail
    _pids_gone(fakes)


def test_abort_kills_the_whole_process_group(fakes, tmp_path):
    abort = threading.Event()
    adapter = create_exec(["slow-agent", "30"])
    timer = threading.Timer(0.4, abort.set)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(AdapterAborted) as info:
        adapter("hello", ctx_for(tmp_path, abort))
    assert time.monotonic() - t0 < 5
    assert info.value.kind == "aborted"
    _pids_gone(fakes)


def test_an_agent_ignoring_sigterm_is_killed_after_the_grace_period(fakes, tmp_path):
    abort = threading.Event()
    adapter = create_exec(["stubborn-agent"], grace=0.5)
    threading.Timer(0.4, abort.set).start()
    t0 = time.monotonic()
    with pytest.raises(AdapterAborted):
        adapter("hello", ctx_for(tmp_path, abort))
    took = time.monotonic() - t0
    assert 0.8 <= took < 5  # waited the grace period, then SIGKILL
    _pids_gone(fakes)


def test_prompt_file_mode_and_large_prompts(fakes, tmp_path):
    big = "x" * 1_000_000 + "\nend"
    assert create_exec(["cat"])(big, ctx_for(tmp_path)) == big  # no pipe deadlock on a big prompt
    catter = create_exec(["cat", PROMPT_FILE], prompt_via="file")
    assert catter(PROMPT, ctx_for(tmp_path)) == PROMPT
    with pytest.raises(ValueError):
        create_exec(["cat"], prompt_via="file")
    with pytest.raises(ValueError):
        create_exec([])


def test_output_is_capped_to_its_tail(tmp_path):
    adapter = create_exec(["python3", "-c", "import sys; sys.stdout.write('a' * 3_000_000 + 'THE END')"])
    out = adapter("", ctx_for(tmp_path))
    assert out.startswith("[... ") and out.endswith("THE END")
    assert len(out) < 2_200_000


def test_timeouts_belong_to_instances_and_nerve_toml_fills_only_the_gaps():
    assert claude_adapter.effective_timeout == 300
    fast = create_claude(timeout=60)
    assert fast.effective_timeout == 60 and claude_adapter.effective_timeout == 300
    filled = claude_adapter.with_defaults({"timeout": 900, "model": "opus", "extra_args": ["--verbose"]})
    assert filled.effective_timeout == 900 and filled.argv()[-3:] == ["--model", "opus", "--verbose"]
    assert fast.with_defaults({"timeout": 900}).effective_timeout == 60  # the workflow's choice wins
    assert adapter_name(fast) == "claude" and adapter_name(lambda p, c: p) == "<lambda>"
    with pytest.raises(ValueError):
        create_claude(timeout=0)


def test_spawn_failed_for_a_missing_working_directory(tmp_path):
    with pytest.raises(AdapterSpawnFailed) as info:
        create_exec(["cat"])("x", ctx_for(tmp_path / "gone"))
    assert "does not exist" in info.value.message


def test_agents_do_not_inherit_the_callers_repository_location(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere.git"))
    adapter = create_exec(["python3", "-c", "import os; print(os.environ.get('GIT_DIR', 'unset'))"])
    assert adapter("", ctx_for(tmp_path)).strip() == "unset"
    assert os.environ["GIT_DIR"]


# -- what the exit status hides ------------------------------------------------------------


def _diagnose_401(code, stdout, stderr):
    return "the API key was rejected (bad or missing key)" if "401" in stderr else None


def test_a_cli_that_exits_0_after_an_api_failure_is_a_failure(tmp_path):
    import dataclasses
    import time

    from git_nerve.workflow.adapters import AdapterAgentFailed, create_exec

    script = "import sys, time; sys.stderr.write('API Error: 401 invalid x-api-key\\n'); sys.stderr.flush(); time.sleep(int(sys.argv[1]))"
    quick = dataclasses.replace(create_exec([sys.executable, "-c", script, "0"]), diagnose=_diagnose_401)
    with pytest.raises(AdapterAgentFailed) as info:
        quick("p", ctx_for(tmp_path))
    assert info.value.message == "python: the API key was rejected (bad or missing key) (exit 0)".replace("python", info.value.adapter)
    # a CLI that keeps retrying behind the 401 is stopped at once, not at its timeout
    retrying = dataclasses.replace(create_exec([sys.executable, "-c", script, "60"]), diagnose=_diagnose_401, timeout=50)
    t0 = time.monotonic()
    with pytest.raises(AdapterAgentFailed):
        retrying("p", ctx_for(tmp_path))
    assert time.monotonic() - t0 < 15


def test_a_timeout_keeps_the_tail_of_stdout_and_stderr(tmp_path):
    from git_nerve.workflow.adapters import AdapterTimeout, create_exec

    script = "import sys, time; print('retrying after 401', flush=True); sys.stderr.write('auth failed\\n'); sys.stderr.flush(); time.sleep(60)"
    with pytest.raises(AdapterTimeout) as info:
        create_exec([sys.executable, "-c", script], timeout=1.5, grace=0.5)("p", ctx_for(tmp_path))
    assert "retrying after 401" in info.value.message and "auth failed" in info.value.message


def test_extra_args_override_any_flag_an_adapter_sets():
    from git_nerve.workflow.adapters.command import options

    own = [("--sandbox", "workspace-write"), ("--json", None), ("-c", "x=1")]
    assert options(own, ["--sandbox", "read-only"]) == ["--json", "-c", "x=1"]
    assert options(own, ["--sandbox=read-only", "--json"]) == ["-c", "x=1"]
    assert options(own, None) == ["--sandbox", "workspace-write", "--json", "-c", "x=1"]


def test_every_built_in_name_is_an_adapter_and_nothing_else_is_offered():
    """`--adapter NAME` and its error's list of built-in adapters: each name listed gives that CLI's adapter (the
    package's helper modules, such as usage parsing, were listed and failed with a traceback)."""
    from git_nerve.errors import UsageError
    from git_nerve.workflow.adapters import builtin_names, by_name

    names = builtin_names()
    assert {"claude", "codex", "copilot", "gemini", "opencode", "qwen"} <= set(names)
    assert [by_name(n).name for n in names] == names
    for helper in ("usage", "process", "base", "gemini_home"):
        with pytest.raises(UsageError, match="unknown adapter"):
            by_name(helper)
