"""In-memory overlap of two lines of work (pygit2): would they conflict, where, and on which lines.

Each side is a commit (its branch tip) and a tree (the tip's, or a snapshot
of the worktree's uncommitted changes on top of it). No checkout, index or
ref is touched. Files both sides changed that merge cleanly are an
*overlap*; files that do not are a *conflict*, with the line ranges (in the
first side's version of the file) of each conflicting hunk.

A side's *own change* is its tree against its merge base with the
integration tip (:meth:`Repo.replay`: that change replayed on the tip, as
``git merge-tree --write-tree TIP SIDE`` would write it, conflict blocks
included). :meth:`Repo.compare` merges a side with the integration branch
(what landed since its base); :meth:`Repo.compare_on` merges two sides'
replays against the tip: what came from the integration branch is nobody's
change, and a side with no change of its own conflicts with nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pygit2

from .objects import open_repo, ref_tip


@dataclass(frozen=True)
class Side:
    commit: str  #: the branch tip
    tree: str  #: what to compare: the tip's tree, or a snapshot of the worktree on top of it


@dataclass
class Overlap:
    kind: str  #: "clean" (no file in common), "overlap" (same files, merges cleanly) or "conflict"
    files: list[str] = field(default_factory=list)  #: the files both sides changed
    conflicts: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  #: file -> [(first, last) line], side a

    def as_dict(self) -> dict:
        return {"kind": self.kind, "files": self.files, "conflicts": {k: [list(r) for r in v] for k, v in self.conflicts.items()}}


class Repo:
    """One open repository for many comparisons (opening it is the expensive part)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.repo = open_repo(path)
        self._changed: dict[tuple[str, str], frozenset[str]] = {}
        self._bases: dict[tuple[str, str], str | None] = {}
        self._replays: dict[tuple[str, str, str], tuple[str, bool]] = {}

    def tip(self, ref: str) -> str | None:
        """The commit ``ref`` (a full ref name) points at, read in process (no git child per worker)."""
        return ref_tip(self.repo, ref)

    def tree_of(self, commit: str) -> str:
        return str(self.repo[commit].peel(pygit2.Tree).id)

    def base(self, a: str, b: str) -> str | None:
        """The merge base of two commits (None: unrelated histories), remembered."""
        if (a, b) not in self._bases:
            found = self.repo.merge_base(pygit2.Oid(hex=a), pygit2.Oid(hex=b))
            self._bases[(a, b)] = str(found) if found is not None else None
        return self._bases[(a, b)]

    def _base_tree(self, a: str, b: str) -> pygit2.Tree | None:
        base = self.base(a, b)
        return self.repo[base].peel(pygit2.Tree) if base is not None else None

    def _tree(self, oid: str | None) -> pygit2.Tree:
        return self.repo[oid].peel(pygit2.Tree) if oid is not None else self.repo[self.repo.TreeBuilder().write()]

    def replay(self, side: Side, onto: str) -> tuple[str, bool]:
        """``side``'s own change (its tree against its merge base with the commit ``onto``) replayed on ``onto``'s
        tree: (that tree, did the replay conflict). A conflicting file holds its conflict block, as
        ``git merge-tree --write-tree`` writes it. A side based on ``onto`` is its own tree; one with no change of
        its own is ``onto``'s."""
        key = (side.commit, side.tree, onto)
        hit = self._replays.get(key)
        if hit is None:
            hit = self._replays[key] = self._replay(side, onto)
        return hit

    def _replay(self, side: Side, onto: str) -> tuple[str, bool]:
        base = self.base(side.commit, onto)
        if base == onto:
            return side.tree, False
        ancestor = self._tree(base)
        if not self.changed(ancestor, side.tree):
            return self.tree_of(onto), False
        index = self.repo.merge_trees(ancestor, self._tree(onto), self._tree(side.tree))
        if index.conflicts is None:
            return str(index.write_tree(self.repo)), False
        for anc, our, their in list(index.conflicts):
            entry = our or their or anc
            data = self._merged_file(anc, our, their)
            del index.conflicts[entry.path]
            if data is not None:
                index.add(pygit2.IndexEntry(entry.path, self.repo.create_blob(data), (our or their).mode))
        return str(index.write_tree(self.repo)), True

    def _merged_file(self, anc, our, their) -> bytes | None:
        """A conflicting file as the replay keeps it: the merge with its conflict blocks; the side still there of a
        change against a deletion; None when both deleted it."""
        if our is None or their is None:
            kept = our or their
            return self.repo[kept.id].data if kept is not None else None
        try:
            merged = self.repo.merge_file_from_index(anc, our, their)
        except (pygit2.GitError, ValueError):
            return self.repo[our.id].data
        text = getattr(merged, "contents", merged)
        return text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)

    def changed(self, base: pygit2.Tree | None, tree: str) -> frozenset[str]:
        key = (str(base.id) if base is not None else "", tree)
        hit = self._changed.get(key)
        if hit is None:
            new = self.repo[tree].peel(pygit2.Tree)
            diff = base.diff_to_tree(new) if base is not None else new.diff_to_tree(swap=True)
            hit = frozenset(p for d in diff.deltas for p in {d.old_file.path, d.new_file.path})
            self._changed[key] = hit
        return hit

    def compare(self, a: Side, b: Side) -> Overlap:
        base = self._base_tree(a.commit, b.commit)
        both = self.changed(base, a.tree) & self.changed(base, b.tree)
        if not both:
            return Overlap("clean")
        ours = self.repo[a.tree].peel(pygit2.Tree)
        theirs = self.repo[b.tree].peel(pygit2.Tree)
        ancestor = base if base is not None else self.repo[self.repo.TreeBuilder().write()]
        index = self.repo.merge_trees(ancestor, ours, theirs)
        files = sorted(both)
        if index.conflicts is None:
            return Overlap("overlap", files)
        conflicts: dict[str, list[tuple[int, int]]] = {}
        for anc, our, their in index.conflicts:
            path = (our or their or anc).path
            conflicts[path] = self._hunks(anc, our, their)
        return Overlap("conflict", sorted(set(files) | set(conflicts)), conflicts)

    def compare_on(self, a: Side, b: Side, onto: str | None) -> Overlap:
        """Two tasks: their own changes, each replayed on the integration tip ``onto``, merged against that tip.
        Line ranges are numbered in ``a``'s own file. Without an integration tip: :meth:`compare`."""
        if onto is None:
            return self.compare(a, b)
        ours, theirs = self.replay(a, onto)[0], self.replay(b, onto)[0]
        tip = self._tree(self.tree_of(onto))
        both = self.changed(tip, ours) & self.changed(tip, theirs)
        if not both:
            return Overlap("clean")
        index = self.repo.merge_trees(tip, self._tree(ours), self._tree(theirs))
        files = sorted(both)
        if index.conflicts is None:
            return Overlap("overlap", files)
        conflicts: dict[str, list[tuple[int, int]]] = {}
        mine = self._tree(a.tree)
        for anc, our, their in index.conflicts:
            path = (our or their or anc).path
            conflicts[path] = self._hunks(anc, our, their)
            if conflicts[path] and ours != a.tree:
                conflicts[path] = self._renumber(conflicts[path], our, mine, path)
        return Overlap("conflict", sorted(set(files) | set(conflicts)), conflicts)

    def _renumber(self, ranges, our, mine: pygit2.Tree, path: str) -> list[tuple[int, int]]:
        """Ranges numbered in the replayed file, numbered again in the side's own version of it."""
        try:
            own = mine[path]
        except KeyError:
            return ranges
        if own.id == our.id:
            return ranges
        patch = pygit2.Patch.create_from(self.repo[our.id], self.repo[own.id], context_lines=0)
        return [(map_line(patch.hunks, first), map_line(patch.hunks, last)) for first, last in ranges]

    def _hunks(self, anc, our, their) -> list[tuple[int, int]]:
        """Line ranges of the conflicting hunks, numbered as in side a's file ([] for a binary/add-delete conflict)."""
        if our is None or their is None:
            return []
        try:
            merged = self.repo.merge_file_from_index(anc, our, their)
        except (pygit2.GitError, ValueError):
            return []
        return conflict_ranges(getattr(merged, "contents", merged))  # a MergeFileResult since pygit2 1.15, else str


