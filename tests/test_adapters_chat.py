"""Unit tests for the aider, hermes and opencode adapters' own rules (the real CLIs: tests/test_real_*.py)."""

from __future__ import annotations

import fnmatch
import json
import os
import threading
from pathlib import Path

import pytest

from git_nerve.workflow.adapters import AgentContext, StartFrame, create_aider, create_opencode
from git_nerve.workflow.adapters.aider import LAUNCHER
from git_nerve.workflow.adapters.aider import diagnose as aider_diagnose
from git_nerve.workflow.adapters.hermes import deny_rules
from git_nerve.workflow.adapters.hermes import diagnose as hermes_diagnose
from git_nerve.workflow.adapters.opencode import diagnose as opencode_diagnose
from git_nerve.workflow.adapters.opencode import permission

TEST = "python3 -m unittest -v"


def test_aider_never_answers_everything_and_cannot_overwrite_files_with_the_answer():
    argv = create_aider().argv()
    assert "--yes-always" not in argv and "--yes" not in argv
    assert argv[argv.index("--edit-format") + 1] == "diff"
    for flag in ("--no-suggest-shell-commands", "--no-detect-urls", "--disable-playwright", "--auto-commits",
                 "--git-commit-verify"):
        assert flag in argv
    assert argv[-2] == "--message-file"
    # extra_args override the adapter's own flags
    argv = create_aider(extra_args=["--edit-format", "udiff"]).argv()
    assert argv.count("--edit-format") == 1 and argv[argv.index("--edit-format") + 1] == "udiff"


@pytest.fixture
def aider_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("NERVE_AIDER_ROOT", str(tmp_path))
    head = LAUNCHER.split("try:\n    from aider import io")[0]
    scope: dict = {}
    exec(compile(head, "nerve_aider.py", "exec"), scope)
    return scope["policy"]


def test_aider_policy_allows_files_in_the_worktree_and_refuses_everything_else(aider_policy, tmp_path):
    assert aider_policy("Allow edits to file that has not been added to the chat?", "README.md")
    assert aider_policy("Create new file?", "src/new.py")
    assert aider_policy("Add file to the chat?", str(tmp_path / "a.txt"))
    assert aider_policy("Add 0.1k tokens of command output to the chat?", None)
    for question, subject in [
        ("Create new file?", "/root/escaped.txt"),
        ("Create new file?", "../outside.txt"),
        ("Allow edits to file that has not been added to the chat?", ".git/config"),
        ("Run shell command?", "apt-get install -y x"),
        ("Run shell commands?", "touch a\ncurl b"),
        ("Add URL to the chat?", "https://example.invalid/"),
        ("Install playwright?", None),
        ("Run pip install?", "pip install x"),
        ("Attempt to fix test errors?", None),
        ("Something aider asks in a later version?", None),
    ]:
        assert not aider_policy(question, subject), (question, subject)


def test_aider_diagnose_names_a_401_that_aider_survives_with_exit_0():
    out = "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided.\n"
    cause = aider_diagnose(None, out, "")
    assert cause and "refused the key" in cause and "AuthenticationError" in cause and "\n" not in cause
    assert aider_diagnose(0, "Applied edit to README.md\n", "") is None


def _denied(command: str, rules: list[str]) -> bool:
    """Hermes's own matching: every command start is marked with a newline in one variant."""
    import re

    marked = re.sub(r"(&&|\|\||;|\||\(|&)\s*", lambda m: m.group(0) + "\n", command)
    return any(fnmatch.fnmatchcase(v.lower().strip(), r.lower()) for v in (command, marked) for r in rules)


def test_hermes_deny_rules_let_only_git_git_nerve_and_the_tests_run():
    rules = deny_rules(TEST)
    for ok in ["git status", "git nerve thread", "git add README.md && git commit -m 'x'", TEST,
               "git log --oneline a..HEAD && git diff a...HEAD", "git"]:
        assert not _denied(ok, rules), ok
    for bad in ["touch /root/x", "apt-get install -y x", "curl -s http://127.0.0.1:1/exfil", "sleep 30",
                "git status; curl x", "git status && curl x", TEST + " && rm -rf x", "python3 -c 1",
                "git -c core.pager=sh log", "git config alias.x '!sh'", "git log > /root/x", "echo $(curl x)",
                "(curl x)", "gi", "FOO=1 git status"]:
        assert _denied(bad, rules), bad


def test_hermes_diagnose_names_the_401_it_prints_as_its_answer():
    cause = hermes_diagnose(None, "HTTP 401: Incorrect API key provided.\n", "")
    assert cause and "refused the key" in cause and "\n" not in cause
    assert hermes_diagnose(0, "Done.\n```json\n{}\n```\n", "") is None


def test_opencode_permission_rules_deny_what_is_not_allowed():
    rules = permission(TEST)
    assert rules["bash"]["*"] == "deny" and rules["bash"]["git *"] == "allow" and rules["bash"][TEST] == "allow"
    assert list(rules["bash"])[-1].startswith("git ") and rules["bash"]["git -c*"] == "deny"  # last match wins
    assert rules["webfetch"] == rules["external_directory"] == rules["task"] == "deny"
    values = [v for v in rules.values() if isinstance(v, str)] + list(rules["bash"].values())
    assert "ask" not in values  # nothing is ever asked of a person


