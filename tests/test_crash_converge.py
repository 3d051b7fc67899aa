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
    if callable(n):  # chosen from the points the uninterrupted run passed whose path contains the pattern, in order
        count = space.base / "hold" / f"{kind}.count"
        n = n([p for p in (count.read_text(encoding="utf-8").splitlines() if count.exists() else []) if pattern in p])
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


# -- 2. merge --all --check (--batch) killed while a temporary checkout of its own is being removed ----------------


@needs_preload
@pytest.mark.parametrize(("group", "pattern", "n"), [
    ("merge-all-check", "/.git$", 1),  # git's removal of the check checkout: its .git file about to go
    ("merge-all-check", "/gitdir$", 1),  # the check checkout's files gone, its admin dir going
    ("merge-all-batch", "/gitdir$", 1),
    ("merge-all-batch", "/nerve/tmp/check-", 3),  # part of the files gone
    ("merge-all-check-remove", "/nerve/tmp/check-", "after-.git"),  # the .git file gone, other files not yet
])
def test_merge_all_killed_while_removing_its_check_checkout_leaves_nothing_registered(tmp_path, group, pattern, n):
    """Before: the rerun exited 0 but left the check checkout registered (prunable) under nerve/tmp/, or kept it
    (git refuses to remove a worktree whose .git file is gone)."""
    if n == "after-.git":
        def n(paths):  # the removal right after the check checkout's .git file went
            return next(i for i, p in enumerate(paths) if p.endswith("/.git")) + 2
    s, ref, seen, origin_before, what = _kill_at(tmp_path, cs.GROUPS[group], "remove", n, pattern)
    assert "/nerve/tmp/check-" in what or "/worktrees/check-" in what, what  # the first removal is the check's
    _rerun_converges(s, ref, seen, origin_before)
    tmp = rs.common_dir(s.work) / "nerve" / "tmp"
    assert not [i for i in rs.worktree_list(s.work) if "/nerve/tmp/" in i["worktree"]], rs.worktree_list(s.work)
    assert not (tmp.is_dir() and list(tmp.iterdir()))
    assert not list((rs.common_dir(s.work) / "worktrees").glob("check-*"))


# -- 3. merge --all --batch 4 --check killed inside its check checkout's `git worktree add` ---------------------


@needs_preload
def test_merge_all_batch_killed_inside_its_check_checkouts_add_repairs_before_its_fetch(tmp_path):
    """Killed once git had written the check checkout's placeholder HEAD (0000...): before, the rerun's own fetch
    failed on it ("bad object worktrees/check-.../HEAD", exit 4) before any repair ran."""
    def after_head(paths):  # the point after the admin dir was written whole (its commondir last), HEAD 0000...
        return next(i for i, p in enumerate(paths) if p.endswith("/commondir")) + 2

    s, ref, seen, origin_before, what = _kill_at(tmp_path, cs.GROUPS["merge-all-batch-remote"], "create", after_head,
                                                 "/worktrees/check-")
    admin = next((rs.common_dir(s.work) / "worktrees").glob("check-*"))
    assert (admin / "HEAD").read_text(encoding="utf-8").strip() == "0" * 40, what
    assert not cs.git_ok(s.work, "fetch", "-q", "origin")[0]  # the wedge
    rerun = _rerun_converges(s, ref, seen, origin_before)
    assert "repaired: removed the unfinished worktree" in rerun.err and "nerve/tmp/check-" in rerun.err, rerun.err
    assert cs.state_of(s.work, "t2") == "COMPLETED"
