"""Nous Research's Hermes agent: `hermes chat --oneshot --query-file FILE` answers
one query read from a private temporary file and exits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .command import DEFAULT_GRACE, PROMPT_FILE, CommandAdapter, extras, model_flag

_model = model_flag("--model")


def _argv(a: CommandAdapter) -> list[str]:
    return [a.binary, "chat", "--oneshot", "--query-file", PROMPT_FILE, *_model(a.model), *extras(a)]


def create_hermes(
    *,
    model: str | None = None,
    timeout: float | None = None,
    extra_args: Sequence[str] | None = None,
    binary: str = "hermes",
    name: str = "hermes",
    grace: float = DEFAULT_GRACE,
    env: Mapping[str, str] | None = None,
) -> CommandAdapter:
    """A hermes adapter; None means nerve.toml's [adapters.hermes] default, else the built-in one (timeout 300 s)."""
    return CommandAdapter(
        name=name, binary=binary, build=_argv, prompt_via="file", model=model, timeout=timeout,
        extra_args=tuple(extra_args) if extra_args is not None else None, grace=grace, env=env,
    )


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
hermes_adapter = create_hermes()

__all__ = ["create_hermes", "hermes_adapter"]
