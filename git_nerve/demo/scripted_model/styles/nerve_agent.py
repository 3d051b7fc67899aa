"""git-nerve's own agent (git_nerve/agent): read_file / write_file / edit_file / run_command, paths relative to
the worktree (the agent refuses any path that resolves outside it)."""

from __future__ import annotations

from typing import Any

from ..scenario import Action, Turn
from . import Reply, generic

TOOLS = {"read_file", "write_file", "edit_file", "run_command"}


def matches(turn: Turn) -> bool:
    return turn.protocol == "chat" and set(turn.tools) == TOOLS


def render(action: Action, turn: Turn, params: dict[str, Any]) -> Reply:
    return generic(action, turn, {k: v for k, v in params.items() if k != "workdir"})
