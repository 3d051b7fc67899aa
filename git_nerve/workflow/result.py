"""What a run and each of its rounds came to: the run's result and exit code, one report per round, and the
round's thread record (content, metadata, status) built from how its agent ended."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ExitCode
from .adapters.base import AdapterAborted, AdapterError
from .supervise import Supervised

EXIT_CODES = {
    "completed": ExitCode.OK,
    "failed": ExitCode.FAILURE,
    "round_limit": ExitCode.FAILURE,
    "stopped": ExitCode.FAILURE,
    "error": ExitCode.FAILURE,
    "interrupted": ExitCode.INTERRUPTED,
}


@dataclass(frozen=True)
class RoundReport:
    round: int
    role: str
    adapter: str
    duration_s: float
    status: str  #: "ok", "extract_error", or the adapter error kind
    detail: str = ""
    #: the runner's own time around the agent's process: prompt and prompt file, spawning the CLI,
    #: git before and after (reconciliation), extraction, the thread append
    overhead_s: float = 0.0


@dataclass
class RunResult:
    task_id: str
    workflow: str
    outcome: str = "error"  #: completed | failed | round_limit | stopped | interrupted | error
    reason: str = ""
    first_round: int = 1
    rounds: list[RoundReport] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def exit_code(self) -> int:
        return int(EXIT_CODES[self.outcome])

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        return data

    def summary(self) -> list[str]:
        lines = [f"workflow {self.workflow} on {self.task_id}: {self.outcome} ({self.reason})" if self.reason
                 else f"workflow {self.workflow} on {self.task_id}: {self.outcome}"]
        for r in self.rounds:
            said = r.adapter
            if r.detail and r.status != "ok":
                said = r.detail if r.detail.startswith(f"{r.adapter}: ") else f"{r.adapter}: {r.detail}"
            lines.append(f"  #{r.round} {r.role:<10} {r.status:<14} {r.duration_s:7.1f}s  {said}")
        lines.append(f"{len(self.rounds)} agent run(s) in {self.duration_s:.1f}s; read them with `git nerve thread {self.task_id}`")
        return lines


def round_record(aname: str, facts: dict[str, Any], out: Supervised) -> tuple[str, dict[str, Any], str, str]:
    """The round's ``(content, metadata, status, detail)``: the agent's output and extracted meta, or its
    adapter's error, or a stop it obeyed (or was killed for)."""
    exc = out.exc
    if exc is None:
        raw, got, extract_error = out.value
        if got is not None:
            metadata = {**got.meta.model_dump(mode="json"), **facts}
            if got.retries:
                metadata["extract_retries"] = got.retries
            if got.via != "parse":
                metadata["extract_via"] = got.via
            status, detail = "ok", ""
        else:
            metadata = {**facts, "extract_error": extract_error.message}
            status, detail = "extract_error", extract_error.message
        content = raw
    elif isinstance(exc, AdapterError):
        if isinstance(exc, AdapterAborted):
            why = (f"stopped: {out.stop_reason}" if out.stop_reason
                   else f"interrupted ({out.interrupted})" if out.interrupted else "aborted")
            content = f"{exc.message} ({why})"
        else:
            content = exc.message
        metadata = {**facts, **exc.facts()}
        status, detail = exc.kind, exc.message
    else:
        content = f"{aname}: the adapter raised {type(exc).__name__}: {exc}"
        metadata = {**facts, "error": "exception"}
        status, detail = "exception", content
    if out.stop_reason and status != "ok" and not out.interrupted:
        # a stop the agent obeyed (or was killed for): the round was stopped, not failed
        metadata["stopped_how"] = out.stop_how
        status, detail = "stopped", f"stopped: {out.stop_reason}"
    return content, metadata, status, detail
