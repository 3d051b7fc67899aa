"""A line of work's changes, read from git objects (pygit2): no checkout, index or ref is touched.

Named operations for the console's review (and anything else that shows a diff):

* :meth:`Diffs.task_range`: (merge base with the integration branch, branch tip): what ``git diff
  integration...branch`` shows;
* :meth:`Diffs.files`: the changed files of a range with their counts (``git diff --numstat -M``);
* :meth:`Diffs.file`: one file's hunks, numbered as git numbers them;
* :meth:`Diffs.commits`: the commits on a branch that the integration branch does not have;
* :meth:`Diffs.commit_range`: one of those commits against its first parent;
* :meth:`Diffs.map_lines`: where lines of a file in one commit are in another (git's diff between the two,
  followed through a rename): a reviewer's earlier line comments placed on the lines of a newer tip.

Binary files and files over :data:`MAX_BYTES` are summarised as git does (``Binary files differ``, counts
unknown: ``-`` in ``--numstat``, None here): their content is never returned.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import pygit2

from ..errors import UsageError
from .objects import open_repo, ref_tip

#: a side larger than this is not diffed line by line (summarised, like a binary file)
MAX_BYTES = 1024 * 1024
#: lines of one file's diff sent at most (the rest is summarised as cut)
MAX_LINES = 20_000
#: commits of a task listed at most
MAX_COMMITS = 500
_HEX = re.compile(r"^[0-9a-f]{4,64}$")
_STATUS = {pygit2.GIT_DELTA_ADDED: "A", pygit2.GIT_DELTA_DELETED: "D", pygit2.GIT_DELTA_MODIFIED: "M",
           pygit2.GIT_DELTA_RENAMED: "R", pygit2.GIT_DELTA_COPIED: "C", pygit2.GIT_DELTA_TYPECHANGE: "T"}
#: libgit2's flag for a binary side (set on a delta once its content was looked at)
_BINARY = 1 << 0


@dataclass
class FileChange:
    path: str
    old_path: str | None
    status: str
    added: int | None
    deleted: int | None
    binary: bool = False
    too_large: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "old_path": self.old_path, "status": self.status, "added": self.added,
                "deleted": self.deleted, "binary": self.binary, "too_large": self.too_large}


@dataclass
class FileDiff:
    path: str
    old_path: str | None
    status: str
    binary: bool = False
    too_large: bool = False
    cut: bool = False  #: more than MAX_LINES lines: the rest is not sent
    hunks: list[dict[str, Any]] = field(default_factory=list)
    blob: str | None = None  #: the file's content at the range's head (None: deleted): what "viewed" marks follow

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "old_path": self.old_path, "status": self.status, "binary": self.binary,
                "too_large": self.too_large, "cut": self.cut, "hunks": self.hunks, "blob": self.blob}


class Diffs:
    """One open repository (the common git dir) for the reads of one request."""

    def __init__(self, path: str | os.PathLike[str]):
        self.repo = open_repo(path)

    # -- ranges ------------------------------------------------------------------------------------

    def tip(self, ref: str) -> str | None:
        """The commit a full ref name points at, or None."""
        return ref_tip(self.repo, ref)

    def task_range(self, head: str, integration: str) -> tuple[str, str]:
        """(merge base of ``head`` and ``integration``, ``head``); the base is ``head`` itself when unrelated."""
        base = self.repo.merge_base(pygit2.Oid(hex=head), pygit2.Oid(hex=integration))
        return (str(base) if base is not None else head), head

    def merged_base(self, head: str, integration: str, limit: int = 2000) -> str | None:
        """For ``head`` merged into ``integration``: the merge base it had when it was merged (from the
        merge commit on ``integration``'s first-parent line that brought it in), or None."""
        oid = pygit2.Oid(hex=head)
        commit = self.repo[pygit2.Oid(hex=integration)].peel(pygit2.Commit)
        for _ in range(limit):
            if len(commit.parent_ids) > 1 and oid in commit.parent_ids[1:]:
                base = self.repo.merge_base(commit.parent_ids[0], oid)
                return str(base) if base is not None else None
            if not commit.parent_ids:
                return None
            commit = commit.parents[0]
        return None

    def commit_range(self, sha: str) -> tuple[str | None, str]:
        """(first parent or None for a root commit, the commit)."""
        commit = self._commit(sha)
        return (str(commit.parent_ids[0]) if commit.parent_ids else None), str(commit.id)

    def _commit(self, sha: str) -> pygit2.Commit:
        if not isinstance(sha, str) or not _HEX.match(sha):
            raise UsageError(f"not a commit id: {sha!r}")
        try:
            return self.repo.revparse_single(sha).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            raise UsageError(f"unknown commit {sha!r}") from None

    # -- the diff ----------------------------------------------------------------------------------

    def _tree(self, sha: str | None) -> pygit2.Tree | None:
        return self.repo[sha].peel(pygit2.Tree) if sha is not None else None

    def _diff(self, base: str | None, head: str) -> pygit2.Diff:
        old, new = self._tree(base), self._tree(head)
        diff = old.diff_to_tree(new) if old is not None else new.diff_to_tree(swap=True)
        diff.find_similar()
        return diff

    def _size(self, oid: pygit2.Oid) -> int:
        if oid.raw == b"\0" * len(oid.raw):
            return 0
        try:
            return self.repo.odb.read_header(oid)[1]
        except (AttributeError, KeyError, pygit2.GitError):
            obj = self.repo.get(oid)
            return obj.size if obj is not None and hasattr(obj, "size") else 0

    def _too_large(self, delta) -> bool:
        return max(self._size(delta.old_file.id), self._size(delta.new_file.id)) > MAX_BYTES

    @staticmethod
    def _names(delta) -> tuple[str, str | None, str]:
        status = _STATUS.get(delta.status, "M")
        old = delta.old_file.path if status in ("R", "C") else None
        path = delta.old_file.path if status == "D" else delta.new_file.path
        return path, old, status

    def files(self, base: str | None, head: str) -> list[FileChange]:
        """Every changed file of the range, in git's order, with added/deleted line counts."""
        diff = self._diff(base, head)
        out: list[FileChange] = []
        for i, delta in enumerate(diff.deltas):
            path, old, status = self._names(delta)
            if self._too_large(delta):
                out.append(FileChange(path, old, status, None, None, too_large=True))
                continue
            patch = diff[i]
            if patch is None or patch.delta.is_binary:
                out.append(FileChange(path, old, status, None, None, binary=True))
                continue
            _, added, deleted = patch.line_stats
            out.append(FileChange(path, old, status, added, deleted))
        return out

    def _entry(self, tree: pygit2.Tree | None, path: str):
        try:
            return tree[path] if tree is not None else None
        except KeyError:
            return None

    def file(self, base: str | None, head: str, path: str) -> FileDiff:
        """One file's diff in the range (``path``: its new name, or its old one for a deletion or rename)."""
        old, new = self._entry(self._tree(base), path), self._entry(self._tree(head), path)
        if old is not None and new is not None and old.type_str == new.type_str == "blob":
            if old.id == new.id and old.filemode == new.filemode:
                raise UsageError(f"{path!r} is not changed in {head[:12]} (against {(base or 'nothing')[:12]})")
            fd = self._blob_diff(old, new, path)  # changed in place: no whole-tree diff
            fd.blob = str(new.id)
            return fd
        diff = self._diff(base, head)
        for i, delta in enumerate(diff.deltas):
            name, old, status = self._names(delta)
            if path not in (name, old):
                continue
            fd = FileDiff(name, old, status, blob=None if status == "D" else str(delta.new_file.id))
            if self._too_large(delta):
                fd.too_large = True
                return fd
            patch = diff[i]
            if patch is None or patch.delta.is_binary:
                fd.binary = True
                return fd
            fd.hunks, fd.cut = _hunks(patch)
            return fd
        raise UsageError(f"{path!r} is not changed in {head[:12]} (against {(base or 'nothing')[:12]})")

    def _blob_diff(self, old, new, path: str) -> FileDiff:
        fd = FileDiff(path, None, "M")
        if max(self._size(old.id), self._size(new.id)) > MAX_BYTES:
            fd.too_large = True
            return fd
        patch = self.repo[old.id].diff(self.repo[new.id], old_as_path=path, new_as_path=path)
        if patch.delta.is_binary:
            fd.binary = True
            return fd
        fd.hunks, fd.cut = _hunks(patch)
        return fd

    def map_lines(self, old: str | None, new: str, path: str,
                  lines) -> tuple[str | None, dict[int, tuple[int | None, str]]]:
        """Where each of ``lines`` of ``path`` in commit ``old`` is in commit ``new``: (the file's path in ``new``,
        ``{line: (its line there or None, how)}``), ``how`` being "same" (the same line, the same number), "moved"
        (the same line, another number), "changed" (the line was rewritten: the first line of what replaced it) or
        "gone" (deleted with nothing in its place, the file gone or binary, a commit this repository lacks)."""
        gone = {n: (None, "gone") for n in lines}
        try:
            old_tree, new_tree = self._tree(old), self._tree(new)
        except (KeyError, ValueError, pygit2.GitError):
            return None, gone
        a, target = self._entry(old_tree, path), path
        b = self._entry(new_tree, path)
        if b is None and a is not None:
            target = self._renamed(old, new, path)
            b = self._entry(new_tree, target) if target else None
        if a is None or b is None or a.type_str != "blob" or b.type_str != "blob":
            return (target if b is not None else None), gone
        if a.id == b.id:
            return target, {n: (n, "same") for n in lines}
        if max(self._size(a.id), self._size(b.id)) > MAX_BYTES:
            return target, gone
        patch = self.repo[a.id].diff(self.repo[b.id], context_lines=0)
        if patch.delta.is_binary:
            return target, gone
        spans = [(h.old_start, h.old_lines, h.new_start, h.new_lines) for h in patch.hunks]
        return target, {n: follow_line(n, spans) for n in lines}

    def _renamed(self, old: str | None, new: str, path: str) -> str | None:
        """``path`` of ``old`` renamed (or copied) in ``new``: its new name, or None."""
        for delta in self._diff(old, new).deltas:
            if delta.old_file.path == path and _STATUS.get(delta.status) in ("R", "C"):
                return delta.new_file.path
        return None

    # -- commits ------------------------------------------------------------------------------------

    def commits(self, head: str, hide: str | None) -> list[dict[str, Any]]:
        """Commits reachable from ``head`` and not from ``hide``, newest first (as `git log hide..head`)."""
        walker = self.repo.walk(pygit2.Oid(hex=head), pygit2.GIT_SORT_TOPOLOGICAL | pygit2.GIT_SORT_TIME)
        if hide:
            walker.hide(pygit2.Oid(hex=hide))
        out = []
        for commit in walker:
            if len(out) >= MAX_COMMITS:
                break
            parent = commit.parents[0].peel(pygit2.Tree) if commit.parents else None
            tree = commit.peel(pygit2.Tree)
            changed = len(parent.diff_to_tree(tree)) if parent is not None else len(tree.diff_to_tree(swap=True))
            out.append({"sha": str(commit.id), "subject": commit.message.split("\n", 1)[0],
                        "author": commit.author.name, "email": commit.author.email,
                        "time": commit.commit_time, "files": changed})
        return out

    def is_commit(self, sha: str) -> bool:
        """``sha`` names a commit this repository still holds."""
        try:
            self._commit(sha)
        except UsageError:
            return False
        return True

    def is_in(self, sha: str, head: str, hide: str | None) -> bool:
        """``sha`` names one of the commits :meth:`commits` lists."""
        full = str(self._commit(sha).id)
        return any(c["sha"] == full for c in self.commits(head, hide))


def follow_line(line: int, spans) -> tuple[int | None, str]:
    """Where old line ``line`` is after a diff whose hunks (no context) are ``spans``: ``(old_start, old_lines,
    new_start, new_lines)`` in order; see :meth:`Diffs.map_lines`. Pure."""
    shift = 0
    for old_start, old_lines, new_start, new_lines in spans:
        if old_lines == 0:  # lines inserted after old line old_start
            if line > old_start:
                shift += new_lines
                continue
            break
        if line < old_start:
            break
        if line < old_start + old_lines:  # rewritten: the line of what replaced it, if anything did
            return (new_start + min(line - old_start, new_lines - 1), "changed") if new_lines else (None, "gone")
        shift += new_lines - old_lines
    return line + shift, "same" if shift == 0 else "moved"


def _hunks(patch) -> tuple[list[dict[str, Any]], bool]:
    hunks, sent = [], 0
    for hunk in patch.hunks:
        lines = []
        for line in hunk.lines:
            if line.origin not in "+- ":
                continue  # "\ No newline at end of file" markers and file headers
            if sent >= MAX_LINES:
                hunks.append({"header": hunk.header.rstrip("\n"), "lines": lines})
                return hunks, True
            lines.append({"kind": line.origin, "old": line.old_lineno if line.old_lineno > 0 else None,
                          "new": line.new_lineno if line.new_lineno > 0 else None,
                          "text": line.content.rstrip("\n")})
            sent += 1
        hunks.append({"header": hunk.header.rstrip("\n"), "lines": lines})
    return hunks, False


__all__ = ["Diffs", "FileChange", "FileDiff", "MAX_BYTES", "MAX_COMMITS", "MAX_LINES", "follow_line"]