def map_line(hunks, line: int) -> int:
    """Line ``line`` of a diff's old file, numbered in its new file (a line the diff changed: the hunk's first)."""
    shift = 0
    for h in hunks:
        if line < h.old_start or (h.old_lines == 0 and line == h.old_start):
            break
        if line < h.old_start + h.old_lines:
            return max(1, h.new_start)
        shift += h.new_lines - h.old_lines
    return max(1, line + shift)


#: hunks kept of one file in a footprint (more are folded into one span from the first to the last)
MAX_HUNKS = 64
#: a span covering the whole file (a binary file, a file added or deleted)
WHOLE = [0, 2**31 - 1]


def footprint(repo: Repo, commit: str, tree: str, against: str | None) -> dict:
    """What a line of work changed, for a machine that cannot see its commits (shared mode, issue 24):
    ``{"base": the merge base of commit and against, "files": {path: {"blob": the base's blob or None,
    "spans": [[start, end], ...] half-open in the base's lines, "lines": [[first, last], ...] in tree's}}}``.
    An insertion is an empty span where it goes; a binary, added or deleted file spans the whole file."""
    base = None
    if against:
        found = repo.repo.merge_base(pygit2.Oid(hex=commit), pygit2.Oid(hex=against))
        base = str(found) if found is not None else None
    base_tree = repo.repo[base].peel(pygit2.Tree) if base else None
    new = repo.repo[tree].peel(pygit2.Tree)
    diff = (base_tree.diff_to_tree(new, context_lines=0) if base_tree is not None
            else new.diff_to_tree(swap=True, context_lines=0))
    files: dict[str, dict] = {}
    for patch in diff:
        d = patch.delta
        whole = d.is_binary or d.status in (pygit2.GIT_DELTA_ADDED, pygit2.GIT_DELTA_DELETED)
        spans, lines = [], []
        for h in ([] if whole else patch.hunks):
            start = h.old_start - 1 if h.old_lines else h.old_start
            spans.append([start, start + h.old_lines])
            lines.append([max(1, h.new_start), max(1, h.new_start + h.new_lines - 1)])
        if whole or not spans:
            spans, lines = [list(WHOLE)], [[1, 1]]
        elif len(spans) > MAX_HUNKS:
            spans, lines = [[spans[0][0], spans[-1][1]]], [[lines[0][0], lines[-1][1]]]
        old = d.old_file
        blob = str(old.id) if base_tree is not None and d.status != pygit2.GIT_DELTA_ADDED else None
        for path in {old.path, d.new_file.path}:
            files[path] = {"blob": blob, "spans": spans, "lines": lines}
    return {"base": base, "files": files}


