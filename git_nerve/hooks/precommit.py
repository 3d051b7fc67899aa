"""pre-commit: in a task's worktree that git-nerve copied ignored files into (`.worktreeinclude`), refuse a
commit that adds one of those files, or adds a line holding a value of a copied ``.env``-style file, with
one line naming the file (never the value). The check itself is :func:`git_nerve.worktree_prep.secrets.check`
against the salted hashes the copy recorded; this module reads the commit's staged changes.

Standard library only. A failure of ours is a warning and lets the commit through (the hooks fail open).
"""

from __future__ import annotations

import sys

from ..bus import Bus
from ..bus import prep as busprep
from ..context import read as read_context
from ..errors import ExitCode
from ..git import staged
from ..text import clean

REFUSED = int(ExitCode.CHECK_FAILED)


def staged_additions() -> tuple[list[str], list[tuple[str, str]]]:
    """(files the commit adds, (file, line) of every line it adds), from git's staged diff."""
    added = staged.added_paths()
    return added, staged.added_lines()


def pre_commit(where) -> int:
    try:
        ctx = read_context(where.git_dir)
    except Exception:  # noqa: BLE001 - not a task's worktree we can read: nothing to guard
        return 0
    if ctx is None:
        return 0
    try:
        bus = Bus(where.common_dir / "nerve" / "bus.db", create=False, busy_timeout=5, retries=1)
        try:
            row = busprep.get(bus.conn, ctx.task_id)
            if row is None or not row.copied_paths:
                return 0
            from ..worktree_prep.secrets import check, redactor

            values = redactor(bus.conn, ctx.task_id, where.toplevel, env={})  # read back from the worktree: fast
        finally:
            bus.close()
        added, lines = staged_additions()
        reason = check(added, lines, row.copied_paths, values)
    except Exception as exc:  # noqa: BLE001 - fail open, in one line
        sys.stderr.write(clean(f"warning: git-nerve pre-commit: copied files not checked: {type(exc).__name__}: {exc}") + "\n")
        return 0
    if reason:
        sys.stderr.write(clean(f"git-nerve: commit {reason}") + "\n")
        return REFUSED
    return 0
