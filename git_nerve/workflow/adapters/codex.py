"""OpenAI Codex CLI: `codex exec -` reads the prompt from standard input; progress
goes to stderr and only the final agent message to stdout. The sandbox allows
writes in the working directory (the task's worktree)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .command import DEFAULT_GRACE, CommandAdapter, extras, model_flag

_model = model_flag("--model")


def _argv(a: CommandAdapter) -> list[str]:
    return [a.binary, "exec", "--sandbox", "workspace-write", *_model(a.model), *extras(a), "-"]


def create_codex(
    *,
    model: str | None = None,
    timeout: float | None = None,
    extra_args: Sequence[str] | None = None,
    binary: str = "codex",
    name: str = "codex",
    grace: float = DEFAULT_GRACE,
    env: Mapping[str, str] | None = None,
) -> CommandAdapter:
    """A codex adapter; None means nerve.toml's [adapters.codex] default, else the built-in one (timeout 300 s)."""
    return CommandAdapter(
        name=name, binary=binary, build=_argv, prompt_via="stdin", model=model, timeout=timeout,
        extra_args=tuple(extra_args) if extra_args is not None else None, grace=grace, env=env,
    )


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
codex_adapter = create_codex()

__all__ = ["codex_adapter", "create_codex"]
