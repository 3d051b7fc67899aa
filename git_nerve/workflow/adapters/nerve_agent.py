"""git-nerve's own agent (`python -m git_nerve.agent`, :mod:`git_nerve.agent`) as an adapter.

It needs nothing installed but git-nerve itself: it runs on this interpreter
and talks to any OpenAI-compatible endpoint, set in nerve.toml::

    [adapters.nerve_agent]
    extra_args = ["--base-url", "http://127.0.0.1:8000/v1", "--api-key-env", "OPENAI_API_KEY"]

Its tools are confined by the agent itself (:mod:`git_nerve.agent.tools`):
files inside the worktree only, commands from an allowlist run without a shell.
"""

from __future__ import annotations

import os

from .command import CommandAdapter, Invocation, adapter_factory, extras, model_flag, options

SANDBOX = ("allowlisted commands (git add/commit/status/diff/log/show..., git nerve thread/knowledge, the test "
           "command; argv lists, no shell), writes confined to the worktree (symlinks resolved, .git refused)")

_model = model_flag("--model")


def _argv(a: CommandAdapter) -> list[str]:
    model = [] if "--model" in (a.extra_args or ()) else _model(a.model)
    return [a.binary, "-m", "git_nerve.agent", *options([], a.extra_args), *model, *extras(a)]


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    if inv.ctx.test_command.strip() and "--test-command" not in (adapter.extra_args or ()):
        inv.argv[3:3] = ["--test-command", inv.ctx.test_command.strip()]
    inv.argv[3:3] = ["--workdir", inv.workdir]
    inv.env.setdefault("NO_COLOR", "1")


def diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    for line in stderr.splitlines():
        if line.startswith("nerve-agent: model API error 401") or line.startswith("nerve-agent: no API key"):
            return line.removeprefix("nerve-agent: ") + " (check the key variable named by --api-key-env)"
        if line.startswith("nerve-agent: no model endpoint") or line.startswith("nerve-agent: cannot reach the model"):
            return line.removeprefix("nerve-agent: ")
    return None


def checks(adapter: CommandAdapter) -> list[str]:
    extra = list(adapter.extra_args or ())
    problems = []
    if "--base-url" not in extra and not os.environ.get("OPENAI_BASE_URL"):
        problems.append("nerve_agent has no model endpoint: set [adapters.nerve_agent] extra_args = "
                        '["--base-url", URL] in nerve.toml or OPENAI_BASE_URL')
    key_env = extra[extra.index("--api-key-env") + 1] if "--api-key-env" in extra[:-1] else "OPENAI_API_KEY"
    if not os.environ.get(key_env):
        problems.append(f"nerve_agent: {key_env} is not set (the model endpoint's key)")
    return problems


create_nerve_agent = adapter_factory(
    "nerve_agent", None,
    build=_argv, prompt_via="stdin", prepare=_prepare, diagnose=diagnose, checks=checks, sandbox=SANDBOX,
    clean_stop=True,
    env_names=("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"), state_dirs=(),
)


nerve_agent_adapter = create_nerve_agent()

__all__ = ["create_nerve_agent", "diagnose", "nerve_agent_adapter"]
