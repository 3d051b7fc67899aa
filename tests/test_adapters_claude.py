"""The claude adapter's own parts without the real CLI: the permission settings, flag overrides, diagnose."""

from __future__ import annotations

from git_nerve.workflow.adapters.claude import _argv, _diagnose, create_claude, settings


def test_settings_allow_the_worktree_git_nerve_and_the_test_command_and_deny_the_network(tmp_path):
    s = settings(str(tmp_path), "python3  -m unittest -v")
    perms = s["permissions"]
    root = "/" + str(tmp_path.resolve())
    assert f"Edit({root}/**)" in perms["allow"] and f"Read({root}/**)" in perms["allow"]
    assert not [r for r in perms["allow"] if r.startswith(("Edit(//*", "Bash(*", "Bash(:"))]
    assert "Bash(git commit:*)" in perms["allow"] and "Bash(git nerve thread:*)" in perms["allow"]
    assert "Bash(python3 -m unittest -v)" in perms["allow"]
    assert {"WebFetch", "Bash(curl:*)", "Bash(apt-get:*)", "Bash(git push:*)"} <= set(perms["deny"])
    assert perms["defaultMode"] == "dontAsk"
    assert not [r for r in settings(str(tmp_path))["permissions"]["allow"] if r.startswith("Bash(python3")]


def test_never_blanket_approval_and_extra_args_override_any_flag():
    argv = _argv(create_claude())
    assert argv[:2] == ["claude", "-p"]
    assert argv[argv.index("--permission-mode") + 1] == "dontAsk"
    assert argv[argv.index("--permission-prompts") + 1] == "none"
    assert not [a for a in argv if "dangerously" in a or a == "bypassPermissions"]
    over = _argv(create_claude(model="opus", extra_args=["--permission-mode=default", "--output-format", "json"]))
    assert "dontAsk" not in over and over.count("--output-format") == 1
    assert over[-3:] == ["--permission-mode=default", "--output-format", "json"]


def test_diagnose_names_a_bad_key_at_once_and_an_api_error_after_exit_0():
    cause = _diagnose(None, "Invalid API key · Fix external API key\n", "")
    assert cause and "\n" not in cause and "ANTHROPIC_API_KEY" in cause and "Invalid API key" in cause
    assert _diagnose(0, "API Error: 529 overloaded\n", "") == "API Error: 529 overloaded"
    assert _diagnose(None, "API Error: 529 overloaded\n", "") is None  # it may still retry
    assert _diagnose(0, "Done.\n```json\n{\"summary\": \"x\"}\n```\n", "") is None
    # an answer that merely talks about API errors is not one
    long = "Fixed the handler.\n" + "line\n" * 10 + "API Error handling is now covered.\n"
    assert _diagnose(0, long, "") is None