def compare_footprints(mine: dict, theirs: dict) -> Overlap:
    """:meth:`Repo.compare` from two footprints: the files both changed; a conflict where their spans in the
    same base version of a file meet or touch (as git's merge, adjacent changes conflict), with ``mine``'s line
    ranges; files whose bases differ are an overlap (their lines cannot be compared)."""
    both = sorted(set(mine["files"]) & set(theirs["files"]))
    if not both:
        return Overlap("clean")
    conflicts: dict[str, list[tuple[int, int]]] = {}
    for path in both:
        a, b = mine["files"][path], theirs["files"][path]
        if a["blob"] != b["blob"]:
            continue
        hit = [tuple(lines) for (s1, e1), lines in zip(a["spans"], a["lines"])
               if any(s1 <= e2 and s2 <= e1 for s2, e2 in b["spans"])]
        if hit:
            conflicts[path] = [] if a["spans"] == [WHOLE] else hit
    return Overlap("conflict", both, conflicts) if conflicts else Overlap("overlap", both)


#: (state, the marker a line starts with) -> the state after it, reading a merged file's conflict sections
_MARKERS = {("out", "<<<<<<<"): "ours", ("ours", "|||||||"): "base", ("ours", "======="): "theirs",
            ("base", "======="): "theirs", ("theirs", ">>>>>>>"): "out"}


def conflict_ranges(merged: str) -> list[tuple[int, int]]:
    """The ``<<<<<<<`` .. ``=======`` sections of ``merged`` as (first, last) line numbers of side a's file."""
    ranges: list[tuple[int, int]] = []
    line = 0  # lines of side a seen so far
    state = "out"
    start = 0
    for text in merged.splitlines():
        after = _MARKERS.get((state, text[:7]))
        if after is None:
            line += state in ("out", "ours")  # side a's own lines: outside the sections, and its side of one
            continue
        if after == "ours":
            start = line + 1
        elif after == "out":
            ranges.append((start, max(start, line)))
        state = after
    return ranges


__all__ = ["Overlap", "Repo", "Side", "compare_footprints", "conflict_ranges", "footprint", "map_line"]
