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
    assert "write" in allowed and "shell(git commit)" in allowed and "shell(python3 -m unittest -v)" in allowed
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


def test_extra_args_override_the_rules(recorder, repo):  # noqa: F811
    exe, read = recorder
    create_copilot(binary=str(exe), extra_args=["--allow-tool=shell(make test)"])(PROMPT, ctx_for(repo.work))
    argv = read()["argv"]
    assert [a for a in argv if a.startswith("--allow-tool")] == ["--allow-tool=shell(make test)"]


def test_a_refused_key_is_named_from_stderr():
    assert "COPILOT_PROVIDER_API_KEY" in diagnose(1, "", "Error: 401 Unauthorized: Incorrect API key provided")
    assert diagnose(1, "Incorrect API key", "") is None  # stdout is the agent's own answer
    assert diagnose(0, "", "all fine") is None

