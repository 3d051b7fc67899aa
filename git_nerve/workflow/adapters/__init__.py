"""Adapters: the capabilities roles run on.

Command adapters for the agent CLIs (Claude Code, Codex, GitHub Copilot CLI, cursor-agent,
Hermes, Aider, opencode, Gemini CLI, Qwen Code, and any argv through :func:`create_exec`) and an HTTP adapter
for OpenAI-compatible chat endpoints. Each CLI has a default instance
(``claude_adapter``, ...) and a factory (``create_claude(model=, timeout=,
extra_args=)``, ...); different timeouts are different instances.
"""

from . import base
from .aider import aider_adapter, create_aider
from .base import (
    AdapterAborted,
    AdapterAgentFailed,
    AdapterError,
    AdapterNonZeroExit,
    AdapterSpawnFailed,
    AdapterTimeout,
    AgentContext,
    AgentFn,
    StartFrame,
    adapter_name,
    adapter_problems,
)
from .claude import claude_adapter, create_claude
from .codex import codex_adapter, create_codex
from .command import PROMPT_FILE, CommandAdapter, create_exec
from .copilot import copilot_adapter, create_copilot
from .cursor import create_cursor, cursor_adapter
from .gemini import create_gemini, gemini_adapter
from .hermes import create_hermes, hermes_adapter
from .http import HttpAdapter, create_http
from .opencode import create_opencode, opencode_adapter
from .qwen import create_qwen, qwen_adapter

#: Modules of this package that are not an agent CLI of their own.
_NOT_CLIS = {"base", "command", "credentials", "gemini_home", "http", "process", "usage"}


def builtin_names() -> list[str]:
    """The agent CLIs git-nerve ships an adapter for: every module ``X`` here with an ``X_adapter``."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _NOT_CLIS and not m.name.startswith("_"))


def by_name(name: str):
    """The default instance of the built-in adapter ``name`` (`git nerve run --adapter NAME`)."""
    import importlib

    from ...errors import UsageError

    if name not in builtin_names():
        raise UsageError(f"unknown adapter {name!r}; the built-in adapters are: {', '.join(builtin_names())}")
    module = importlib.import_module(f"{__name__}.{name}")
    return getattr(module, f"{name}_adapter")

#: what the package offers: base's names (but its default timeout and tail helper) and every adapter's
__all__ = sorted({*base.__all__} - {"DEFAULT_TIMEOUT", "tail"} | {
    "PROMPT_FILE", "CommandAdapter", "HttpAdapter", "builtin_names", "by_name", "create_exec", "create_http",
    *(name for cli in ("aider", "claude", "codex", "copilot", "cursor", "gemini", "hermes", "opencode", "qwen")
      for name in (f"{cli}_adapter", f"create_{cli}")),
})
