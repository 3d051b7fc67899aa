"""Where to look: the files `git nerve knowledge query` ranks first for a task's description.

`git nerve thread` (and the MCP ``thread`` tool) end a task's view with one line naming them, so an agent
that pulls its thread also learns where the code it is asked about lives. The ranking is the knowledge
index's own: this module calls :func:`git_nerve.knowledge.query.search` (the one narrow entry point from
thread into knowledge, named in pyproject.toml's independence contract), so the first file named is the one
`git nerve knowledge query "<description>"` and the MCP ``knowledge_query`` tool rank first.

No index, an index never synced or unreadable, a description with no words: no hints, never an error
(the thread is the point of the command; the hints are a courtesy).
"""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

from ..errors import NerveError
from ..paths import RepoPaths, discover, find_by_files

#: Files named in the hint line.
FILES = 3
#: Chunks asked of the index to find that many distinct files.
CHUNKS = 20
#: Characters of the description used as the query.
QUERY_CHARS = 2000


class Hint(namedtuple("Hint", "path start_line end_line score")):
    """One file to look at: its best chunk's lines and score in the knowledge index."""

    __slots__ = ()

    def as_dict(self) -> dict:
        return {"path": self.path, "start_line": self.start_line, "end_line": self.end_line, "score": round(self.score, 6)}

    def where(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


def where_to_look(text: str, worktree: str | os.PathLike[str] | None, fallback: RepoPaths | None = None) -> tuple[Hint, ...]:
    """The first :data:`FILES` distinct files the index of ``worktree`` (else ``fallback``) ranks for ``text``."""
    text = (text or "").strip()[:QUERY_CHARS]
    if not text:
        return ()
    paths = _paths(worktree, fallback)
    if paths is None or not (Path(paths.common_dir) / "nerve" / "knowledge.db").is_file():
        return ()  # no index here: nothing to load, nothing to say
    from ..knowledge import query as kquery

    try:
        result = kquery.search(paths, text, CHUNKS, wait=False)  # a view still being made costs the hint, not a wait
    except Exception:  # noqa: BLE001 - a busy or damaged index costs the hint, never the thread
        return ()
    hints: dict[str, Hint] = {}
    for h in result.hits:
        if h.path not in hints:
            hints[h.path] = Hint(h.path, h.start_line, h.end_line, h.score)
        if len(hints) == FILES:
            break
    return tuple(hints.values())


def _paths(worktree: str | os.PathLike[str] | None, fallback: RepoPaths | None) -> RepoPaths | None:
    if worktree and Path(worktree).is_dir():
        found = find_by_files(worktree)  # from git's files: no git process on `git nerve thread`'s path
        if found is not None:
            return found
        try:
            return discover(worktree, inherit_location=False)
        except NerveError:
            pass
    return fallback


def render(hints: tuple[Hint, ...]) -> str:
    """The hint line (fixed wording, like the omitted-rounds line); empty without hints."""
    if not hints:
        return ""
    return f"... where to look: {', '.join(h.where() for h in hints)} (git nerve knowledge query on the task's description) ..."
