"""Claude Code in print mode: `claude -p` reads the prompt from standard input and
prints its final answer as plain text. File edits are accepted (`--permission-mode
acceptEdits`: the agent works in the task's own worktree); other tools follow the
user's Claude Code settings, or add flags with ``extra_args``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .command import DEFAULT_GRACE, CommandAdapter, extras, model_flag

_model = model_flag("--model")


def _argv(a: CommandAdapter) -> list[str]:
    return [a.binary, "-p", "--output-format", "text", "--permission-mode", "acceptEdits", *_model(a.model), *extras(a)]


def create_claude(
    *,
    model: str | None = None,
    timeout: float | None = None,
    extra_args: Sequence[str] | None = None,
    binary: str = "claude",
    name: str = "claude",
    grace: float = DEFAULT_GRACE,
    env: Mapping[str, str] | None = None,
) -> CommandAdapter:
    """A claude adapter; None means nerve.toml's [adapters.claude] default, else the built-in one (timeout 300 s)."""
    return CommandAdapter(
        name=name, binary=binary, build=_argv, prompt_via="stdin", model=model, timeout=timeout,
        extra_args=tuple(extra_args) if extra_args is not None else None, grace=grace, env=env,
    )


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
claude_adapter = create_claude()

__all__ = ["claude_adapter", "create_claude"]
