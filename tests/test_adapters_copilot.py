"""The copilot adapter without the real CLI (the real one: tests/test_real_agents.py, test_real_hook_notes.py).

A recording stand-in binary shows what the adapter hands GitHub Copilot CLI: the argv (rules, never blanket
approval, never the prompt), the prompt on stdin, and the plugin with git-nerve's notes hooks while it runs.
"""

from __future__ import annotations

import json
import os
import sys

from git_nerve.workflow.adapters import builtin_names, by_name, create_copilot
from git_nerve.workflow.adapters.copilot import diagnose
from tests.test_adapters_gemini_qwen import PROMPT, ctx_for, recorder  # noqa: F401 - the fixture

PLUGIN_RECORDER = r'''#!{python}
import json, os, sys
argv = sys.argv[1:]
plugin = next(a.split("=", 1)[1] for a in argv if a.startswith("--plugin-dir="))
out = {{"argv": argv, "prompt": sys.stdin.read(), "plugin": json.load(open(os.path.join(plugin, "plugin.json"))),
        "hooks": json.load(open(os.path.join(plugin, "hooks.json")))}}
with open(os.environ["NERVE_RECORD_TO"], "w") as fh:
    json.dump(out, fh)
print("done\n```json\n{{\"summary\": \"ok\", \"files_changed\": []}}\n```")
'''


def test_copilot_is_built_in():
    assert "copilot" in builtin_names() and by_name("copilot").name == "copilot"


def test_copilot_gets_rules_not_blanket_approval_and_its_hooks_in_a_private_plugin(recorder, repo):  # noqa: F811
    exe, read = recorder
    exe.write_text(PLUGIN_RECORDER.format(python=sys.executable))
    create_copilot(binary=str(exe))(PROMPT, ctx_for(repo.work))
    got = read()
    argv = got["argv"]
    assert got["prompt"] == PROMPT and all("README" not in a for a in argv) and "-p" not in argv
    assert not {"--allow-all-tools", "--allow-all", "--yolo", "--allow-all-paths", "--allow-all-urls"} & set(argv)
    allowed = [a.split("=", 1)[1] for a in argv if a.startswith("--allow-tool=")]
    denied = [a.split("=", 1)[1] for a in argv if a.startswith("--deny-tool=")]
    assert "write" in allowed and "shell(git commit)" in allowed and "shell(python3)" in allowed
    assert "shell" not in allowed and not any(a.startswith("shell(git push") for a in allowed)
    assert "shell(git push)" in denied and "url" in denied
    assert "--disallow-temp-dir" in argv and "--disable-builtin-mcps" in argv
    assert "COPILOT_PROVIDER_API_KEY" in argv[argv.index("--secret-env-vars") + 1]
    plugin = next(a.split("=", 1)[1] for a in argv if a.startswith("--plugin-dir="))
    assert not plugin.startswith(str(repo.work)) and not os.path.exists(plugin)  # private to the run, gone after it
    assert got["plugin"]["hooks"] == "hooks.json"
    hooks = got["hooks"]["hooks"]
    assert set(hooks) == {"postToolUse", "preToolUse"}
    command = hooks["postToolUse"][0]["bash"]
    assert command.startswith("/bin/sh ") and "notes-hook.sh" in command and command.endswith("notes --hook copilot")
    assert hooks["preToolUse"][0]["bash"] == command


def test_the_persons_copilot_allow_all_never_reaches_copilot(recorder, repo, monkeypatch):  # noqa: F811
    """COPILOT_ALLOW_ALL=true in the person's environment would approve every tool call and load the worktree's own
    hooks and MCP servers (Copilot CLI 1.0.102): the adapter's rules are the run's; other COPILOT_* pass."""
    exe, read = recorder
    exe.write_text(f"#!{sys.executable}\nimport json, os, sys\nsys.stdin.read()\n"
                   "json.dump({k: v for k, v in os.environ.items() if k.startswith('COPILOT_')},"
                   " open(os.environ['NERVE_RECORD_TO'], 'w'))\nprint('done')\n")
    monkeypatch.setenv("COPILOT_ALLOW_ALL", "true")
    monkeypatch.setenv("COPILOT_MODEL", "m")
    create_copilot(binary=str(exe))(PROMPT, ctx_for(repo.work))
    assert read() == {"COPILOT_MODEL": "m"}


def test_a_test_command_that_is_a_shell_or_a_path_is_never_allowed_as_a_whole_program():
    from git_nerve.workflow.adapters.copilot import allow_rules

    for command in ("bash -c 'make test'", "sh run-tests.sh", "./run-tests", "/usr/bin/python3 -m pytest", "env X=1 pytest",
                    "git nerve thread"):
        assert [r for r in allow_rules(command) if not r.startswith("shell(git ") and r != "write"] == [], command
    assert "shell(pytest)" in allow_rules("pytest -q tests")


def test_extra_args_override_the_rules(recorder, repo):  # noqa: F811
    exe, read = recorder
    create_copilot(binary=str(exe), extra_args=["--allow-tool=shell(make test)"])(PROMPT, ctx_for(repo.work))
    argv = read()["argv"]
    assert [a for a in argv if a.startswith("--allow-tool")] == ["--allow-tool=shell(make test)"]


def test_a_refused_key_is_named_from_stderr():
    said = diagnose(1, "", "\nAuthentication failed with provider at http://127.0.0.1:1/v1 (HTTP 401).\n"
                           "  Check your COPILOT_PROVIDER_API_KEY, COPILOT_PROVIDER_API_KEY_COMMAND, or ...\n")
    assert said == ("the model provider refused the key (Authentication failed with provider at http://127.0.0.1:1/v1 "
                    "(HTTP 401)): check COPILOT_PROVIDER_API_KEY"), said
    assert diagnose(1, "Incorrect API key", "") is None  # stdout is the agent's own answer
    assert diagnose(0, "", "all fine") is None

