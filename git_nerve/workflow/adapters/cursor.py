"""Cursor's agent CLI in print mode: `cursor-agent -p --output-format text`, the
prompt on standard input (no positional prompt), `--force` so it may change files
in the task's worktree without asking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .command import DEFAULT_GRACE, CommandAdapter, extras, model_flag

_model = model_flag("--model")


def _argv(a: CommandAdapter) -> list[str]:
    return [a.binary, "-p", "--output-format", "text", "--force", *_model(a.model), *extras(a)]


def create_cursor(
    *,
    model: str | None = None,
    timeout: float | None = None,
    extra_args: Sequence[str] | None = None,
    binary: str = "cursor-agent",
    name: str = "cursor",
    grace: float = DEFAULT_GRACE,
    env: Mapping[str, str] | None = None,
) -> CommandAdapter:
    """A cursor adapter; None means nerve.toml's [adapters.cursor] default, else the built-in one (timeout 300 s)."""
    return CommandAdapter(
        name=name, binary=binary, build=_argv, prompt_via="stdin", model=model, timeout=timeout,
        extra_args=tuple(extra_args) if extra_args is not None else None, grace=grace, env=env,
    )


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
cursor_adapter = create_cursor()

__all__ = ["create_cursor", "cursor_adapter"]