def test_opencode_gets_the_prompt_on_stdin_and_its_rules_in_the_environment(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "opencode"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nenv > \"$NERVE_OUT/env\"\necho \"$@\" > \"$NERVE_OUT/argv\"\ncat > \"$NERVE_OUT/stdin\"\n"
                    "cp \"$OPENCODE_CONFIG\" \"$NERVE_OUT/config\"\necho done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NERVE_OUT", str(tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    start = StartFrame(task_id="t1", workflow="wf", content="x", workdir=str(work), test_command=TEST)
    ctx = AgentContext(start, (), str(work), threading.Event(), "t1", "coder", TEST)
    assert create_opencode(model="nerve/m")("the secret prompt", ctx).strip() == "done"
    env = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines() if "=" in line)
    assert (tmp_path / "stdin").read_text() == "the secret prompt"
    assert "secret" not in (tmp_path / "argv").read_text() and "--model nerve/m" in (tmp_path / "argv").read_text()
    assert json.loads(env["OPENCODE_PERMISSION"])["bash"][TEST] == "allow"
    assert env["PWD"] == str(work) and not Path(env["OPENCODE_CONFIG"]).exists()  # private, removed after
    # the notes plugin: beside that config, in the run's private directory (never the worktree)
    (url,) = json.loads((tmp_path / "config").read_text())["plugin"]
    assert url == "file://" + str(Path(env["OPENCODE_CONFIG"]).parent / "nerve-opencode-notes.js")


def test_opencode_diagnose_names_a_bad_key_only():
    assert "refused the key" in opencode_diagnose(None, "", "\x1b[91m\x1b[1mError: \x1b[0mIncorrect API key provided.\n")
    logged = ('timestamp=x level=ERROR run=1 message="stream error" providerID=nerve small=true agent=title '
              'error.error="AI_APICallError: Incorrect API key provided."\n')
    assert "Incorrect API key" in opencode_diagnose(None, "", logged)
    assert opencode_diagnose(0, "", "Error: The user has specified a rule which prevents you from using this") is None


NODE_DRIVER = """
const [plugin, event, answerFile] = process.argv.slice(1)
const { GitNerveNotes } = await import(plugin)
const aborted = []
const client = { session: { abort: async ({ path }) => { aborted.push(path.id) } } }
const hooks = await GitNerveNotes({ client, directory: process.cwd() })
const output = { title: "t", output: "tool said", metadata: {} }
let error = null
try {
  await hooks[event]({ tool: "bash", sessionID: "ses_1", callID: "c1", args: {} }, output)
} catch (e) { error = e.message }
console.log(JSON.stringify({ output: output.output, aborted, error }))
"""


def test_opencode_notes_plugin_starts_nothing_while_nothing_is_pending_and_speaks_the_hook_protocol(tmp_path):
    """The plugin the adapter writes (run by node here, by opencode's Bun for real: tests/test_real_hook_notes.py):
    no process while neither gate file exists; else `git nerve notes --hook opencode`'s answer is appended to
    the tool's output, a refusal refuses the call, and a stop ends the session."""
    import shutil
    import subprocess

    from git_nerve.workflow.adapters.opencode import plugin

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the plugin runs in opencode's JavaScript runtime")
    calls, answer = tmp_path / "calls", tmp_path / "answer"
    fake = tmp_path / "fake-nerve"
    fake.write_text(f"#!/bin/sh\ncat >> '{calls}'\necho >> '{calls}'\ncat '{answer}'\n")
    fake.chmod(0o755)
    marker, stop = tmp_path / "notes-pending-t1", tmp_path / "stop-request"
    url = plugin(str(tmp_path), [str(fake), "notes", "--hook", "opencode"], (str(marker), str(stop)))
    assert url.startswith("file://") and Path(url[7:]).is_file()

    def run(event: str, said: dict | None) -> dict:
        answer.write_text(json.dumps(said) if said else "")
        out = subprocess.run([node, "--input-type=module", "-e", NODE_DRIVER, url, event], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60, check=True)
        return json.loads(out.stdout)

    assert run("tool.execute.after", {"hookSpecificOutput": {"additionalContext": "never asked"}}) == {
        "output": "tool said", "aborted": [], "error": None}
    assert not calls.exists()  # nothing pending: no process started
    marker.touch()
    got = run("tool.execute.after", {"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                                            "additionalContext": "a note"}})
    assert got == {"output": "tool said\n\na note", "aborted": [], "error": None}
    asked = json.loads(calls.read_text().splitlines()[0])
    assert asked == {"hook_event_name": "PostToolUse", "cwd": str(tmp_path), "tool_name": "bash"}
    assert run("tool.execute.before", None) == {"output": "tool said", "aborted": [], "error": None}
    marker.unlink()
    stop.touch()
    deny = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": "git-nerve: this task was stopped"}}
    assert run("tool.execute.before", deny) == {"output": "tool said", "aborted": ["ses_1"],
                                                "error": "git-nerve: this task was stopped"}
    ended = run("tool.execute.after", {"continue": False, "systemMessage": "git-nerve: this task was stopped (x)"})
    assert ended == {"output": "tool said\n\ngit-nerve: this task was stopped (x)", "aborted": ["ses_1"],
                     "error": None}
