"""`git worker spawn`: where the branch and worktree go, what they start from, idempotency,
rollback of a failed spawn, and concurrent spawns."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def default_wt(work: Path, task_id: str) -> Path:
    return work.parent / f"{work.name}.worktrees" / task_id


def test_spawn_creates_branch_worktree_context_and_row(repo, gw):
    res = gw(["spawn", "t1", "--description", "Fix the auth bug"], repo.work)
    assert res.code == 0, res
    wt = default_wt(repo.work, "t1")
    assert "Created worker: t1" in res.out and str(wt) in res.out and "ASSIGNED" in res.out
    assert git(wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"
    assert git(wt, "rev-parse", "HEAD") == git(repo.work, "rev-parse", "main")
    assert (wt / "src" / "app.py").is_file()
    # the context lives under the worktree's own git dir: nothing of ours in `git status`
    ctx_file = Path(git(wt, "rev-parse", "--path-format=absolute", "--git-dir")) / "nerve" / ".worker-ctx.json"
    ctx = json.loads(ctx_file.read_text())
    assert ctx["task_id"] == "t1" and ctx["branch"] == "feat/t1" and ctx["worktree"] == str(wt)
    assert ctx["description"] == "Fix the auth bug" and ISO.match(ctx["created_at"])
    assert git(wt, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(repo.work, "status", "--porcelain", "--untracked-files=all") == ""
    # no upstream tracking written to .git/config (its lock breaks concurrent spawns)
    assert git(repo.work, "config", "--get", "branch.feat/t1.merge", check=False) == ""
    w = wk.row(repo.work, "t1")
    assert (w.state, w.branch, w.worktree, w.base, w.integration) == ("ASSIGNED", "feat/t1", str(wt), "refs/heads/main", "main")
    assert wk.kinds(repo.work, "t1") == ["task_assign"]


def test_spawn_json_is_the_status_object(repo, gw):
    res = gw("spawn t1 --json -d desc", repo.work)
    assert res.code == 0, res
    obj = json.loads(res.out)
    for key in ("task_id", "state", "branch", "worktree", "base", "description", "assigned_at", "state_changed_at",
                "last_heartbeat", "stale"):
        assert key in obj
    assert obj["task_id"] == "t1" and obj["state"] == "ASSIGNED" and obj["branch"] == "feat/t1"
    assert Path(obj["worktree"]).is_absolute() and obj["worktree"] == str(default_wt(repo.work, "t1"))
    assert obj["base"] == "refs/heads/main" and obj["description"] == "desc"
    assert ISO.match(obj["assigned_at"]) and ISO.match(obj["state_changed_at"])
    assert obj["last_heartbeat"] is None and obj["stale"] is False


def test_spawn_twice_returns_the_existing_worker(repo, gw):
    first = gw("spawn t1 --json", repo.work)
    second = gw("spawn t1 --json", repo.work)
    assert second.code == 0, second
    assert json.loads(second.out) == json.loads(first.out)
    again = gw("spawn t1", repo.work)
    assert again.code == 0 and "Exists worker: t1" in again.out
    assert wk.kinds(repo.work, "t1") == ["task_assign"]
    assert len(wk.worktree_paths(repo.work)) == 2


def test_spawn_recreates_a_worktree_that_was_removed(repo, gw):
    wt = wk.spawn(repo.work, "t1")
    build.commit_file(wt, "work.txt", "kept\n")
    git(repo.work, "worktree", "remove", str(wt))
    res = gw("spawn t1", repo.work)
    assert res.code == 0, res
    assert (wt / "work.txt").read_text() == "kept\n"
    assert git(wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"
    assert gw("start", wt).code == 0  # the context file was written again


def test_spawn_from_a_subdirectory_and_from_another_worktree_uses_the_same_layout(repo, gw):
    assert gw("spawn t1", repo.work / "src").code == 0
    wt1 = default_wt(repo.work, "t1")
    assert wt1.is_dir()
    assert gw("spawn t2", wt1 / "src").code == 0  # not nested inside t1's worktree
    assert default_wt(repo.work, "t2").is_dir()
    assert not (wt1 / "project.worktrees").exists() and not (wt1.parent / "t1.worktrees").exists()
    assert wk.row(repo.work, "t2").base == "refs/heads/main"


@pytest.mark.parametrize("setting,expected", [("agents", "project/agents/t1"), ("ABS", "elsewhere/t1")])
def test_nerve_worktree_dir(repo, gw, tmp_path, setting, expected):
    value = str(tmp_path / "elsewhere") if setting == "ABS" else setting
    git(repo.work, "config", "nerve.worktreeDir", value)
    res = gw("spawn t1 --json", repo.work)
    assert res.code == 0, res
    wt = Path(json.loads(res.out)["worktree"])
    assert wt == tmp_path / expected and wt.is_dir()


def test_nerve_branch_prefix(repo, gw):
    git(repo.work, "config", "nerve.branchPrefix", "agent/")
    assert gw("spawn t1", repo.work).code == 0
    git(repo.work, "config", "nerve.branchPrefix", "")
    assert gw("spawn t2", repo.work).code == 0
    assert wk.branches(repo.work) == {"refs/heads/main", "refs/heads/agent/t1", "refs/heads/t2"}


def test_a_bad_branch_prefix_is_refused_before_anything_is_created(repo, gw):
    git(repo.work, "config", "nerve.branchPrefix", "bad..prefix/")
    res = gw("spawn t1", repo.work)
    assert res.code == 2 and "not a valid branch name" in res.err
    assert wk.branches(repo.work) == {"refs/heads/main"} and wk.row(repo.work, "t1") is None


# -- what spawn starts from --------------------------------------------------------------------


def test_default_base_is_nerve_integration_when_set(repo, gw):
    git(repo.work, "branch", "dev")
    build.commit_file(repo.work, "main-only.txt", "x\n")
    git(repo.work, "config", "nerve.integration", "dev")
    assert gw("spawn t1", repo.work).code == 0
    w = wk.row(repo.work, "t1")
    assert (w.base, w.integration) == ("refs/heads/dev", "dev")
    assert git(repo.work, "rev-parse", "feat/t1") == git(repo.work, "rev-parse", "dev")


def test_default_base_without_a_remote_is_the_main_checkouts_branch(repo, gw):
    git(repo.work, "checkout", "-q", "-b", "topic")
    build.commit_file(repo.work, "topic.txt", "x\n")
    assert gw("spawn t1", repo.work).code == 0
    assert wk.row(repo.work, "t1").base == "refs/heads/topic"
    assert git(repo.work, "rev-parse", "feat/t1") == git(repo.work, "rev-parse", "topic")


def test_default_base_with_a_remote_is_its_default_branch_fetched_first(remote_repo, gw, tmp_path):
    work = remote_repo.work
    git(work, "checkout", "-q", "-b", "local-topic")  # the current branch does not matter with a remote
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    moved = wk.push_from(other, "theirs.txt", "from the other clone\n")
    res = gw("spawn t1 --json", work)
    assert res.code == 0, res
    assert json.loads(res.out)["base"] == "refs/remotes/origin/main"
    assert git(work, "rev-parse", "feat/t1") == moved  # fetched before branching
    assert git(work, "rev-parse", "refs/remotes/origin/main") == moved


def test_remote_default_branch_other_than_main(tmp_path, gw):
    seed = build.simple(tmp_path / "seed")
    git(seed.work, "branch", "trunk")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed.work), str(origin))
    git(origin, "symbolic-ref", "HEAD", "refs/heads/trunk")
    work = tmp_path / "project"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    git(work, "checkout", "-q", "main")
    assert gw("spawn t1", work).code == 0
    w = wk.row(work, "t1")
    assert (w.base, w.integration) == ("refs/remotes/origin/trunk", "trunk")


def test_no_fetch_branches_from_what_is_already_known(remote_repo, gw, tmp_path):
    work = remote_repo.work
    old = git(work, "rev-parse", "origin/main")
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    wk.push_from(other, "theirs.txt", "x\n")
    assert gw("spawn t1 --no-fetch", work).code == 0
    assert git(work, "rev-parse", "feat/t1") == old
    assert git(work, "rev-parse", "origin/main") == old


def test_from_a_remote_tracking_ref_fetches_it(remote_repo, gw, tmp_path):
    work = remote_repo.work
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    git(other, "checkout", "-q", "-b", "feature")
    sha = build.commit_file(other, "f.txt", "f\n")
    git(other, "push", "-q", "origin", "feature")
    git(work, "fetch", "-q", "origin")
    moved = build.commit_file(other, "g.txt", "g\n")
    git(other, "push", "-q", "origin", "feature")
    assert gw("spawn t1 --from origin/feature --json", work).code == 0
    assert git(work, "rev-parse", "feat/t1") == moved != sha
    assert wk.row(work, "t1").base == "refs/remotes/origin/feature"


def test_from_a_local_branch_does_not_fetch(remote_repo, gw, tmp_path):
    work = remote_repo.work
    known = git(work, "rev-parse", "origin/main")
    other = wk.second_clone(remote_repo.origin, tmp_path / "other")
    wk.push_from(other, "theirs.txt", "x\n")
    git(work, "branch", "base-branch")
    assert gw("spawn t1 --from base-branch", work).code == 0
    assert git(work, "rev-parse", "origin/main") == known  # no fetch happened
    assert wk.row(work, "t1").base == "refs/heads/base-branch"


def test_from_a_sha_and_from_nothing(repo, gw):
    first = git(repo.work, "rev-parse", "HEAD")
    build.commit_file(repo.work, "later.txt", "x\n")
    assert gw(["spawn", "t1", "--from", first[:10]], repo.work).code == 0
    assert git(repo.work, "rev-parse", "feat/t1") == first
    res = gw("spawn t2 --from no-such-ref", repo.work)
    assert res.code == 2 and "does not name a commit" in res.err
    assert wk.row(repo.work, "t2") is None and "refs/heads/feat/t2" not in wk.branches(repo.work)


def test_spawn_in_a_repository_without_commits_is_a_clear_error(tmp_path, gw):
    work = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    res = gw("spawn t1", work)
    assert res.code == 4 and "no commits yet" in res.err
    assert len(res.err.strip().splitlines()) == 1


# -- rollback ----------------------------------------------------------------------------------


def assert_nothing_left(work: Path, task_id: str) -> None:
    assert f"refs/heads/feat/{task_id}" not in wk.branches(work)
    assert len(wk.worktree_paths(work)) == 1
    assert wk.row(work, task_id) is None
    common = Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    assert not (common / "worktrees" / task_id).exists()


def test_non_empty_directory_at_the_worktree_path_is_refused(repo, gw):
    target = default_wt(repo.work, "t1")
    target.mkdir(parents=True)
    (target / "precious.txt").write_text("mine\n")
    res = gw("spawn t1", repo.work)
    assert res.code == 2 and "already exists" in res.err, res
    assert (target / "precious.txt").read_text() == "mine\n"
    assert_nothing_left(repo.work, "t1")


def test_a_file_at_the_worktree_path_is_refused(repo, gw):
    target = default_wt(repo.work, "t1")
    target.parent.mkdir(parents=True)
    target.write_text("a file\n")
    res = gw("spawn t1", repo.work)
    assert res.code == 2 and "already exists" in res.err, res
    assert target.read_text() == "a file\n"
    assert_nothing_left(repo.work, "t1")


def test_a_failing_worktree_add_is_rolled_back(repo, gw):
    # git creates the branch and the worktree, then its post-checkout hook fails the command
    hooks = repo.work / ".git" / "test-hooks"
    hooks.mkdir()
    hook = hooks / "post-checkout"
    hook.write_text("#!/bin/sh\necho refusing >&2\nexit 1\n")
    hook.chmod(0o755)
    git(repo.work, "config", "core.hooksPath", str(hooks))
    res = gw("spawn t1", repo.work)
    assert res.code == 4, res
    assert not default_wt(repo.work, "t1").exists()
    assert_nothing_left(repo.work, "t1")
    git(repo.work, "config", "--unset", "core.hooksPath")
    assert gw("spawn t1", repo.work).code == 0  # and a later spawn works


def test_a_bus_failure_after_the_worktree_was_made_is_rolled_back(repo, gw, monkeypatch):
    from git_nerve.bus import workers

    wk.spawn(repo.work, "t0")  # creates the bus

    def broken_insert(conn, w):
        raise __import__("sqlite3").OperationalError("disk I/O error")

    monkeypatch.setattr(workers, "insert", broken_insert)
    res = gw("spawn t1", repo.work)
    assert res.code == 5 and "disk I/O error" in res.err, res
    assert not default_wt(repo.work, "t1").exists()
    assert "refs/heads/feat/t1" not in wk.branches(repo.work)
    assert wk.row(repo.work, "t1") is None and wk.kinds(repo.work, "t1") == []


def test_an_existing_branch_of_the_task_is_adopted_only_with_adopt_and_not_deleted_on_failure(repo, gw, monkeypatch):
    # (before issue 21 spawn adopted it silently; now only --adopt does)
    from git_nerve.bus import workers

    git(repo.work, "branch", "feat/t1")
    build.commit_file(repo.work, "x.txt", "x\n")
    tip = git(repo.work, "rev-parse", "feat/t1")
    wk.spawn(repo.work, "t0")
    refused = gw("spawn t1", repo.work)
    assert refused.code == 2 and "feat/t1 already exists" in refused.err and "--adopt" in refused.err, refused
    assert wk.row(repo.work, "t1") is None
    with monkeypatch.context() as failing:  # not monkeypatch.undo(): that would undo the hermetic environment too
        failing.setattr(workers, "insert",
                        lambda conn, w: (_ for _ in ()).throw(__import__("sqlite3").OperationalError("boom")))
        assert gw("spawn t1 --adopt", repo.work).code == 5
    assert git(repo.work, "rev-parse", "feat/t1") == tip  # not ours to delete
    assert gw("spawn t1 --adopt", repo.work).code == 0
    assert git(wk.worktree(repo.work, "t1"), "rev-parse", "HEAD") == tip


# -- concurrency ------------------------------------------------------------------------------


def test_concurrent_spawns_all_succeed(repo, sh):
    wk.spawn(repo.work, "warmup")  # the bus exists; the race is over git's locks and the rows
    env = dict(os.environ)
    procs = [
        subprocess.Popen(["git", "worker", "spawn", f"c{i}"], cwd=repo.work, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(8)
    ]
    results = [(p.wait(timeout=120), p.stdout.read(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert all(code == 0 for code, _, _ in results), results
    for i in range(8):
        wt = default_wt(repo.work, f"c{i}")
        assert git(wt, "symbolic-ref", "HEAD") == f"refs/heads/feat/c{i}"
        assert wk.state(repo.work, f"c{i}") == "ASSIGNED"
    assert len(wk.worktree_paths(repo.work)) == 10


def test_concurrent_spawns_of_one_task_make_one_worker(repo):
    env = dict(os.environ)
    procs = [subprocess.Popen(["git", "worker", "spawn", "same"], cwd=repo.work, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    codes = [p.wait(timeout=120) for p in procs]
    errs = [p.stderr.read() for p in procs]
    for p in procs:
        p.stderr.close()
    assert codes == [0, 0, 0, 0], errs
    assert wk.kinds(repo.work, "same") == ["task_assign"]
    assert len(wk.worktree_paths(repo.work)) == 2


def test_an_integration_branch_that_does_not_exist_is_a_clear_error(repo, gw):
    git(repo.work, "config", "nerve.integration", "nowhere")
    res = gw("spawn t1", repo.work)
    assert res.code == 4 and "integration branch 'nowhere' does not exist" in res.err
    assert wk.branches(repo.work) == {"refs/heads/main"}
