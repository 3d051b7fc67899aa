"""Qwen Code (a fork of Gemini CLI) in headless mode: `qwen` reads the prompt from
standard input (stdin that is not a terminal, no prompt argument: one
non-interactive run) and prints its final answer as plain text.

Confinement is Qwen Code's own permission rules, never ``--yolo``: the ``default``
approval mode, in which a headless run refuses every shell command, edit and
write that no rule allows, plus ``--allowed-tools`` rules for exactly

* the edit tools (``edit``, ``write_file``) inside the workspace (the task's
  worktree; Qwen asks, hence refuses, for paths outside it);
* shell commands ``git add``/``commit``/``status``/``diff``/``log``/``show``/
  ``rev-parse``/``ls-files``/``branch --show-current``, ``git nerve thread`` and
  the repository's test command (nerve.toml ``[run] test_command``);

and ``--exclude-tools`` rules that refuse the web tools and git options reaching
outside the worktree. Qwen's sandbox (``--sandbox``: docker/podman, bubblewrap on
Linux) is not used: it needs a container runtime or bwrap with user namespaces.

The person's notes and a stop reach the agent mid-run through Qwen Code's own hooks
(``PostToolUse``, ``PostToolUseFailure``: the notes become ``additionalContext``
beside the tool's result), the same ``git nerve notes --hook qwen`` behind the sh
gate Claude Code's runs use. Qwen Code's hooks cannot end the agent (``continue:
false`` only turns that tool's result into an error), so once the task is stopped
``PreToolUse`` refuses every tool call and the runner ends the process at its next
tick. They are
set in a settings file written for this run into its private directory and named
by ``QWEN_CODE_SYSTEM_SETTINGS_PATH`` (system hooks load beside the user's and the
project's, whatever the folder's trust; a system settings file the user already
names is copied into it first): never in the worktree, where the agent could
commit or change it.

Qwen Code also loads the worktree's own project settings (``.qwen/``: hooks, MCP servers, tool discovery and call
commands, commands, agents): it is started only once this user trusted their exact content (`git nerve trust`,
issue 35: :data:`git_nerve.trust.QWEN`; command.refuse_untrusted), and the agent may edit none of the agent CLIs'
project settings (``DENIED``).

Credentials are the user's: an OpenAI-compatible provider (``OPENAI_API_KEY``,
``OPENAI_BASE_URL``, ``OPENAI_MODEL``, with ``security.auth.selectedType =
"openai"`` in ~/.qwen/settings.json or ``--auth-type openai`` in extra_args), or
a Qwen login.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence

from ...trust import AGENT_SETTINGS_DIRS, AGENT_SETTINGS_FILES, QWEN
from . import usage
from .command import CommandAdapter, Invocation, adapter_factory, extras, model_flag, options
from .gemini import GIT_ALLOWED, _version, git_config_env, git_identity_env, version_and_flags

#: The Qwen Code version the real-CLI suite runs (tests/test_real_agents.py).
TESTED_VERSION = "0.24.4"

_model = model_flag("--model")

#: Tool rules refused outright: the web; shell syntax that would run or write something an allowed prefix
#: does not show (Qwen matches a rule against the start of each simple command, after shell-quote has
#: dropped `$`-expansions: `git log $(touch x)` is seen as `git log ( touch x )`, so without these a
#: `git log` rule lets it run; backticks and redirections likewise); git options that read or write
#: outside the worktree.
DENIED = (
    "web_fetch", "web_search",
    # every agent CLI's project settings, loaded by the next run (hooks, MCP servers, tool rules of its own)
    *(f"{tool}(/{d}/**)" for d in AGENT_SETTINGS_DIRS for tool in ("edit", "write_file")),
    *(f"{tool}(/{f})" for f in AGENT_SETTINGS_FILES for tool in ("edit", "write_file")),
    "run_shell_command(*$(*)", "run_shell_command(*`*)", "run_shell_command(*${*)", "run_shell_command(*>*)",
    "run_shell_command(*<*)", "run_shell_command(*\n*)", "run_shell_command(* ( *)",
    "run_shell_command(* --output*)", "run_shell_command(* --no-index*)", "run_shell_command(* --ext-diff*)",
    "run_shell_command(* --exec*)", "run_shell_command(* --upload-pack*)", "run_shell_command(* --template*)",
)

SANDBOX = (
    "Qwen Code permission rules (approval mode default, headless: what no rule allows is refused): edit/write_file "
    "in the worktree, shell only for git add/commit/status/diff/log/show, `git nerve thread` and the test command, "
    "no web tools; no OS sandbox (Qwen's --sandbox needs docker/podman or bwrap)"
)


def allowed_rules(test_command: str, git_allowed: Sequence[str] = GIT_ALLOWED) -> list[str]:
    rules = ["edit(/**)", "write_file(/**)"]  # "/" is the project root (the worktree), not the filesystem's
    rules += [f"run_shell_command(git {sub})" for sub in git_allowed]
    if test_command.strip():
        rules.append(f"run_shell_command({test_command.strip()})")
    return rules


def _argv(a: CommandAdapter) -> list[str]:
    own = [("--approval-mode", "default"), ("--output-format", "json")]
    model = [] if "--model" in (a.extra_args or ()) or "-m" in (a.extra_args or ()) else _model(a.model)
    return [a.binary, *options(own, a.extra_args), *model, *extras(a)]


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    overridden = {x.split("=", 1)[0] for x in (adapter.extra_args or ()) if x.startswith("-")}
    rules: list[str] = []
    if "--allowed-tools" not in overridden:
        for rule in allowed_rules(inv.ctx.test_command):
            rules += ["--allowed-tools", rule]
    if "--exclude-tools" not in overridden:
        for rule in DENIED:
            rules += ["--exclude-tools", rule]
    inv.argv[1:1] = rules
    _notes_hooks(inv)
    # Qwen's shell, like Gemini's, may hide ~/.gitconfig and empty core.hooksPath / diff.external
    inv.env.update(git_identity_env(inv.workdir, inv.env))
    inv.env.update(git_config_env(inv.workdir, inv.tmpdir, inv.env))
    inv.env.setdefault("NO_COLOR", "1")


#: the variable naming Qwen Code's system settings file (its highest scope, read whatever the folder's trust)
SYSTEM_SETTINGS = "QWEN_CODE_SYSTEM_SETTINGS_PATH"
#: the hook events that hand the person's notes over after a tool call, and refuse the next calls once stopped
NOTES_EVENTS = ("PostToolUse", "PostToolUseFailure", "PreToolUse")


def _notes_hooks(inv: Invocation) -> None:
    """This run's system settings: the user's own (when they name one) plus git-nerve's notes hooks."""
    from .claude import hooks, notes_command, with_hooks

    command = notes_command(inv, "qwen")
    if command is None:
        return
    data: dict = {}
    theirs = inv.env.get(SYSTEM_SETTINGS)
    if theirs:
        try:
            with open(theirs, encoding="utf-8") as fh:
                loaded = json.load(fh)
            data = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            data = {}
    data = with_hooks(data, hooks(command, NOTES_EVENTS))
    path = os.path.join(inv.tmpdir, "nerve-qwen-settings.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
    inv.env[SYSTEM_SETTINGS] = path


_AUTH = re.compile(
    r"Incorrect API key|invalid_api_key|Invalid API key|\b401\b[^\n]{0,80}(?:Unauthorized|key|auth)|"
    r"(?:status|code)[\":\s]*401\b|API key not valid|No auth type is selected|"
    r"OPENAI_API_KEY[^\n]{0,40}(?:not set|missing|required)|Missing API key",
    re.IGNORECASE,
)


def diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    """A bad or missing key, seen while Qwen Code runs (before its retries) or after an exit 0.

    Only stderr is read ("[API Error: 401 ...]"): stdout is the agent's own answer."""
    m = _AUTH.search(stderr)
    if m is None:
        return None
    found = m.group(0).strip()
    if re.search(r"No auth type|not set|missing|required", found, re.IGNORECASE):
        return f"no usable credentials ({found}): set OPENAI_API_KEY (and security.auth.selectedType)"
    return f"the model API refused the key ({found}): check OPENAI_API_KEY"


def _settings() -> dict:
    try:
        with open(os.path.join(os.path.expanduser("~"), ".qwen", "settings.json"), encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def checks(adapter: CommandAdapter) -> list[str]:
    problems = version_and_flags(adapter, "qwen", TESTED_VERSION,
                                 ("--approval-mode", "--allowed-tools", "--exclude-tools", "--output-format", "--model"))
    if _version(adapter.binary)[1]:
        return problems  # it did not run
    settings = _settings()
    selected = str((((settings.get("security") or {}).get("auth") or {}).get("selectedType")) or "")
    extra = " ".join(adapter.extra_args or ())
    if "--auth-type" not in extra and not selected:
        problems.append('qwen has no auth type: set security.auth.selectedType (e.g. "openai") in ~/.qwen/settings.json '
                        "or pass --auth-type in [adapters.qwen] extra_args")
    if (selected == "openai" or "--auth-type openai" in extra or "--auth-type=openai" in extra) and not (
            os.environ.get("OPENAI_API_KEY") or "--openai-api-key" in extra):
        problems.append("qwen uses an OpenAI-compatible provider but OPENAI_API_KEY is not set")
    return problems


create_qwen = adapter_factory(
    "qwen", "qwen",
    build=_argv, prompt_via="stdin", prepare=_prepare, diagnose=diagnose, checks=checks, sandbox=SANDBOX,
    report=lambda a, out, inv: usage.qwen(out), project_settings=QWEN,
    env_names=("QWEN_*", "OPENAI_*", "DASHSCOPE_*"), state_dirs=(".qwen",),
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
qwen_adapter = create_qwen()

__all__ = ["create_qwen", "diagnose", "qwen_adapter"]
