"""Issue 21 (5a, 6d): a person's branch is adopted only when asked and never deleted; a remote branch is deleted
only when git-nerve pushed it; spawns of ids differing only in case always get the collision message."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fixtures.repos import worker as wk
from fixtures.repos.build import commit_file, git
from fixtures.repos.hooks import git_run


def on_origin(origin: Path, branch: str) -> str | None:
    proc = git_run(origin, "rev-parse", "-q", "--verify", f"refs/heads/{branch}")
    return proc.stdout.strip() or None


def persons_login(work: Path) -> str:
    """The person's own branch feat/login, with a commit of theirs, pushed to origin; back on main."""
    git(work, "checkout", "-q", "-b", "feat/login")
    tip = commit_file(work, "login.txt", "the person's own work\n", "person: login")
    git(work, "push", "-q", "origin", "feat/login")
    git(work, "checkout", "-q", "main")
    return tip


def test_spawn_refuses_a_persons_branch_unless_adopt_and_never_deletes_an_adopted_one(remote_repo, gw):
    work, origin = remote_repo.work, remote_repo.origin
    tip = persons_login(work)

    refused = gw("spawn login", work)

    assert refused.code == 2, refused
    assert refused.err.count("\n") == 1 and "feat/login already exists" in refused.err and "--adopt" in refused.err
    assert wk.row(work, "login") is None and len(wk.worktree_paths(work)) == 1

    adopted = gw("spawn login --adopt", work)
    assert adopted.code == 0, adopted
    assert "adopted" in adopted.out
    wt = wk.worktree(work, "login")
    assert git(wt, "rev-parse", "HEAD") == tip and wk.row(work, "login").adopted == 1
    assert gw("start", wt).code == 0
    commit_file(wt, "more.txt", "the agent's work\n", "agent: more")
    assert gw("done", wt).code == 0  # pushes feat/login: still the person's branch

    res = gw("cancel login --cleanup", work)

    assert res.code == 0, res
    assert "kept branch feat/login (adopted: it existed before the task)" in res.out
    assert git(work, "rev-parse", "feat/login") == git(origin, "rev-parse", "feat/login")
    assert on_origin(origin, "feat/login") is not None
    assert git(work, "merge-base", "--is-ancestor", tip, "feat/login") == ""  # the person's commit is on it

    # retry works on the same branch again (its own earlier branch, not refused), still adopted
    assert gw("retry login", work).code == 0
    assert wk.row(work, "login").adopted == 1 and Path(wk.worktree(work, "login")).is_dir()


def test_merge_delete_branch_keeps_an_adopted_branch_here_and_on_the_remote(remote_repo, gw):
    work, origin = remote_repo.work, remote_repo.origin
    persons_login(work)
    assert gw("spawn login --adopt", work).code == 0
    wt = wk.worktree(work, "login")
    assert gw("start", wt).code == 0
    commit_file(wt, "more.txt", "the agent's work\n", "agent: more")
    assert gw("done", wt).code == 0
    assert gw("approve login", work).code == 0

    res = gw("merge login --delete-branch", work)

    assert res.code == 0, res
    assert "kept branch feat/login (adopted: it existed before the task)" in res.out
    assert "Branch deleted" not in res.out
    assert "refs/heads/feat/login" in wk.branches(work) and on_origin(origin, "feat/login") is not None


