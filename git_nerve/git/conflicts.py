"""Conflicts a push would carry: leftover conflict blocks, and merges that would conflict.

* :func:`has_conflict_block` (pure) and :func:`conflict_blocks` (the git
  binary: ``rev-list``, ``diff-tree``, ``cat-file --batch``) find files that
  a pushed commit adds or changes while they still hold a conflict block.
  Standard library only.
* :func:`would_conflict` merges two commits in memory (pygit2, loaded only
  when called; no checkout, no ref moves) and names the conflicting files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import cli

_OPEN = b"<<<<<<< "
_MID = b"======="
_CLOSE = b">>>>>>> "
_HEX = re.compile(rb"^[0-9a-f]{40}([0-9a-f]{24})?$")
#: blob modes worth reading (regular and executable files; not symlinks or submodules)
_FILE_MODES = (b"100644", b"100755")
#: git's own test for binary content: a NUL in the first 8000 bytes
_BINARY_PROBE = 8000


def has_conflict_block(data: bytes) -> bool:
    """True when ``data`` holds a line starting ``<<<<<<< ``, later a line
    ``=======`` and later a line starting ``>>>>>>> `` (a lone ``=======``, as
    under a reStructuredText heading, is not a conflict block)."""
    if _OPEN not in data:
        return False
    stage = 0
    for line in data.splitlines():
        if stage == 0:
            if line.startswith(_OPEN):
                stage = 1
        elif stage == 1:
            if line.rstrip() == _MID:
                stage = 2
        elif line.startswith(_CLOSE):
            return True
    return False


@dataclass(frozen=True)
class MarkedFile:
    path: str
    commit: str  #: a pushed commit that adds or changes the file with the block in it


def pushed_commits(cwd, tips: Sequence[str], exclude: Iterable[str], *, inherit_location: bool = False) -> list[str]:
    """Commits reachable from ``tips`` but from none of ``exclude`` (refs or shas; unknown ones
    are ignored), oldest first."""
    if not tips:
        return []
    args = ["rev-list", "--reverse", "--ignore-missing", *tips, "--not", *exclude]
    out = cli.out(args, cwd=cwd, inherit_location=inherit_location)
    return out.split() if out else []


def conflict_blocks(cwd, commits: Sequence[str], *, inherit_location: bool = False) -> list[MarkedFile]:
    """Files that one of ``commits`` adds or changes (merges: against their first
    parent) and that hold a conflict block in that commit. Each file is named once,
    with the first of ``commits`` that put a block in it."""
    if not commits:
        return []
    proc = cli.run(
        ["diff-tree", "--stdin", "-r", "-z", "--no-renames", "--root", "--diff-filter=AM", "--diff-merges=first-parent"],
        cwd=cwd, input=("\n".join(commits) + "\n").encode(), text=False, inherit_location=inherit_location,
    )
    wanted: dict[bytes, list[tuple[str, str]]] = {}  # blob -> [(path, commit)]
    fields = proc.stdout.split(b"\0")
    commit = ""
    i = 0
    while i < len(fields):
        item = fields[i]
        if item.startswith(b":") and i + 1 < len(fields):
            meta = item[1:].split(b" ")
            path = fields[i + 1].decode("utf-8", "surrogateescape")
            if len(meta) >= 4 and meta[1] in _FILE_MODES:
                wanted.setdefault(meta[3], []).append((path, commit))
            i += 2
            continue
        if _HEX.match(item):
            commit = item.decode()
        i += 1
    if not wanted:
        return []
    marked: dict[str, MarkedFile] = {}
    for blob, data in _read_blobs(cwd, list(wanted), inherit_location=inherit_location):
        if b"\0" in data[:_BINARY_PROBE] or not has_conflict_block(data):
            continue
        for path, in_commit in wanted[blob]:
            marked.setdefault(path, MarkedFile(path, in_commit))
    return sorted(marked.values(), key=lambda m: m.path)


def _read_blobs(cwd, blobs: list[bytes], *, inherit_location: bool) -> Iterable[tuple[bytes, bytes]]:
    proc = cli.run(["cat-file", "--batch"], cwd=cwd, input=b"\n".join(blobs) + b"\n", text=False,
                   inherit_location=inherit_location)
    out = proc.stdout
    pos = 0
    for blob in blobs:
        end = out.index(b"\n", pos)
        header = out[pos:end].split(b" ")
        pos = end + 1
        if len(header) != 3 or header[1] != b"blob":  # "<sha> missing" and the like
            continue
        size = int(header[2])
        yield blob, out[pos:pos + size]
        pos += size + 1


def would_conflict(repo_path: str | os.PathLike[str], ours: str, theirs: str) -> list[str]:
    """Files that would conflict if ``theirs`` were merged into ``ours`` (in memory, pygit2)."""
    from .objects import merge_conflicts

    return merge_conflicts(repo_path, ours, theirs)
