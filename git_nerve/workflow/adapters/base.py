"""The one protocol every adapter implements, and the errors adapters raise.

An adapter is a capability (an agent CLI, an LLM endpoint); a role is a
scenario run on it. Whatever it drives, an adapter is a callable
``(prompt, ctx) -> str`` returning the agent's raw output; typed results are
extracted separately (:mod:`git_nerve.workflow.extract`).

Failures are four distinct exception types, exactly the kinds of the adapters
design: ``spawn_failed``, ``non_zero_exit``, ``timeout``, ``aborted``. No
adapter retries and none falls back to another: the workflow's moderator
decides what happens next.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from ...bus.rounds import Round
from ...errors import NerveError

#: Timeout of an adapter instance unless its factory or nerve.toml says otherwise.
DEFAULT_TIMEOUT = 300.0
#: How much of an agent's stdout/stderr an error message quotes.
TAIL_CHARS = 2000
#: How much of stdout and of stderr a timeout keeps.
TIMEOUT_TAIL_CHARS = 4096


@dataclass(frozen=True)
class StartFrame:
    """What a workflow run starts from: the task and where it lives."""

    task_id: str
    workflow: str
    content: str  #: the task's description: what the run is asked to achieve
    workdir: str  #: the task's worktree
    branch: str = ""
    base: str = ""  #: the ref the task was spawned from
    first_round: int = 1  #: the thread's round id where this run began (older rounds are earlier history)
    test_command: str = ""  #: how the repository runs its tests (nerve.toml [run] test_command), "" if unknown
    sandbox: str = "none"  #: the box around each agent process: "bwrap", "seatbelt" or "none" (workflow/sandbox.py)
    network: bool = True  #: False: a boxed agent gets no network ([run] network = "none")
    hide: tuple[str, ...] = ()  #: more paths a boxed agent must not see ([run] hide)


@dataclass
class AgentContext:
    """Everything an adapter may use besides the prompt."""

    start: StartFrame
    rounds: Sequence[Round]  #: this run's rounds so far (the full history: `git nerve thread`)
    workdir: str
    abort: threading.Event = field(default_factory=threading.Event)
    task_id: str = ""
    role: str = ""
    #: the repository's test command (nerve.toml ``[run] test_command``): adapters whose CLI
    #: runs shell commands by rule allow exactly this one besides git and `git nerve`
    test_command: str = ""
    #: the thread round this run will be recorded as (0: unknown): names the agent's output log (runlog.py)
    round: int = 0
    #: seconds the agent's own process(es) ran, added by adapters that start one (the runner's overhead is the rest)
    process_s: float = 0.0
    #: the task's environment for the agent's process: NERVE_PORT, its port block (git_nerve/worktree_prep)
    env: dict = field(default_factory=dict)
    #: what the agent's model calls used, as its CLI reported it (adapters/usage.py Usage, one per model and
    #: run; an adapter appends what it read): the runner records it with the round (issue 39)
    usage: list = field(default_factory=list)
    #: what a CLI that streams its usage has reported so far in the run going on (replaced, not appended, by
    #: its adapter while it runs): the runner checks the budgets against it mid-turn
    live_usage: list = field(default_factory=list)


@runtime_checkable
class AgentFn(Protocol):
    """``(prompt, ctx) -> raw output``. Plain functions qualify; adapter classes
    may also carry ``name`` (shown in rounds) and ``check()`` (used by `git nerve validate`)."""

    def __call__(self, prompt: str, ctx: AgentContext) -> str: ...


def adapter_name(adapter: Any) -> str:
    """The name an adapter is shown under in rounds and problems."""
    name = getattr(adapter, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(adapter, "__name__", None) or type(adapter).__name__


def adapter_problems(adapter: Any) -> list[str]:
    """What would stop ``adapter`` from running here (a binary missing from PATH, an unset key)."""
    check = getattr(adapter, "check", None)
    return list(check()) if callable(check) else []


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else "..." + text[-limit:]


class AdapterError(NerveError):
    """An adapter could not produce output. ``kind`` is the error kind recorded in the round."""

    kind: ClassVar[str] = "adapter_error"

    def __init__(self, adapter: str, message: str):
        super().__init__(f"{adapter}: {message}")
        self.adapter = adapter

    def facts(self) -> dict[str, Any]:
        """What a round's metadata records about this failure."""
        return {"error": self.kind}


