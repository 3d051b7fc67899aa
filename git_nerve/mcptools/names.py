"""The MCP server's names and how an agent CLI starts it: what the claude and gemini adapters take from
mcptools (standard library only, no SDK, nothing of git_nerve but :mod:`errors`), so a workflow run never
imports the tools or the server."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError

#: The server's name in every CLI's configuration, and the prefix of its tools there (Claude: mcp__nerve__thread).
SERVER_NAME = "nerve"
#: The tool names, as the server lists them (a CLI prefixes them: Claude Code calls them mcp__nerve__<name>).
TOOL_NAMES = ("thread", "post", "heartbeat", "state", "done", "knowledge_query", "conflicts", "notes", "note_acted")
#: What a workflow run lets its agent call: everything but `done` (the runner owns the task's lifecycle).
RUN_TOOLS = tuple(t for t in TOOL_NAMES if t != "done")


def server_entry() -> dict[str, Any]:
    """How an agent CLI starts this server: the absolute git-nerve executable and ``mcp``."""
    return {"command": executable(), "args": ["mcp"]}


def executable() -> str:
    """The absolute path of the git-nerve executable this command belongs to."""
    here = Path(sys.executable).parent / "git-nerve"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("git-nerve")
    if found:
        return str(Path(found).resolve())
    raise UsageError("cannot find the git-nerve executable on PATH")
