"""Many agents at once: N processes against one repository (hooks installed),
each driving its own task from spawn to merge with real commits and
heartbeats while racing to approve, send back and start the others' tasks.

CI runs NERVE_STRESS_PROCS processes (default 6; half as many against a
remote, where every done and merge pushes); ``bench/reliability`` runs 64.
"""

from __future__ import annotations

import os

import pytest
import reliability_support as rs

from fixtures.repos import build

PROCS = int(os.environ.get("NERVE_STRESS_PROCS", "6"))


@pytest.mark.slow
@pytest.mark.parametrize("remote", [False, True], ids=["local", "with-origin"])
def test_racing_agents_all_finish_and_the_log_replays_to_the_table(tmp_path, remote):
    work = (build.with_origin(tmp_path) if remote else build.simple(tmp_path)).work
    procs = PROCS if not remote else max(2, PROCS // 2)
    report = rs.run_stress(work, procs, races=3, seed=7)
    assert not report.problems, "\n".join(report.problems[:40])
    assert report.tasks == report.completed == procs
    assert report.races == 3 * procs
    # every task went spawn -> start -> done -> approve -> merge at least
    assert report.transitions >= 5 * procs
    assert report.lost_writes == 0
    hooks = rs.common_dir(work) / "hooks"
    assert (hooks / "post-commit").exists(), "spawn installs the hooks the commits ran through"
    commit_records = [m for m in rs.all_messages(work) if m.kind == "commit"]
    assert commit_records, "the post-commit hook recorded commits on the bus"


def test_changes_requested_while_a_merge_is_checked_publishes_nothing(repo, gw):
    """The review verdict can change while `merge --check` runs; the merge must not land then."""
    from fixtures.repos import worker as wfx

    wfx.drive(repo.work, "t1", "APPROVED")
    main_before = rs.git(repo.work, "rev-parse", "main")
    check = "git worker request-changes t1 --comment 'found a bug during the check'"
    res = gw(["merge", "t1", "--check", check], repo.work)
    assert res.code == 3, res
    assert "nothing was merged" in res.err and "Traceback" not in res.err
    assert rs.git(repo.work, "rev-parse", "main") == main_before
    assert wfx.state(repo.work, "t1") == "WORKING"
    assert not rs.replay_problems(repo.work)


def test_request_changes_waits_for_a_merge_that_is_publishing(repo):
    """While a merge holds the task's lock (publishing), a request-changes waits, then finds it COMPLETED."""
    import subprocess

    from fixtures.repos import worker as wfx
    from git_nerve.locks import hold
    from git_nerve.worker import transitions
    from git_nerve.worker.states import State

    wfx.drive(repo.work, "t1", "APPROVED")
    lock = rs.common_dir(repo.work) / "nerve" / "locks" / "task-t1.lock"
    with hold(lock):
        child = subprocess.Popen(["git", "worker", "request-changes", "t1"], cwd=repo.work, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=1.5)
        with wfx.opened(repo.work) as r:  # the merge records COMPLETED while request-changes waits
            transitions.transition(r.bus, "t1", State.COMPLETED, allowed_from=[State.APPROVED], verb="merge")
    out, err = child.communicate(timeout=30)
    assert child.returncode == 3, (out, err)
    assert err.startswith("error: cannot request changes for t1: it is COMPLETED"), err


def test_listing_worktrees_while_others_add_and_remove_them(repo):
    """`git worktree list` fails now and then while another git adds a worktree (its admin
    directory is half-written for a moment); merge and spawn list worktrees all the time."""
    import subprocess

    from git_nerve.git import worktrees

    script = ('for i in $(seq 1 30); do git worktree add -q "../wt-$1-$i" -b "b-$1-$i" 2>/dev/null; '
              'git worktree remove --force "../wt-$1-$i"; done')
    adders = [subprocess.Popen(["sh", "-c", script, "sh", str(k)], cwd=repo.work) for k in range(4)]
    calls = 0
    try:
        while any(p.poll() is None for p in adders):
            assert worktrees.list_all(repo.work)[0].path == repo.work
            calls += 1
    finally:
        for p in adders:
            p.wait()
    assert calls > 20
