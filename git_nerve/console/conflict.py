"""A task in conflict, as the console's banner says it (issue 38): which files and lines conflict with what, the
recipe the CLI prints for resolving it, and the note that tells its agent to rebase.

What is known already, nothing computed anew: the record of the conflict that put the task in its state
(``rebase_conflict``: `git worker done` made it CONFLICTED; ``merge_conflict``: `git worker merge` sent it back
to WORKING) and the conflict radar's last result (:mod:`..radar.flags`: the lines of the task's own version that
conflict with another task or the integration branch). The recipe is the CLI's own text
(:data:`..worker.lifecycle.REBASE_STEPS`, :func:`..worker.lifecycle.merge_conflict_steps`).
"""

from __future__ import annotations

from typing import Any

from ..bus import messages
from ..radar import flags as radar_flags
from ..radar.scan import LIVE
from ..worker import lifecycle

#: the records of a conflict that moved a task to its state
RECORDS = ("rebase_conflict", "merge_conflict")


def _record(conn, task_id: str):
    """The conflict record that moved the task to the state it is in (the newest of its state changes and
    conflict records is one), or None."""
    found = messages.for_task(conn, task_id, kinds=("state_change", *RECORDS))
    return found[-1] if found and found[-1].kind in RECORDS else None


def spans(lines: list[int]) -> str:
    """``[2, 3, 4, 9]`` as ``2-4, 9``."""
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def _flagged(common_dir, task_id: str) -> list[dict[str, Any]]:
    """``[{"with", "path", "lines"}]``: what the radar flags of the task's own lines, per other side and file."""
    by: dict[tuple[str, str], list[int]] = {}
    for path, marks in radar_flags.for_task(common_dir, task_id).items():
        for m in marks:
            by.setdefault((m["task"], path), []).append(m["line"])
    return [{"with": other, "path": path, "lines": spans(lines)} for (other, path), lines in sorted(by.items())]


def banner(repo, w) -> dict[str, Any] | None:
    """What the page's conflict banner of task ``w`` says, or None when it is in no conflict: ``what`` (one line),
    ``files`` (the conflict record's), ``flagged`` (the radar's lines), ``recipe`` (the CLI's lines) and ``note``
    (the text "tell the agent to rebase" sends; None when the conflict is with another task only: a rebase does
    not resolve it)."""
    record = _record(repo.bus.conn, w.task_id)
    flagged = _flagged(repo.paths.common_dir, w.task_id) if w.state in LIVE else []
    if record is None and w.state != "CONFLICTED" and not flagged:
        return None
    integration = w.integration or repo.settings.integration
    files = [f for f in (record.payload.get("files") if record else None) or [] if isinstance(f, str)]
    if record is not None and record.kind == "merge_conflict":
        what = f"merging {w.task_id} into {integration} conflicts; the task is back to WORKING"
        recipe = lifecycle.merge_conflict_steps(w.task_id, w.worktree, integration)
    elif w.state == "CONFLICTED":
        what = f"rebase conflict with {integration}; {w.task_id} is CONFLICTED"
        recipe = [f"Worktree: {w.worktree}", *lifecycle.REBASE_STEPS]
    else:
        what = "the conflict radar flags lines of " + w.task_id + " that " + \
               ", ".join(sorted({f["with"] for f in flagged})) + " also change"
        recipe = []
    with_integration = record is not None or w.state == "CONFLICTED" or any(f["with"] == integration for f in flagged)
    named = files or sorted({f["path"] for f in flagged if f["with"] == integration})
    note = None
    if with_integration:
        note = (f"Your branch conflicts with {integration}" + (f" in {', '.join(named)}" if named else "") +
                f": rebase onto {integration} and resolve the conflicts." +
                ("\n" + "\n".join(recipe) if recipe else f" (`git worker done` rebases onto {integration})"))
    return {"what": what, "integration": integration, "files": files, "flagged": flagged, "recipe": recipe,
            "note": note}


__all__ = ["RECORDS", "banner", "spans"]
