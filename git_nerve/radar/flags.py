"""The lines of one task that the radar flags against another task (or the integration branch).

Read from the radar's last result (never a recompute of the whole radar): a conflicting pair's line
ranges are numbered in the first side's file; for a task that is the pair's second side the one pair is
compared again in memory with the task first, from the inputs the cache recorded.
"""

from __future__ import annotations

import os

from ..errors import NerveError
from . import cache, scan

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: flagged lines of one file at most (a conflict over a whole generated file says enough by then)
MAX_PER_FILE = 5000


#: the last result read, per common dir: (the cache file's (mtime, size), that result, {task: flags})
_read: dict[str, tuple[tuple[int, int], scan.Scan, dict[str, dict]]] = {}


def for_task(common_dir, task_id: str) -> dict[str, list[dict[str, Any]]]:
    """``{path: [{"line": n, "task": other}]}``: lines of ``task_id``'s version of each file that
    conflict with ``other`` (a task id, or the integration branch's name). Read again only when the
    radar's cache file changed (a long-lived reader, the console, asks for every file list)."""
    try:
        st = os.stat(cache.path(common_dir))
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (0, 0)
    key = os.fspath(common_dir)
    known = _read.get(key)
    if known is None or known[0] != stamp:
        known = (stamp, scan.cached(common_dir), {})
        _read[key] = known
    flags = known[2].get(task_id)
    if flags is None:
        flags = known[2][task_id] = _compute(common_dir, known[1], task_id)
    return flags


def _compute(common_dir, result: scan.Scan, task_id: str) -> dict[str, list[dict[str, Any]]]:
    sides = None
    ov = None
    out: dict[str, list[dict[str, Any]]] = {}
    for pair in result.for_task(task_id):
        if pair.kind != "conflict":
            continue
        other = pair.b if pair.a == task_id else pair.a
        name = (result.integration or "integration") if other == cache.INTEGRATION else other
        ranges = pair.conflicts
        if pair.a != task_id:
            sides = sides if sides is not None else cache.load(common_dir)["sides"]
            mine, theirs = sides.get(task_id), sides.get(other)
            if not mine or not theirs:
                continue
            try:
                from ..git import overlap

                ov = ov or overlap.Repo(common_dir)
                onto = (sides.get(cache.INTEGRATION) or {}).get("commit")
                ranges = ov.compare_on(overlap.Side(mine["commit"], mine["tree"]),
                                       overlap.Side(theirs["commit"], theirs["tree"]), onto).conflicts
            except (NerveError, KeyError, ValueError):
                continue  # the recorded inputs are gone (a gc, a deleted snapshot): nothing to flag
        for path, spans in ranges.items():
            lines = out.setdefault(path, [])
            for first, last in spans:
                for line in range(int(first), int(last) + 1):
                    if len(lines) >= MAX_PER_FILE:
                        break
                    lines.append({"line": line, "task": name})
    return out


__all__ = ["MAX_PER_FILE", "for_task"]
