"""The built-in `develop` workflow: coder -> tester -> reviewer.

The coder changes the code and commits; the tester runs the tests; the
reviewer reads the diff. While the tester or the reviewer reports failure,
the work goes back to the coder, until the round limit (9 agent runs, three
full cycles; `git nerve run develop --max-rounds N` changes it). An agent that
fails or whose result cannot be read ends the run unsuccessfully.

Every role runs on Claude Code by default. To use other adapters, build your
own in ``.nerve/workflows/develop.py``::

    from git_nerve.workflow.builtin.develop import build
    from git_nerve.workflow.adapters import create_codex, cursor_adapter

    workflow = build(coder=create_codex(timeout=900), reviewer=cursor_adapter)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from ...bus.rounds import Round
from ..adapters.base import StartFrame
from ..adapters.claude import claude_adapter
from ..spec import END, End, Role, Thread, Workflow, fail

MAX_ROUNDS = 9


class CoderMeta(BaseModel):
    summary: str = Field(description="what you changed and why, in a sentence or two")
    files_changed: list[str] = Field(default_factory=list, description="paths you changed")


class TesterMeta(BaseModel):
    passed: bool = Field(description="true when every test passes")
    summary: str = Field(default="", description="what you ran and what happened")
    failures: list[str] = Field(default_factory=list, description="the failing tests, one line each")


class ReviewerMeta(BaseModel):
    approved: bool = Field(description="true when the change is ready to merge")
    summary: str = Field(default="", description="your verdict in a sentence")
    comments: list[str] = Field(default_factory=list, description="what must change before approval")


def _last_verdict(rounds: Sequence[Round]) -> Round | None:
    for r in reversed(rounds):
        if r.role in ("tester", "reviewer") and not Thread.failed(r):
            return r
    return None


def coder_prompt(start: StartFrame, rounds: Sequence[Round]) -> str:
    lines = [
        (
            "You are the coder. Implement the task below in this repository (your working directory is the "
            "task's own git worktree and branch)."
        ),
        "",
        f"Task: {start.content or start.task_id}",
        "",
    ]
    verdict = _last_verdict(rounds)
    if verdict is not None:
        what = "tests failed" if verdict.role == "tester" else "the reviewer asked for changes"
        lines += [
            (
                f"This is another pass: the {what} in round #{verdict.round}. Read it with `git nerve thread` "
                "and address every point."
            ),
            "",
        ]
    if start.test_command:
        lines += [f"Run the tests with `{start.test_command}` before you commit.", ""]
    lines += [
        (
            "Keep the change focused. Commit your work with git when you are done (one or more commits, "
            "clear messages); do not push and do not merge. Work that is not committed does not count."
        ),
    ]
    return "\n".join(lines)


def tester_prompt(start: StartFrame, rounds: Sequence[Round]) -> str:
    return "\n".join([
        (
            "You are the tester. Run this project's test suite (and any check the task calls for) in your "
            "working directory. Do not change the code."
        ),
        "",
        f"Task under test: {start.content or start.task_id}",
        "",
        *([f"The test command: `{start.test_command}`.", ""] if start.test_command else []),
        "Report whether everything passes; list each failing test with the reason.",
    ])


def reviewer_prompt(start: StartFrame, rounds: Sequence[Round]) -> str:
    if start.base:
        how = f"Read it with `git log {start.base}..HEAD` and `git diff {start.base}...HEAD`."
    else:
        how = "Read its commits with `git log` and `git show`."
    return "\n".join([
        f"You are the reviewer. Review the change on this branch. {how} Do not change the code.",
        "",
        f"Task: {start.content or start.task_id}",
        "",
        (
            "Approve only when the change does what the task asks, is correct, tested and consistent with the "
            "code around it; otherwise list what must change."
        ),
    ])


def moderator(thread: Thread) -> str | End:
    """coder -> tester -> reviewer; back to the coder on a failed test or review."""
    last = thread.last("coder", "tester", "reviewer")
    if last is None:
        return "coder"
    if Thread.failed(last):
        why = last.metadata.get("error") or last.metadata.get("git_error") or "its result could not be read"
        return fail(f"the {last.role} failed ({why})")
    if last.role == "coder":
        return "tester"
    if last.role == "tester":
        return "reviewer" if last.metadata.get("passed") is True else "coder"
    return END if last.metadata.get("approved") is True else "coder"


def build(
    *,
    coder: Any = claude_adapter,
    tester: Any = claude_adapter,
    reviewer: Any = claude_adapter,
    max_rounds: int = MAX_ROUNDS,
    name: str = "develop",
) -> Workflow:
    """The develop workflow on the given adapters."""
    return Workflow(
        name=name,
        roles={
            "coder": Role(adapter=coder, prompt=coder_prompt, meta=CoderMeta, commits=True),
            "tester": Role(adapter=tester, prompt=tester_prompt, meta=TesterMeta),
            "reviewer": Role(adapter=reviewer, prompt=reviewer_prompt, meta=ReviewerMeta),
        },
        moderator=moderator,
        max_rounds=max_rounds,
        description="coder -> tester -> reviewer, back to the coder until the tests pass and the review approves",
    )


workflow = build()

__all__ = ["MAX_ROUNDS", "CoderMeta", "ReviewerMeta", "TesterMeta", "build", "moderator", "workflow"]
