"""The kills of issue 13 and issue 17 (items 6-9), each reproduced on a real repository and rerun once.

Kills inside a git child are made deterministic with a smudge filter that blocks on a flag file:
git's checkout (of `worktree add`, `reset --keep`, `rebase`) stops inside the filter, the whole
process group is SIGKILLed there, the flag is removed, the command runs again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import crash_support as cs
import pytest
import reliability_support as rs

from fixtures.repos import build
from fixtures.repos import worker as wfx
from waiting import wait_until

GW = "git-worker"


def slow_checkout(work: Path, flag: Path, pattern: str = "*.py") -> None:
    """Files matching ``pattern`` go through a smudge filter that waits while ``flag`` exists."""
    script = work.parent / "slow-smudge.sh"
    script.write_text(f"#!/bin/sh\nif [ -e '{flag}' ]; then : > '{flag}.reached'; fi\n"
                      f"while [ -e '{flag}' ]; do sleep 0.05; done\nexec cat\n", encoding="utf-8")
    script.chmod(0o755)
    build.git(work, "config", "filter.slow.smudge", str(script))
    build.git(work, "config", "filter.slow.clean", "cat")
    info = Path(build.git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(f"{pattern} filter=slow\n", encoding="utf-8")


def kill_inside_filter(argv: list[str], cwd: Path, flag: Path, *, timeout: float = 30) -> None:
    """Run ``argv`` in its own process group; SIGKILL the group once git sits in the smudge filter (the filter
    creates ``<flag>.reached`` when it starts waiting: no ``/proc`` needed)."""
    reached = Path(f"{flag}.reached")
    reached.unlink(missing_ok=True)
    flag.write_text("")
    child = subprocess.Popen(argv, cwd=cwd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(reached.exists, timeout, what="git to reach the smudge filter", interval=0.01, alive=child)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        flag.unlink(missing_ok=True)


def run(argv, cwd):
    return rs.run(list(argv), cwd)


def init(work: Path) -> None:
    res = run(["git-nerve", "init"], work)
    assert res.code == 0, res.err
    build.git(work, "add", "nerve.toml")
    build.git(work, "commit", "-q", "-m", "nerve.toml")


def invariants(work: Path, *, origin: bool = False) -> None:
    problems = rs.orphan_problems(work) + rs.fsck_problems(work)
    ok, err = cs.git_ok(work, "worktree", "list")
    assert ok, err
    if origin:
        ok, err = cs.git_ok(work, "fetch", "-q", "origin")
        assert ok, err
    for item in rs.worktree_list(work):
        assert "locked" not in item, item
        p = Path(item["worktree"])
        if p.is_dir() and not cs.in_progress(p):
            assert rs.git(p, "status", "--porcelain") == "", (p, rs.git(p, "status", "--porcelain"))
    assert not problems, problems


def ctx_of(wt: Path) -> dict:
    git_dir = Path(rs.git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))
    return json.loads((git_dir / "nerve" / ".worker-ctx.json").read_text(encoding="utf-8"))


# -- issue 13 ------------------------------------------------------------------------------------------


def test_a_worktree_add_killed_before_head_no_longer_wedges_fetch_and_spawn_repairs_it(remote_repo):
    """13.1: admin dir 'locked initializing' with HEAD 0000...: every fetch failed; the rerun repairs it."""
    work = remote_repo.work
    init(work)
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    wt.parent.mkdir(parents=True, exist_ok=True)
    from git_nerve.git import ownership

    # what spawn records before it runs `git worktree add` (record-then-create): only then is it provably ours
    ownership.record(work / ".git", "worktree", str(wt), task="t1")
    # a git-nerve command killed while its `git worktree add` ran: its liveness token (dead) recorded the add
    cs.killed_token(work, ["worktree", "add", "--quiet", "--no-track", "-b", "feat/t1", str(wt), "origin/main"])
    ownership.mark_spawning(work / ".git", "t1", "feat/t1", adopted=False)  # what spawn records before its git work
    build.git(work, "worktree", "add", "-q", "--no-track", "-b", "feat/t1", str(wt), "origin/main")
    admin = Path(build.git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))
    # what git leaves when killed between writing the admin dir and HEAD
    (admin / "locked").write_text("initializing", encoding="utf-8")
    (admin / "HEAD").write_text("0" * 40 + "\n", encoding="utf-8")
    (admin / "index").unlink()
    assert not cs.git_ok(work, "fetch", "-q", "origin")[0]  # the wedge the issue describes
    res = run([GW, "spawn", "t1", "-d", "after the kill"], work)
    assert res.code == 0, res.err
    assert any(ln.startswith("repaired: ") and "worktree add" in ln for ln in res.err.splitlines()), res.err
    assert build.git(wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"
    assert (wt / "src" / "app.py").is_file() and ctx_of(wt)["task_id"] == "t1"
    invariants(work, origin=True)


def test_spawn_killed_inside_the_checkout_of_worktree_add_is_recreated_not_adopted(repo, tmp_path):
    """13.2: killed while git checks files out; the rerun must not adopt a worktree whose index deletes everything."""
    flag = tmp_path / "block"
    slow_checkout(repo.work, flag)
    kill_inside_filter([GW, "spawn", "t1"], repo.work, flag)
    wt = repo.work.parent / f"{repo.work.name}.worktrees" / "t1"
    res = run([GW, "spawn", "t1"], repo.work)
    assert res.code == 0, res.err
    assert (wt / "src" / "app.py").read_text(encoding="utf-8") == build.git(repo.work, "show", "main:src/app.py") + "\n"
    assert rs.git(wt, "status", "--porcelain") == ""
    assert ctx_of(wt)["task_id"] == "t1"
    assert run([GW, "start"], wt).code == 0
    invariants(repo.work)


def test_retry_killed_after_the_worktree_before_its_context_is_finished_by_a_rerun(repo):
    """13.3: the rerun of retry (and of spawn) verifies the worktree and writes the missing context file."""
    wfx.drive(repo.work, "t1", "WORKING")
    assert run([GW, "cancel", "t1", "--cleanup"], repo.work).code == 0
    assert run([GW, "retry", "t1"], repo.work).code == 0
    wt = wfx.worktree(repo.work, "t1")
    git_dir = Path(rs.git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))
    (git_dir / "nerve" / ".worker-ctx.json").unlink()  # where the kill left it
    for argv in ([GW, "retry", "t1"], [GW, "spawn", "t1"]):
        res = run(argv, repo.work)
        assert res.code == 0, res.err
        assert ctx_of(wt)["task_id"] == "t1"
        (git_dir / "nerve" / ".worker-ctx.json").unlink()
    assert run([GW, "spawn", "t1"], repo.work).code == 0
    assert run([GW, "start"], wt).code == 0
    invariants(repo.work)


# -- issue 17, items 6-9 ----------------------------------------------------------------------------------


def _working_behind(work: Path) -> Path:
    wt = wfx.drive(work, "t1", "WORKING")
    build.commit_file(wt, "t1.txt", "work of t1\n", "t1: work")
    build.commit_file(work, "src/new.py", "x = 1\n", "main: new.py")  # the rebase brings a new *.py file
    return wt


def test_done_killed_inside_its_reset_keep_is_finished_by_a_rerun(repo, tmp_path):
    """17.6: no stale index.lock to remove by hand, no stray untracked file blocking every later done."""
    wt = _working_behind(repo.work)
    flag = tmp_path / "block"
    slow_checkout(repo.work, flag)
    kill_inside_filter([GW, "done"], wt, flag)
    res = run([GW, "done"], wt)
    assert res.code == 0, res.err
    assert wfx.state(repo.work, "t1") == "IN_REVIEW"
    assert build.git(wt, "rev-parse", "HEAD") == build.git(repo.work, "rev-parse", "feat/t1")
    assert build.git(repo.work, "merge-base", "--is-ancestor", "main", "feat/t1") == ""
    invariants(repo.work)


def test_done_killed_after_gits_rebase_started_reruns_to_the_real_outcome(repo, tmp_path):
    """17.7: the rerun does not stop on 'a rebase is in progress' nor on a stale git-rebase-todo.lock."""
    wt = wfx.drive(repo.work, "t1", "WORKING")
    build.commit_file(wt, wfx.APP, wfx.app_text("hi from t1"), "t1: greeting")
    build.commit_file(wt, "t1.txt", "work\n", "t1: more")
    build.commit_file(repo.work, wfx.APP, wfx.app_text("hi from main"), "main: greeting")
    build.commit_file(repo.work, "src/new.py", "x = 1\n", "main: new.py")
    flag = tmp_path / "block"
    slow_checkout(repo.work, flag)
    kill_inside_filter([GW, "done"], wt, flag)
    assert cs.in_progress(wt)  # the killed rebase is still there
    assert wfx.state(repo.work, "t1") == "WORKING"
    res = run([GW, "done"], wt)
    # the real outcome: git's rebase stops on the real conflict, the task is CONFLICTED
    assert res.code == 6, res.err
    assert "repaired: " in res.err and "rebase conflict" in res.err, res.err
    assert wfx.state(repo.work, "t1") == "CONFLICTED"
    assert wfx.APP in build.git(wt, "diff", "--name-only", "--diff-filter=U")
    # and the agent's usual way out works
    wt.joinpath(wfx.APP).write_text(wfx.app_text("hi from both"), encoding="utf-8")
    build.git(wt, "add", wfx.APP)
    env = {**os.environ, "GIT_EDITOR": "true"}
    assert subprocess.run(["git", "rebase", "--continue"], cwd=wt, env=env, capture_output=True).returncode == 0
    assert run([GW, "done", "--skip-rebase"], wt).code == 0
    invariants(repo.work)


def test_cancel_cleanup_killed_mid_removal_is_finished_by_a_rerun(repo):
    """17.8: the files the killed removal deleted are not 'uncommitted changes'."""
    wt = wfx.drive(repo.work, "t1", "WORKING")
    build.commit_file(wt, "t1.txt", "work of t1\n", "t1: work")
    tip = build.git(wt, "rev-parse", "HEAD")
    many = [f"f{i}.txt" for i in range(2000)]
    for name in many:
        (wt / name).write_text(name, encoding="utf-8")
    build.git(wt, "add", "-A")
    build.git(wt, "commit", "-q", "-m", "t1: many files")
    tip = build.git(wt, "rev-parse", "HEAD")
    child = subprocess.Popen([GW, "cancel", "t1", "--cleanup"], cwd=repo.work, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: wt.is_dir() and not all((wt / n).exists() for n in many[::200]), 30, interval=0.001,
               alive=child, fail=False)  # the removal under way (or over: see below)
    if child.poll() is None:  # on a loaded machine the removal may have finished first: the rerun must still hold
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    res = run([GW, "cancel", "t1", "--cleanup"], repo.work)
    assert res.code == 0, res.err
    assert not wt.exists()
    assert build.git(repo.work, "rev-parse", "refs/nerve/archive/t1") == tip
    assert wfx.state(repo.work, "t1") == "FAILED"
    invariants(repo.work)


def test_merge_all_killed_after_completed_finishes_the_cleanup_when_run_again(repo):
    """17.9: rerunning `merge --all` removes the worktree the killed run left."""
    wt = wfx.drive(repo.work, "t1", "APPROVED")
    killed = rs.run([GW, "merge", "--all"], repo.work, env={**os.environ, "NERVE_FAULT": "merge.after-transition"})
    assert killed.code == -signal.SIGKILL
    assert wfx.state(repo.work, "t1") == "COMPLETED" and wt.is_dir()
    res = run([GW, "merge", "--all"], repo.work)
    assert res.code == 0, res.err
    assert not wt.exists()
    assert "cleanup" in wfx.kinds(repo.work, "t1")
    invariants(repo.work)


# -- a full disk, a read-only .git ---------------------------------------------------------------------------


def _tmpfs(path: Path, size: str = "2m") -> bool:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True).returncode == 0


def test_spawn_on_a_full_disk_is_one_clear_line_and_leaves_nothing_half_written(tmp_path):
    import pytest

    mnt = tmp_path / "small"
    if not _tmpfs(mnt):
        pytest.skip("cannot mount a 2 MiB tmpfs here (needs root and mount(8)); a full disk is not exercised")
    try:
        repos = build.simple(mnt)
        init(repos.work)
        before = rs.refs(repos.work)
        filler = mnt / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k", "count=100000"], capture_output=True)
        res = run([GW, "spawn", "t1"], repos.work)
        assert res.code in (4, 5), res
        lines = [ln for ln in res.err.splitlines() if ln.strip() and not ln.startswith("repaired: ")]
        assert len(lines) == 1 and lines[0].startswith("error: "), res.err
        assert "Traceback" not in res.err
        filler.unlink()
        assert rs.refs(repos.work) == before
        assert rs.rows(repos.work) == []
        res = run([GW, "spawn", "t1"], repos.work)  # room again: the same command now works
        assert res.code == 0, res.err
        invariants(repos.work)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_read_only_git_dir_is_one_clear_line_and_changes_nothing(repo):
    import pytest

    init(repo.work)
    if os.geteuid() == 0:
        # root ignores file modes: a read-only bind mount is the real thing
        git_dir = repo.work / ".git"
        if subprocess.run(["mount", "--bind", "-o", "ro", str(git_dir), str(git_dir)], capture_output=True).returncode:
            pytest.skip("cannot make .git read-only for root (mount --bind -o ro failed)")
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(git_dir)], capture_output=True).returncode:
            subprocess.run(["umount", str(git_dir)], capture_output=True)
            pytest.skip("cannot remount .git read-only")
    else:
        for p in [repo.work / ".git", *(repo.work / ".git").rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
    try:
        before = rs.refs(repo.work)
        res = run([GW, "spawn", "t1"], repo.work)
        assert res.code in (4, 5), res
        lines = [ln for ln in res.err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.err, res.err
        assert rs.refs(repo.work) == before
        assert not (repo.work.parent / f"{repo.work.name}.worktrees" / "t1").exists()
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(repo.work / ".git")], capture_output=True)
        else:
            for p in [repo.work / ".git", *(repo.work / ".git").rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)
    res = run([GW, "spawn", "t1"], repo.work)
    assert res.code == 0, res.err
    invariants(repo.work)


def test_merge_killed_inside_the_fast_forward_of_the_main_checkout_converges(tmp_path):
    """13 (merge-delete, seed 1310003): a kill while `git merge --ff-only` writes the main checkout's files
    (after the push) left files untracked and main behind; the rerun undoes the half-written checkout and
    finishes the fast-forward, and every crash invariant holds."""
    group = cs.GROUPS["merge-delete"]
    space = cs.Workspace(tmp_path / "crash")
    ref = cs.reference(space, group)
    s = space.fresh_group(group)
    seen = cs.reachable(s.work)
    origin_before = cs.reachable(s.origin)
    flag = tmp_path / "block"
    # the filter blocks on t1.txt (other.txt, before it, is written) only in the main checkout, not in the
    # temporary checkout the push runs from
    script = tmp_path / "slow-smudge.sh"
    script.write_text(f"#!/bin/sh\nif [ \"$1\" = t1.txt ] && [ \"$(pwd -P)\" = '{os.path.realpath(s.work)}' ]; then\n"
                      f"  if [ -e '{flag}' ]; then : > '{flag}.reached'; fi\n"
                      f"  while [ -e '{flag}' ]; do sleep 0.05; done\nfi\nexec cat\n", encoding="utf-8")
    script.chmod(0o755)
    build.git(s.work, "config", "filter.slow.smudge", f"{script} %f")
    build.git(s.work, "config", "filter.slow.clean", "cat")
    (rs.common_dir(s.work) / "info").mkdir(exist_ok=True)
    (rs.common_dir(s.work) / "info" / "attributes").write_text("*.txt filter=slow\n", encoding="utf-8")

    kill_inside_filter(list(group.argv), s.work, flag, timeout=60)
    seen |= cs.reachable(s.work)
    assert build.git(s.work, "status", "--porcelain"), "the kill left the main checkout as it was: nothing tested"

    rerun = rs.run(list(group.argv), s.work)
    assert "repaired: undid the interrupted fast-forward" in rerun.err
    problems = cs.check(s, ref, rerun, seen, origin_before)
    assert not problems, "\n".join(problems)
    assert build.git(s.work, "rev-parse", "main") == build.git(s.work, "rev-parse", "origin/main")


def test_merge_all_killed_inside_a_worktree_removal_leaves_no_stale_registration(repo):
    """13 (merge-all, seed 1311016): killed after git deleted the worktree's files but not its admin dir; the
    rerun of `merge --all` (nothing left to merge) drops git's stale registration."""
    wt = wfx.drive(repo.work, "t1", "APPROVED")
    killed = rs.run([GW, "merge", "--all"], repo.work, env={**os.environ, "NERVE_FAULT": "merge.after-transition"})
    assert killed.code == -signal.SIGKILL
    import shutil

    shutil.rmtree(wt)  # what a `git worktree remove` killed half-way leaves: the files gone, the registration not
    assert any(item.get("worktree") == str(wt) for item in rs.worktree_list(repo.work))
    res = run([GW, "merge", "--all"], repo.work)
    assert res.code == 0, res.err
    assert not any(item.get("worktree") == str(wt) for item in rs.worktree_list(repo.work))
    invariants(repo.work)


