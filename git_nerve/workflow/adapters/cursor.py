"""Cursor's agent CLI in print mode: `cursor-agent -p --output-format text`, the
prompt on standard input (no positional prompt).

Untested: cursor-agent is not installable from a package registry, so no CI
suite runs this adapter against the real CLI (`git nerve validate` says so).
It no longer passes ``--force`` (which allows every command not explicitly
denied: blanket approval); what the agent may run comes from the user's own
Cursor CLI permission rules (``~/.cursor/cli-config.json``: ``permissions.allow``
such as ``Shell(git)`` and the test command, ``permissions.deny`` for the rest).
"""

from __future__ import annotations


from .command import CommandAdapter, adapter_factory, extras, model_flag, options

_model = model_flag("--model")


def _argv(a: CommandAdapter) -> list[str]:
    own = [("-p", None), ("--output-format", "text")]
    return [a.binary, *options(own, a.extra_args), *_model(a.model), *extras(a)]


create_cursor = adapter_factory(
    "cursor", "cursor-agent",
    build=_argv, prompt_via="stdin",
    sandbox="Cursor CLI permission rules (~/.cursor/cli-config.json allow/deny); untested here", tested=False,
    env_names=("CURSOR_*",), state_dirs=(".cursor", ".config/cursor"),
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
cursor_adapter = create_cursor()

__all__ = ["create_cursor", "cursor_adapter"]
