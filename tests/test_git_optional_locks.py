"""git-nerve's own git commands take none of git's optional locks.

The radar looks at each task's worktree with `git status` in the background right after a commit; plain `git
status` refreshes the index's stat data and writes it under `index.lock`, so the agent's (or the person's) next
`git add` in that worktree failed with "Unable to create '.../index.lock': File exists" (seen in the suite under
load). With GIT_OPTIONAL_LOCKS=0 our look writes nothing.
"""

from __future__ import annotations

import os
import time

from conftest import git

from git_nerve.git import worktrees


def _stale_stat(repo) -> tuple[str, int]:
    """A committed file whose stat data no longer matches the index (same content): a refresh would rewrite it."""
    index = repo.work / ".git" / "index"
    f = repo.work / "stat-only.txt"
    f.write_text("same\n")
    git(repo.work, "add", "stat-only.txt")
    git(repo.work, "commit", "-q", "-m", "stat-only")
    later = time.time() + 5
    os.utime(f, (later, later))
    old = time.time() - 60
    os.utime(index, (old, old))  # the index is plainly older than the file: not racily clean
    return str(index), index.stat().st_mtime_ns


def test_our_status_leaves_the_index_alone(repo):
    index, before = _stale_stat(repo)
    assert worktrees.dirty_files(repo.work) == []
    assert os.stat(index).st_mtime_ns == before, "git-nerve's git status rewrote the index (took index.lock)"


def test_plain_git_status_would_have_written_it(repo):
    """The control: the same look without our environment does refresh (so the test above can fail)."""
    index, before = _stale_stat(repo)
    git(repo.work, "status", "--porcelain")
    assert os.stat(index).st_mtime_ns != before