# -- issue 21 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pick", ["clean", "conflicting"])
def test_conflicting_done_killed_while_git_holds_cherry_pick_head_lock_converges(tmp_path, pick):
    """21: killed inside git's rebase while it holds CHERRY_PICK_HEAD.lock (the pick's ref transaction prepared;
    the harness's reference-transaction hook waits there): at the first, clean pick (the rerun undoes the rebase
    and starts again) or right after the conflicting one wrote its conflict. The rerun removes the dead lock, the
    task is CONFLICTED, every crash invariant holds and the agent's `git rebase --continue` works."""
    group = cs.GROUPS["done-conflict"]
    space = cs.Workspace(tmp_path / "crash")
    ref = cs.reference(space, group)
    s = space.fresh_group(group)
    seen = cs.reachable(s.work)
    admin = Path(rs.git(s.wt, "rev-parse", "--path-format=absolute", "--git-dir"))
    picked = rs.git(s.wt, "rev-parse", "HEAD" if pick == "conflicting" else "HEAD~1")  # t1: greeting / t1: add t1.txt
    hold = cs.fresh_hold(space.base)
    with rs.fixed_dates():
        child, reached = cs.start_held(list(group.argv), s.wt, dict(os.environ), hold, "ref", 1,
                                       f"{picked} CHERRY_PICK_HEAD")
        try:
            assert reached, "git never wrote CHERRY_PICK_HEAD: nothing tested"
            assert (admin / "CHERRY_PICK_HEAD.lock").is_file()
            assert bool(rs.git(s.wt, "ls-files", "-u")) == (pick == "conflicting")
        finally:
            cs.kill_group(child, hold)
        assert (admin / "CHERRY_PICK_HEAD.lock").is_file() and cs.in_progress(s.wt)
        seen |= cs.reachable(s.work)
        rerun = rs.run(list(group.argv), s.wt)
    problems = cs.check(s, ref, rerun, seen, set())
    assert not problems, "\n".join(problems)
    assert "CHERRY_PICK_HEAD.lock" in rerun.err and "repaired: " in rerun.err, rerun.err
    assert not (admin / "CHERRY_PICK_HEAD.lock").exists()
    assert wfx.state(s.work, "t1") == "CONFLICTED"
    s.wt.joinpath(wfx.APP).write_text(wfx.app_text("hi from both"), encoding="utf-8")
    build.git(s.wt, "add", wfx.APP)
    env = {**os.environ, "GIT_EDITOR": "true"}
    proc = subprocess.run(["git", "rebase", "--continue"], cwd=s.wt, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    res = run([GW, "done", "--skip-rebase"], s.wt)
    assert res.code == 0, res.err
    invariants(s.work)


def test_retry_killed_as_git_worktree_add_created_its_gitdir_file_converges(tmp_path):
    """21 item 4 (retry, about one kill in 25: "git worktree list failed: not a git repository"): `git worktree
    add` killed after it created the admin dir's ``gitdir`` file and before it wrote it. The repair read the
    worktree from that empty file (``Path("").parent`` is ``.``) and removed the current directory, the main
    checkout. Now it removes only git's admin dir (and git's empty worktree directory), and the rerun converges."""
    group = cs.GROUPS["retry"]
    space = cs.Workspace(tmp_path / "crash")
    ref = cs.reference(space, group)
    s = space.fresh_group(group)
    seen = cs.reachable(s.work)
    # exactly what the killed `git worktree add` left (git writes `locked`, makes the worktree directory, then
    # creates `gitdir`), as old as a dead add's
    from git_nerve.git import ownership

    # what retry records before it runs `git worktree add`, and the dead liveness token of the retry SIGKILLed
    # inside that git child (a real process, really killed)
    ownership.record(rs.common_dir(s.work), "worktree", str(s.wt), task="t1")
    cs.killed_token(s.work, ["worktree", "add", str(s.wt), "feat/t1"])
    admin = rs.common_dir(s.work) / "worktrees" / "t1"
    admin.mkdir(parents=True)
    (admin / "locked").write_text("initializing", encoding="utf-8")
    (admin / "gitdir").write_text("", encoding="utf-8")
    s.wt.mkdir(parents=True)
    old = time.time() - 10
    for p in (admin / "locked", admin / "gitdir", admin, s.wt):
        os.utime(p, (old, old))
    with rs.fixed_dates():
        rerun = rs.run(list(group.argv), s.work)
    assert (s.work / ".git").is_dir() and (s.work / "src" / "app.py").is_file(), "the main checkout was removed"
    assert "repaired: removed the unfinished worktree" in rerun.err, rerun.err
    problems = cs.check(s, ref, rerun, seen, set())
    assert not problems, "\n".join(problems)
    assert ctx_of(s.wt)["task_id"] == "t1"


def test_init_killed_while_writing_nerve_toml_leaves_the_tree_as_one_run_does(repo):
    """`git nerve init` killed between writing nerve.toml's temporary and renaming it: the rerun writes nerve.toml
    and removes that temporary (ours by name, its writer gone), so `git status` shows what one uninterrupted run
    leaves: nerve.toml to commit and nothing else. A temporary of that name whose writer still lives, and a
    person's file of a like name for another file, are kept."""
    import fcntl

    repo = repo.work
    killed = rs.run(["git-nerve", "init"], repo, env={**os.environ, "NERVE_FAULT": "work-tree-file.written"})
    assert killed.code == -signal.SIGKILL, killed
    left = sorted(p.name for p in repo.glob(".nerve.toml.nerve-*.tmp"))
    assert len(left) == 1 and not (repo / "nerve.toml").exists(), left
    mine = repo / ".notes.txt.nerve-1.tmp"
    mine.write_text("a person's\n")
    live = repo / f".nerve.toml.nerve-{os.getpid()}.tmp"
    live.write_text("being written\n")
    with open(live) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        again = run(["git-nerve", "init"], repo)
        assert again.code == 0, again
    assert (repo / "nerve.toml").is_file()
    assert not (repo / left[0]).exists()
    assert live.exists() and mine.read_text() == "a person's\n"
    live.unlink()
    mine.unlink()
    assert rs.git(repo, "status", "--porcelain") == "?? nerve.toml"