class AdapterSpawnFailed(AdapterError):
    """The agent could not be started: binary not on PATH, endpoint unreachable, key not set."""

    kind = "spawn_failed"


class AdapterNonZeroExit(AdapterError):
    """The agent ran and failed (a non-zero exit status, or an HTTP error status)."""

    kind = "non_zero_exit"

    def __init__(
        self,
        adapter: str,
        exit_code: int,
        stdout: str = "",
        stderr: str = "",
        *,
        what: str = "exitCode",
        note: str | None = None,
        labels: tuple[str, str | None] = ("stdout", "stderr"),
    ):
        self.exit_code = exit_code
        self.stdout_tail = tail(stdout)
        self.stderr_tail = tail(stderr)
        parts = [f"{what}={exit_code}" + (f" ({note})" if note else "")]
        for label, text in zip(labels, (self.stdout_tail, self.stderr_tail)):
            if label:
                parts.append(f"{label}={text!r}" if text else f"{label}=(empty)")
        super().__init__(adapter, " ".join(parts))

    def facts(self) -> dict[str, Any]:
        return {"error": self.kind, "exit_code": self.exit_code}


class AdapterTimeout(AdapterError):
    """The agent ran longer than its adapter's timeout and was stopped.

    The last few KB of what it printed are kept (a timeout is often a retry
    loop behind an error the agent printed: a 401, a refused connection)."""

    kind = "timeout"

    def __init__(self, adapter: str, timeout: float, stdout: str = "", stderr: str = "", *, stopped: str = "the agent's process group was killed"):
        self.timeout = timeout
        self.stdout_tail = tail(stdout, TIMEOUT_TAIL_CHARS)
        self.stderr_tail = tail(stderr, TIMEOUT_TAIL_CHARS)
        parts = [f"timed out after {timeout:g}s; {stopped}"]
        for label, text in (("stdout", self.stdout_tail), ("stderr", self.stderr_tail)):
            if text:
                parts.append(f"last {label}:\n{text}")
        super().__init__(adapter, "\n".join(parts))

    def facts(self) -> dict[str, Any]:
        return {"error": self.kind, "timeout_s": self.timeout}


class AdapterAgentFailed(AdapterError):
    """The agent's CLI ran but its model call failed (a 401, an unreachable endpoint, a quota),
    whatever its exit status said. ``cause`` is the one line that names it."""

    kind = "agent_failed"

    def __init__(self, adapter: str, cause: str, exit_code: int = 0, stdout: str = "", stderr: str = "", *, detail: str = ""):
        self.cause = cause
        self.exit_code = exit_code
        self.stdout_tail = tail(stdout)
        self.stderr_tail = tail(stderr)
        message = f"{cause} (exit {exit_code})"
        if detail.strip():
            message += "\n" + tail(detail, 1000)
        super().__init__(adapter, message)

    def facts(self) -> dict[str, Any]:
        return {"error": self.kind, "exit_code": self.exit_code, "cause": self.cause}


class AdapterAborted(AdapterError):
    """The run asked the agent to stop (Ctrl-C, a queued `stop`); its process group was killed."""

    kind = "aborted"


__all__ = [
    "DEFAULT_TIMEOUT",
    "AdapterAborted",
    "AdapterAgentFailed",
    "AdapterError",
    "AdapterNonZeroExit",
    "AdapterSpawnFailed",
    "AdapterTimeout",
    "AgentContext",
    "AgentFn",
    "StartFrame",
    "adapter_name",
    "adapter_problems",
    "tail",
]
