"""`git worker merge --all --batch N`: one `--check` run for N tasks, bisected when it fails.

The batch is merged in memory onto the integration tip, in queue order, and
checked once. When that fails, the batch is split and each half checked on
top of what already passed, down to the task(s) that break it: two failing
tasks in a batch of eight cost about seven checks instead of eight, and a
batch that passes costs one. The tasks found failing go back to WORKING with
the check's output as a thread round; the rest are merged (each with the
ordinary `merge`, without a second check, onto the tip they were checked
against; if the integration branch moved meanwhile they are checked again
one by one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ConflictError

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any


@dataclass
class BatchVerdict:
    passing: list[str] = field(default_factory=list)  #: in queue order
    failing: dict[str, str] = field(default_factory=dict)  #: task -> the check's output that condemned it
    conflicting: dict[str, ConflictError] = field(default_factory=dict)
    checks: int = 0
    onto: str | None = None  #: the integration tip the passing set was checked on


Check = Callable[[list[str]], "str | None"]


def bisect(tasks: list[str], check: Check) -> BatchVerdict:
    """Which of ``tasks`` make ``check`` fail, checking as few combinations as it can.

    ``check(task_ids)`` runs the check on the integration tip with those tasks
    merged on top (None: it passed; else its output). It raises
    :class:`ConflictError` (the task in ``details``) for a task that does not
    merge: that task is set aside without costing a check run.
    """
    verdict = BatchVerdict()
    results: dict[tuple[str, ...], str | None] = {}

    def run(combo: list[str]) -> str | None:
        while True:
            combo = [t for t in combo if t not in verdict.conflicting]
            key = tuple(combo)
            if not combo:
                return None
            if key in results:
                return results[key]
            try:
                out = check(combo)
            except ConflictError as exc:
                verdict.conflicting[exc.details[0] if exc.details else combo[-1]] = exc
                continue
            verdict.checks += 1
            results[key] = out
            return out

    def find(prefix: list[str], group: list[str]) -> list[str]:
        """The failing tasks of ``group``, checked on top of ``prefix`` (known to pass)."""
        out = run(prefix + group)
        group = [t for t in group if t not in verdict.conflicting]
        if out is None or not group:
            return []
        if len(group) == 1:
            verdict.failing[group[0]] = out
            return group
        half = len(group) // 2
        bad_left = find(prefix, group[:half])
        good_prefix = prefix + [t for t in group[:half] if t not in bad_left and t not in verdict.conflicting]
        return bad_left + find(good_prefix, group[half:])

    find([], list(tasks))
    verdict.passing = [t for t in tasks if t not in verdict.failing and t not in verdict.conflicting]
    out = run(verdict.passing)  # what will land is checked as a whole (cached when it already was)
    if out is not None:  # only combinations fail: send the whole remainder back rather than land it unchecked
        verdict.failing.update({t: out for t in verdict.passing})
        verdict.passing = []
    return verdict


def run_batch(repo: Any, tasks: list[str], check: str, say: Callable[[str], None]) -> BatchVerdict:
    """Check ``tasks`` as one batch (bisecting on failure) against the current integration tip."""
    from ..git import refs
    from ..worker import lifecycle

    first = [True]

    def check_fn(combo: list[str]) -> str | None:
        fetch, first[0] = first[0], False
        return lifecycle.check_combination(repo, combo, check, fetch=fetch)

    verdict = bisect(tasks, check_fn)
    integration = repo.settings.integration
    verdict.onto = refs.resolve(repo.cwd, lifecycle.integration_ref(repo, integration, fetch=False))
    say(f"batch of {len(tasks)}: {verdict.checks} check run(s); passing: {', '.join(verdict.passing) or 'none'}"
        + (f"; failing: {', '.join(verdict.failing)}" if verdict.failing else ""))
    return verdict


__all__ = ["BatchVerdict", "bisect", "run_batch"]
