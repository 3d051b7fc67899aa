"""Issue 35 point 8: the kills the random-kill sweeps found that did not converge, each reproduced with a real
SIGKILL of the whole process group at the named instant (the harness's hold points: crash_support.start_held;
inside git's own file work through the preloaded tests/crash_hold.c), then one rerun, then every crash
invariant (crash_support.check). And what the repairs must never remove (a person's worktree, a live add)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import crash_support as cs
import pytest
import reliability_support as rs

from fixtures.repos import build

GW = "git-worker"

needs_preload = pytest.mark.skipif(cs.preload_library() is None,
                                   reason="the file hold points need a C compiler and LD_PRELOAD (Linux)")


def _kill_at(tmp_path: Path, group: cs.Group, kind: str, n: int, pattern: str):
    """A fresh copy of ``group``'s starting state; its command SIGKILLed (whole group) at the ``n``-th ``kind`` hold
    point whose path contains ``pattern``. Returns (scenario, reference, commits seen, origin's, what was reached)."""
    space = cs.Workspace(tmp_path / "crash")
    ref = cs.reference(space, group)
    s = space.fresh_group(group)
    seen = cs.reachable(s.work) | cs.recorded_commits(s.work)
    origin_before = cs.reachable(s.origin) if s.origin else set()
    hold = cs.fresh_hold(space.base)
    with rs.fixed_dates():
        child, reached = cs.start_held(list(group.argv), s.cwd(group.where), dict(os.environ), hold, kind, n, pattern)
        what = (hold / "reached").read_text(encoding="utf-8").strip() if reached else ""
        cs.kill_group(child, hold)
    assert reached, f"{group.name} never reached {kind} point {n} of {pattern!r}: nothing tested"
    seen |= cs.reachable_kept(s.work) | cs.recorded_commits(s.work)
    if s.origin:
        origin_before |= cs.reachable(s.origin)
    return s, ref, seen, origin_before, what


def _rerun_converges(s, ref, seen, origin_before) -> rs.Proc:
    with rs.fixed_dates():
        rerun = rs.run(list(ref.group.argv), s.cwd(ref.group.where))
    problems = cs.check(s, ref, rerun, seen, origin_before)
    assert not problems, "\n".join(problems)
    return rerun


# -- 1. retry killed inside its `git worktree add`, the worktree's .git file created and still empty ------------


@needs_preload
def test_retry_killed_as_git_created_the_worktrees_gitfile_is_finished_by_a_rerun(tmp_path):
    """Before: every rerun exited 4 with git's "invalid gitfile format", the entry stayed locked "initializing"."""
    s, ref, seen, origin_before, what = _kill_at(tmp_path, cs.GROUPS["retry"], "create", 1, "/t1/.git")
    dotgit = s.wt / ".git"
    assert what.endswith("/t1/.git") and dotgit.is_file() and dotgit.stat().st_size == 0, what
    admin = rs.common_dir(s.work) / "worktrees" / "t1"
    assert (admin / "locked").read_text(encoding="utf-8").strip() == "initializing"
    rerun = _rerun_converges(s, ref, seen, origin_before)
    assert "repaired: removed the unfinished worktree" in rerun.err, rerun.err
    assert "invalid gitfile" not in rerun.err + rerun.out
    assert cs.state_of(s.work) == "ASSIGNED"
    assert build.git(s.wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"
