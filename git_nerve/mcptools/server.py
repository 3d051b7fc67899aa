"""`git nerve mcp`: the Model Context Protocol server over stdio (official `mcp` SDK).

Imported only by `git nerve mcp` itself (the SDK pulls in anyio, starlette and
pydantic: nothing of it may reach the hook or heartbeat paths). The tools are
thin wrappers around :mod:`.tools`; a refusal there (a NerveError) or any
other failure becomes an MCP tool error with one clean line, never a crash of
the server and never raw control codes.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError

from .. import __version__
from ..errors import NerveError
from ..text import clean_line
from . import tools
from .tools import SERVER_NAME, TOOL_NAMES, Binding  # noqa: F401 (TOOL_NAMES: re-exported)


INSTRUCTIONS = (
    "git-nerve coordinates several coding agents on one repository; this server speaks for the task of the "
    "worktree it was started in. Read the task's conversation with `thread`, say what you are doing with "
    "`heartbeat`, check `notes` for what the person in charge told you (and `note_acted` once you acted on them), "
    "`post` a round to the thread, and call `done` once your work is committed."
)


def _call(fn: Callable[..., str], *args: Any, **kwargs: Any) -> str:
    try:
        return fn(*args, **kwargs)
    except NerveError as exc:
        raise ToolError(clean_line(exc.message)) from None
    except Exception as exc:  # one line for the model, not a traceback
        raise ToolError(clean_line(f"{type(exc).__name__}: {exc}")) from None


def _client(ctx: Context) -> str:
    params = getattr(ctx.session, "client_params", None)
    return tools.reader_name(getattr(params, "client_info", None) if params is not None else None)


class _Server(MCPServer):
    """MCPServer whose argument-validation errors are one line (pydantic's own are several, with a URL)."""

    async def call_tool(self, name, arguments, context=None):
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                what = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in cause.errors())
                raise ToolError(clean_line(f"invalid arguments: {what}")) from cause
            raise


def build(binding: Binding, *, client_pid: int | None = None) -> MCPServer:
    """The server for ``binding``'s task. ``client_pid``: the process the notes are delivered to (the CLI)."""
    server = _Server(SERVER_NAME, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    _task_tools(server, binding)
    _repository_tools(server, binding, client_pid)
    return server


def _task_tools(server: MCPServer, b: Binding) -> None:
    """The task's own tools: its thread, a heartbeat, its state, done."""

    @server.tool(structured_output=False, description="The task's thread (its conversation so far), exactly as `git nerve thread` prints it: "
                 "round 1 then the newest rounds within `budget` characters; `before` pages back.")
    def thread(
        budget: Annotated[int | None, Field(description="characters of content to show (default 8000, as `git nerve thread`)", ge=1)] = None,
        before: Annotated[int | None, Field(description="show the rounds before this round id", ge=1)] = None,
    ) -> str:
        return _call(tools.thread, b, budget, before)

    @server.tool(structured_output=False, description="Append a round to the task's thread (as `git nerve post --role ROLE`); returns its id.")
    def post(
        role: Annotated[str, Field(description="who speaks: coder, tester, reviewer, ...")],
        content: Annotated[str, Field(description="the round's text")],
        metadata: Annotated[dict[str, Any] | None, Field(description="typed metadata (a JSON object)")] = None,
    ) -> str:
        return _call(tools.post, b, role, content, metadata)

    @server.tool(structured_output=False, description="Record a heartbeat for the task with a one-line status (what you are doing now) "
                 "and optional progress between 0 and 1; `git worker status` shows it.")
    def heartbeat(
        status: Annotated[str | None, Field(description="one line: what you are doing now")] = None,
        progress: Annotated[float | None, Field(description="progress between 0 and 1", ge=0, le=1)] = None,
    ) -> str:
        return _call(tools.heartbeat, b, status, progress)

    @server.tool(structured_output=False, description="The task's state as JSON: its row of `git worker status --json`, unread notes, radar.")
    def state() -> str:
        return _call(tools.state, b)

    @server.tool(structured_output=False, description="Finish the task (`git worker done`): rebase onto the integration branch, push, ask "
                 "for review. Refused while the branch has no commit of its own or the worktree has uncommitted changes.")
    def done() -> str:
        return _call(tools.done, b)


def _repository_tools(server: MCPServer, b: Binding, client_pid: int | None) -> None:
    """What the task sees of the repository and the person in charge: knowledge, the radar, the notes."""

    @server.tool(structured_output=False, description="Search this repository's code and docs index (`git nerve knowledge query`).")
    def knowledge_query(
        text: Annotated[str, Field(description="what to look for")],
        limit: Annotated[int, Field(description="how many results", ge=1, le=50)] = 5,
    ) -> str:
        return _call(tools.knowledge_query, b, text, limit)

    @server.tool(structured_output=False, description="The conflict radar for this task: which other live tasks (or the integration branch) "
                 "your work would conflict or overlap with, by file and line.")
    def conflicts(
        refresh: Annotated[bool, Field(description="recompute now instead of the last result")] = False,
    ) -> str:
        return _call(tools.conflicts, b, refresh)

    @server.tool(structured_output=False, description="The notes the person in charge sent this task (`git nerve tell`) that you have not "
                 "read yet. Reading them records that you received them; call note_acted once you acted on them.")
    def notes(ctx: Context) -> str:
        return _call(tools.notes, b, _client(ctx), client_pid)

    @server.tool(structured_output=False, description="Say that the notes you received were acted on, and how (one line).")
    def note_acted(
        how: Annotated[str, Field(description="one line: what you did about the notes")],
        note_ids: Annotated[list[int] | None, Field(description="only these notes (default: all you received)")] = None,
    ) -> str:
        return _call(tools.note_acted, b, how, note_ids)


def serve(binding: Binding) -> None:
    """Serve ``binding`` over stdin/stdout until the client closes the connection."""
    build(binding, client_pid=os.getppid()).run("stdio")
