"""Issue 35 point 8: the kills the random-kill sweeps found that did not converge, each reproduced with a real
SIGKILL of the whole process group at the named instant (the harness's hold points: crash_support.start_held;
inside git's own file work through the preloaded tests/crash_hold.c), then one rerun, then every crash
invariant (crash_support.check). And what the repairs must never remove (a person's worktree, a live add)."""

from __future__ import annotations

import contextlib
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
    s, ref, seen, origin_before, what = _kill_at(tmp_path, cs.GROUPS["retry"], "create", 1, "/t1/.git$")
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


# -- what the repairs must never remove ----------------------------------------------------------------------------


def _persons_killed_add(s, path: Path, tmp_path: Path) -> Path:
    """A person's own `git worktree add <path>` (no git-nerve command: no token) SIGKILLed as git created its .git
    file: locked "initializing", the .git file empty. Returns its admin dir."""
    hold = tmp_path / "person-hold"
    hold.mkdir()
    child, reached = cs.start_held(["git", "worktree", "add", "-q", "--detach", str(path), "HEAD"], s.work,
                                   dict(os.environ), hold, "create", 1, f"/{path.name}/.git$")
    cs.kill_group(child, hold)
    assert reached and (path / ".git").is_file() and (path / ".git").stat().st_size == 0
    admin = rs.common_dir(s.work) / "worktrees" / path.name
    assert (admin / "locked").read_text(encoding="utf-8").strip() == "initializing"
    return admin


@needs_preload
def test_a_persons_half_written_worktree_beside_ours_is_kept_and_the_advice_works(tmp_path):
    """Our killed add of t1 is removed; a person's killed add at a similar path (t10, under the same root, its
    .git file empty too) is kept with a `kept:` line, and what that line says to do works."""
    s, ref, seen, origin_before, _ = _kill_at(tmp_path, cs.GROUPS["retry"], "create", 1, "/t1/.git$")
    theirs = s.wt.parent / "t10"
    admin = _persons_killed_add(s, theirs, tmp_path)
    with rs.fixed_dates():
        rerun = rs.run(list(ref.group.argv), s.work)
    assert "repaired: removed the unfinished worktree" in rerun.err and "/t1 " in rerun.err, rerun.err
    kept = [ln for ln in rerun.err.splitlines() if ln.startswith(f"kept: {admin}:")]
    assert kept and "remove that directory" in kept[0], rerun.err
    assert admin.is_dir() and (theirs / ".git").is_file()  # nothing of the person's removed
    import shutil

    shutil.rmtree(admin)  # what the line says
    with rs.fixed_dates():
        again = rs.run(list(ref.group.argv), s.work)
    assert again.code == 0, again.err
    assert theirs.is_dir() and cs.state_of(s.work) == "ASSIGNED"
    assert build.git(s.wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"


@contextlib.contextmanager
def _held(tmp_path, name: str, kind: str, n: int, pattern: str):
    """Group ``name``'s command, on a fresh copy of its group, held (alive) at its ``n``-th ``kind`` of a path matching
    ``pattern``: (the group's state, the hold directory); released at the block's end, the command must then finish."""
    group = cs.GROUPS[name]
    space = cs.Workspace(tmp_path / "crash")
    s = space.fresh_group(group)
    hold = cs.fresh_hold(space.base)
    child, reached = cs.start_held(list(group.argv), s.work, dict(os.environ), hold, kind, n, pattern)
    try:
        assert reached
        yield s, hold
    finally:
        (hold / "release").write_text("", encoding="utf-8")
    assert child.wait(timeout=120) == 0


@needs_preload
def test_an_add_whose_command_lives_is_never_repaired_by_another_command(tmp_path):
    """retry held (alive) inside its add, the .git file still empty: a spawn meanwhile repairs nothing of it;
    released, the retry finishes."""
    with _held(tmp_path, "retry", "create", 1, "/t1/.git$") as (s, hold):
        admin = rs.common_dir(s.work) / "worktrees" / "t1"
        other = rs.run([GW, "spawn", "t2", "-d", "meanwhile"], s.work)
        assert "t1" not in "".join(ln for ln in other.err.splitlines() if ln.startswith("repaired:")), other.err
        assert (s.wt / ".git").is_file() and (admin / "locked").is_file()
    assert cs.state_of(s.work) == "ASSIGNED"
    assert build.git(s.wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"


@needs_preload
def test_a_persons_prunable_worktree_at_a_similar_path_keeps_its_registration(tmp_path):
    """Only the killed check checkout's registration is dropped (never a global prune): a person's worktree of the
    same name elsewhere, deleted by hand (prunable), stays registered."""
    s, ref, seen, origin_before, what = _kill_at(tmp_path, cs.GROUPS["merge-all-check-remove"], "remove", 1,
                                                 "/gitdir$")
    name = what.split("/worktrees/", 1)[1].split("/", 1)[0]  # check-<pid>-<n>
    theirs = s.root / name
    build.git(s.work, "worktree", "add", "-q", "--detach", str(theirs), "HEAD")
    import shutil

    shutil.rmtree(theirs)  # the person deleted it by hand (an unplugged disk): git's entry is theirs to prune
    _rerun_converges_but(s, ref, seen, origin_before, allowed=str(theirs))
    assert any(i["worktree"] == str(theirs) for i in rs.worktree_list(s.work)), rs.worktree_list(s.work)
    assert not [i for i in rs.worktree_list(s.work) if "/nerve/tmp/" in i["worktree"]]


def _rerun_converges_but(s, ref, seen, origin_before, *, allowed: str) -> None:
    """As :func:`_rerun_converges`, the person's own prunable entry ``allowed`` aside."""
    with rs.fixed_dates():
        rerun = rs.run(list(ref.group.argv), s.cwd(ref.group.where))
    problems = [p for p in cs.check(s, ref, rerun, seen, origin_before) if allowed not in p]
    assert not problems, "\n".join(problems)


@needs_preload
def test_a_check_checkout_whose_removal_lives_is_never_touched_by_another_command(tmp_path):
    """merge --all --check held (alive) inside git's removal of its check checkout: a spawn meanwhile writes back
    no .git file and drops no registration; released, the merge finishes and leaves nothing registered."""
    with _held(tmp_path, "merge-all-check-remove", "remove", 2, "/nerve/tmp/check-") as (s, hold):
        what = (hold / "reached").read_text(encoding="utf-8").split(" ", 1)[1].strip()
        checkout = Path(what.split("/nerve/tmp/", 1)[0]) / "nerve" / "tmp" / what.split("/nerve/tmp/", 1)[1].split("/")[0]
        before = sorted(p.name for p in checkout.iterdir())
        other = rs.run([GW, "spawn", "t3", "-d", "meanwhile"], s.work)
        assert "temporary checkout" not in other.err, other.err
        assert sorted(p.name for p in checkout.iterdir()) == before
    assert cs.state_of(s.work) == "COMPLETED" and cs.state_of(s.work, "t2") == "COMPLETED"
    assert not [i for i in rs.worktree_list(s.work) if "/nerve/tmp/" in i["worktree"]]