def test_a_branch_only_the_remote_has_is_refused_then_adopted_from_its_tip(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    other = wk.second_clone(origin, tmp_path / "other")
    git(other, "checkout", "-q", "-b", "feat/login")
    tip = commit_file(other, "login.txt", "pushed from another clone\n", "person: login")
    git(other, "push", "-q", "origin", "feat/login")

    refused = gw("spawn login", work)
    assert refused.code == 2 and "feat/login already exists on origin" in refused.err, refused

    assert gw("spawn login --adopt", work).code == 0
    assert git(wk.worktree(work, "login"), "rev-parse", "HEAD") == tip
    assert gw("cancel login --cleanup", work).code == 0
    assert on_origin(origin, "feat/login") == tip


def test_a_remote_branch_git_nerve_did_not_push_is_kept_while_its_own_local_branch_goes(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    assert gw("spawn t1", work).code == 0
    other = wk.second_clone(origin, tmp_path / "other")
    theirs = commit_file(other, "x.txt", "someone else's\n", "someone: x")
    git(other, "push", "-q", "origin", "HEAD:refs/heads/feat/t1")  # appears on origin after the spawn
    git(work, "fetch", "-q", "origin")

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert "refs/heads/feat/t1" not in wk.branches(work)  # git-nerve made it here
    assert "kept branch feat/t1 on origin (git-nerve did not push it there)" in res.out
    assert on_origin(origin, "feat/t1") == theirs


def test_a_branch_done_pushed_is_deleted_here_and_on_the_remote(remote_repo, gw):
    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "IN_REVIEW")
    assert on_origin(origin, "feat/t1") == git(wt, "rev-parse", "HEAD")
    assert wk.row(work, "t1").pushed == 1

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert "Branch deleted" in res.out and "kept" not in res.out
    assert "refs/heads/feat/t1" not in wk.branches(work) and on_origin(origin, "feat/t1") is None
    # retry brings its own branch back from the archive (not taken for a person's), and it is still git-nerve's
    assert gw("retry t1", work).code == 0
    assert wk.row(work, "t1").adopted == 0
    assert gw("cancel t1 --cleanup", work).code == 0
    assert "refs/heads/feat/t1" not in wk.branches(work)


def test_a_task_from_before_the_record_keeps_its_branch(repo, gw):
    """A row migrated from an older bus (adopted NULL): git-nerve cannot tell whose the branch is, so it keeps it."""
    from test_ownership_record import from_an_older_bus

    work = repo.work
    assert gw("spawn t1", work).code == 0
    from_an_older_bus(work, adopted=None)

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert "kept branch feat/t1 (spawned by an older git-nerve" in res.out
    assert "refs/heads/feat/t1" in wk.branches(work)


def test_a_killed_spawn_is_finished_without_adopt_and_a_case_colliding_id_is_refused_meanwhile(repo, sh):
    work = repo.work
    killed = sh(["git", "worker", "spawn", "s1"], work, env={**os.environ, "NERVE_FAULT": "spawn.after-worktree"})
    assert killed.code in (-9, 137), killed  # (git runs git-worker and reports its death)
    assert "refs/heads/feat/s1" in wk.branches(work)  # made by the killed spawn, no row yet

    other = sh(["git", "worker", "spawn", "S1"], work)
    assert other.code == 2, other
    assert "collides with task 's1'" in other.err and "git worker spawn s1" in other.err
    assert "fatal" not in other.err and "refs/heads/feat/S1" not in wk.branches(work)

    again = sh(["git", "worker", "spawn", "s1"], work)  # its own branch: no --adopt needed
    assert again.code == 0, again
    assert wk.row(work, "s1").adopted == 0
    collide = sh(["git", "worker", "spawn", "S1"], work)
    assert collide.code == 2 and "collides with existing task 's1'" in collide.err, collide


def test_racing_spawns_of_case_colliding_ids_give_the_collision_message(repo):
    work = repo.work
    wk.spawn(work, "warmup")
    for i, (first, second) in enumerate([("s", "S"), ("S", "s"), ("s", "S"), ("S", "s")]):
        ids = [f"{first}{i}", f"{second}{i}"]
        procs = [subprocess.Popen(["git", "worker", "spawn", t], cwd=work, text=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for t in ids]
        results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 2], results
        loser = next(err for code, _, err in results if code == 2)
        assert "collides with" in loser and "case-insensitive" in loser, results
        assert "fatal" not in loser and len(loser.strip().splitlines()) == 1, results
        assert len([b for b in wk.branches(work) if b.lower() == f"refs/heads/feat/s{i}"]) == 1
