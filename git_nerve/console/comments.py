"""A reviewer's earlier line comments, placed on the lines of the diff the page shows now (issue 38).

`request changes` from the page records its line comments with the review (``changes_requested``'s
``comments``: path, line, side, and ``at``, the commit whose version of the file the line is numbered in). After
the agent's next round each is mapped from that commit to the one the diff shows now (the new tip for a comment on
a line of the change, the diff's base for one on a removed line) by git's diff between the two
(:meth:`..git.diffs.Diffs.map_lines`): on the same line it stays as it was; moved or rewritten, it is shown on
the line it maps to, marked outdated; a line gone (or a file or commit that cannot be read) puts it at the file's
top, outdated.
"""

from __future__ import annotations

from typing import Any

from .. import clock
from ..bus import messages
from ..git.diffs import Diffs

#: what the page says under an outdated comment, by how its line moved
WHY = {"moved": "the line moved (it was line {was})", "changed": "the line changed since",
       "gone": "its line is gone (it was line {was})"}


def recorded(conn, task_id: str) -> list[dict[str, Any]]:
    """Every line comment request-changes recorded for ``task_id``, oldest first, each with its review's tip,
    reviewer and time."""
    out = []
    for m in messages.for_task(conn, task_id, kinds=("changes_requested",)):
        tip = m.payload.get("tip")
        for c in m.payload.get("comments") or []:
            if not (isinstance(c, dict) and isinstance(c.get("path"), str) and isinstance(c.get("line"), int)
                    and isinstance(c.get("text"), str)):
                continue
            side = "old" if c.get("side") == "old" else "new"
            at = c.get("at") if isinstance(c.get("at"), str) else (tip if side == "new" else None)
            out.append({"path": c["path"], "line": c["line"], "side": side, "at": at, "text": c["text"],
                        "review_tip": tip, "by": m.payload.get("by"), "ts": clock.iso(m.ts)})
    return out


def placed(diffs: Diffs, comments: list[dict[str, Any]], path: str, old_path: str | None, base: str | None,
           head: str) -> list[dict[str, Any]]:
    """Those of ``comments`` on this file (``path``, once ``old_path``), as the page shows them on the diff
    ``base..head``: ``line`` where it is now (None: at the file's top), ``made_on`` the line it was made on,
    ``outdated`` and ``why``."""
    names = {path, old_path} - {None}
    groups: dict[tuple[str, str, str | None], list[dict[str, Any]]] = {}
    for c in comments:
        groups.setdefault((c["path"], c["side"], c["at"]), []).append(c)
    out = []
    for (was_path, side, at), group in groups.items():
        to = head if side == "new" else base
        if at is None or to is None:
            target, where = None, {c["line"]: (None, "gone") for c in group}
        else:
            target, where = diffs.map_lines(at, to, was_path, {c["line"] for c in group})
        if not (target in names or (target is None and was_path in names)):
            continue
        for c in group:
            line, how = where[c["line"]]
            out.append({**c, "line": line, "made_on": c["line"], "outdated": how != "same",
                        "why": WHY[how].format(was=c["line"]) if how in WHY else None})
    return out


__all__ = ["WHY", "placed", "recorded"]
