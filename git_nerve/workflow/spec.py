"""Authoring workflows: roles (adapter + prompt + meta schema) and a moderator.

.. code-block:: python

    # .nerve/workflows/fix.py
    from pydantic import BaseModel
    from git_nerve.workflow import END, Role, Workflow, fail
    from git_nerve.workflow.adapters import claude_adapter, create_codex

    class Fixed(BaseModel):
        fixed: bool
        summary: str = ""

    def moderator(thread):
        last = thread.last("fixer")
        if last is None:
            return "fixer"
        return END if last.metadata.get("fixed") else fail("not fixed")

    workflow = Workflow(
        name="fix",
        roles={"fixer": Role(adapter=create_codex(timeout=600), prompt="Fix the failing test.", meta=Fixed)},
        moderator=moderator,
    )

A prompt is a string or a function ``(start, rounds) -> str``. The moderator
gets the :class:`Thread` of this run and returns the next role's name, or an
:class:`End` (``END`` for success, ``fail(reason)`` otherwise).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..bus.rounds import Round
from .adapters.base import StartFrame
from .config import ExtractConfig

PromptFn = Callable[[StartFrame, Sequence[Round]], str]
PromptInput = str | PromptFn

#: Metadata keys the runner writes next to a role's meta (and `type`, `role`,
#: `content`, which `git nerve thread` reserves): a meta model may not use them.
RESERVED_FIELDS = frozenset(
    {"type", "role", "content", "adapter", "duration_s", "workflow", "error", "exit_code", "timeout_s",
     "extract_error", "extract_retries", "extract_via", "usage"}
)
#: Role names used by other parts of git-nerve (steering notes, reviews, `git worker run`).
RESERVED_ROLES = frozenset({"human", "unknown", "budget"})  # budget: the round a budget's stop leaves (issue 39)
_ROLE_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}\Z")
DEFAULT_MAX_ROUNDS = 12


@dataclass(frozen=True)
class End:
    """Returned by a moderator to finish the run."""

    ok: bool = True
    reason: str = "done"


END = End()


def end(reason: str = "done") -> End:
    """Finish successfully."""
    return End(True, reason)


def fail(reason: str) -> End:
    """Finish unsuccessfully (the run exits non-zero)."""
    return End(False, reason)


@dataclass(frozen=True)
class Thread:
    """What a moderator sees: the start frame and this run's rounds (oldest first).

    Rounds other writers add meanwhile (a person's `note`, a review comment)
    are included. A round whose agent failed has ``metadata["error"]`` (the
    adapter error kind); one whose output could not be read has
    ``metadata["extract_error"]``.
    """

    start: StartFrame
    rounds: tuple[Round, ...]

    def last(self, *roles: str) -> Round | None:
        """The newest round (of one of ``roles``, if given)."""
        for r in reversed(self.rounds):
            if not roles or r.role in roles:
                return r
        return None

    def of(self, role: str) -> list[Round]:
        return [r for r in self.rounds if r.role == role]

    def count(self, role: str) -> int:
        return len(self.of(role))

    @staticmethod
    def failed(r: Round) -> bool:
        """True when the round's agent failed, its result could not be read, or git contradicts it
        (``metadata["git_error"]``: no commit from a committing role, uncommitted changes left)."""
        return "error" in r.metadata or "extract_error" in r.metadata or "git_error" in r.metadata


Moderator = Callable[[Thread], str | End]


@dataclass(frozen=True)
class Role:
    """A scenario: what to do (prompt), the typed result it must produce (meta), on which capability (adapter)."""

    adapter: Any  #: an AgentFn: ``(prompt, ctx) -> str``
    prompt: PromptInput
    meta: type[BaseModel]
    #: per-role extract settings, merged over nerve.toml's [extract]
    extract: ExtractConfig | Mapping[str, Any] | None = None
    #: the role must leave at least one new commit on the task's branch (git decides, not the agent's report)
    commits: bool = False

    def render(self, start: StartFrame, rounds: Sequence[Round]) -> str:
        text = self.prompt(start, rounds) if callable(self.prompt) else self.prompt
        if not isinstance(text, str):
            raise TypeError(f"the prompt function returned {type(text).__name__}, not str")
        return text


@dataclass(frozen=True)
class Workflow:
    name: str
    roles: Mapping[str, Role]
    moderator: Moderator
    max_rounds: int = DEFAULT_MAX_ROUNDS  #: agent runs allowed per `git nerve run` (--max-rounds overrides)
    description: str = ""
    source: str = field(default="", compare=False)  #: where it was loaded from (set by the loader)


def problems(workflow: Any) -> list[str]:
    """Everything structurally wrong with ``workflow``, one line each (empty when it is fine)."""
    if not isinstance(workflow, Workflow):
        return [f"not a Workflow object but {type(workflow).__name__}"]
    out: list[str] = []
    if not workflow.name:
        out.append("the workflow has no name")
    if not callable(workflow.moderator):
        out.append("the moderator is not callable")
    if not isinstance(workflow.max_rounds, int) or workflow.max_rounds < 1:
        out.append(f"max_rounds must be a positive integer, not {workflow.max_rounds!r}")
    if not workflow.roles:
        out.append("the workflow has no roles")
    for name, role in dict(workflow.roles).items():
        out.extend(f"role {name}: {p}" for p in role_problems(name, role))
    return out


def role_problems(name: str, role: Any) -> list[str]:
    out: list[str] = []
    if not isinstance(name, str) or not _ROLE_NAME.match(name):
        out.append("role names are lowercase letters, digits, '-' and '_', starting with a letter")
    elif name in RESERVED_ROLES:
        out.append(f"the role name {name!r} is reserved")
    if not isinstance(role, Role):
        return out + [f"not a Role but {type(role).__name__}"]
    if role.adapter is None:
        out.append("has no adapter")
    elif not callable(role.adapter):
        out.append(f"its adapter is not callable ({type(role.adapter).__name__})")
    if isinstance(role.prompt, str):
        if not role.prompt.strip():
            out.append("its prompt is empty")
    elif callable(role.prompt):
        try:
            inspect.signature(role.prompt).bind(None, ())
        except TypeError:
            out.append("its prompt function must take (start, rounds)")
        except ValueError:
            pass  # builtins without a signature: checked when called
    else:
        out.append("its prompt must be a string or a function (start, rounds) -> str")
    if not (isinstance(role.meta, type) and issubclass(role.meta, BaseModel)):
        out.append("its meta must be a pydantic model class")
    else:
        clash = sorted(RESERVED_FIELDS & set(role.meta.model_fields))
        if clash:
            out.append(f"its meta model uses reserved field names: {', '.join(clash)}")
    return out


__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "END",
    "RESERVED_FIELDS",
    "RESERVED_ROLES",
    "End",
    "Moderator",
    "PromptInput",
    "Role",
    "Thread",
    "Workflow",
    "end",
    "fail",
    "problems",
    "role_problems",
]
