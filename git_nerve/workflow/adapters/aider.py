"""Aider: `aider --message-file FILE` processes one message read from a private
temporary file and exits; `--yes-always` answers its confirmations, and its
pretty/streaming output is turned off so stdout is plain text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .command import DEFAULT_GRACE, PROMPT_FILE, CommandAdapter, extras, model_flag

_model = model_flag("--model")


def _argv(a: CommandAdapter) -> list[str]:
    return [a.binary, "--yes-always", "--no-pretty", "--no-stream", "--no-check-update", *_model(a.model), *extras(a), "--message-file", PROMPT_FILE]


def create_aider(
    *,
    model: str | None = None,
    timeout: float | None = None,
    extra_args: Sequence[str] | None = None,
    binary: str = "aider",
    name: str = "aider",
    grace: float = DEFAULT_GRACE,
    env: Mapping[str, str] | None = None,
) -> CommandAdapter:
    """A aider adapter; None means nerve.toml's [adapters.aider] default, else the built-in one (timeout 300 s)."""
    return CommandAdapter(
        name=name, binary=binary, build=_argv, prompt_via="file", model=model, timeout=timeout,
        extra_args=tuple(extra_args) if extra_args is not None else None, grace=grace, env=env,
    )


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
aider_adapter = create_aider()

__all__ = ["aider_adapter", "create_aider"]
