"""Liveness without /proc (issue 21, 5b and 5g): a person's git locks are never touched; what a killed git of
git-nerve left is repaired only through its dead liveness token (git_nerve/liveness.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import crash_support as cs
import reliability_support as rs
from test_crash_cases import _working_behind, kill_inside_filter, slow_checkout

from fixtures.repos import build
from fixtures.repos import worker as wfx
from processes import without_proc
from waiting import wait_until

GW = "git-worker"
PACKAGE = Path(__file__).resolve().parents[1] / "git_nerve"

#: the only places /proc may appear: none of them decides what to keep or remove
PROC_ALLOWED = {
    "fs.py": "filesystem_type reads /proc/mounts to name a network filesystem (informational)",
    "proctable.py": "the process table for process control (the agent-helper sweep, a zombie in a status line, the "
                    "agent a note was delivered to): /proc where mounted, else ps; never decides what files to keep",
    "waits.py": "a command's own wait for a CPU, reported to bench/ under NERVE_WAITS (informational)",
    "workflow/sandbox.py": "mounts a fresh /proc inside an agent's bubblewrap box (Linux only; reads nothing of /proc)",
}


#: a path in code: a string starting with /proc (prose saying "no ``/proc``" is not a use)
PROC_USE = re.compile(r"[\"']/proc")


def test_no_proc_outside_the_documented_allow_list():
    found = sorted(os.fspath(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if PROC_USE.search(p.read_text("utf-8")))
    assert set(found) <= set(PROC_ALLOWED), found
    for must_not in ("worker/repair.py", "git/worktrees.py", "hooks/install.py", "liveness.py", "git/cli.py",
                     "workflow/adapters/process.py", "knowledge/status.py", "steer/notes_hook.py"):
        assert not PROC_USE.search((PACKAGE / must_not).read_text("utf-8")), must_not


def _admin(wt: Path) -> Path:
    return Path(build.git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))


def test_a_persons_commit_waiting_in_its_editor_keeps_its_index_lock_while_git_worker_start_runs(repo, tmp_path):
    wt = wfx.drive(repo.work, "t1", "ASSIGNED")
    (wt / "src" / "app.py").write_text("print('mine')\n", encoding="utf-8")
    go = tmp_path / "go"
    editor = tmp_path / "editor.sh"
    editor.write_text(f"#!/bin/sh\nwhile [ ! -e '{go}' ]; do sleep 0.05; done\necho 'my message' > \"$1\"\n",
                      encoding="utf-8")
    editor.chmod(0o755)
    lock = _admin(wt) / "index.lock"
    commit = subprocess.Popen(["git", "commit", "-a"], cwd=wt, env={**os.environ, "GIT_EDITOR": str(editor)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lock.exists, 20, what="git commit to take index.lock", interval=0.02, alive=commit)
        time.sleep(2.5)  # makes time pass on purpose: older than the two seconds after which a lock used to count as dead
        argv = without_proc([GW, "start"], tmp_path)
        res = rs.run(argv, wt)
        assert lock.exists(), res.err
        assert f"kept: {lock}: a git lock file of another process" in res.err, res.err
        assert "repaired:" not in res.err
    finally:
        go.write_text("")
        out, _ = commit.communicate(timeout=30)
    assert commit.returncode == 0, out
    assert build.git(wt, "log", "-1", "--format=%s") == "my message"
    assert build.git(wt, "status", "--porcelain", "--untracked-files=no") == ""


def test_a_lock_our_killed_git_left_is_removed_without_proc_and_a_persons_lock_is_kept(repo, tmp_path):
    wt2 = wfx.drive(repo.work, "t2", "WORKING")
    person = _admin(wt2) / "index.lock"  # a person's git there, from before
    person.write_text("")
    wt = _working_behind(repo.work)
    flag = tmp_path / "block"
    slow_checkout(repo.work, flag)
    kill_inside_filter([GW, "done"], wt, flag)  # SIGKILL while git's `reset --keep` holds index.lock
    ours = _admin(wt) / "index.lock"
    assert ours.exists()
    argv = without_proc([GW, "done"], tmp_path)
    res = rs.run(argv, wt)
    assert res.code == 0, res.err
    assert f"repaired: removed {ours}, a lock file left by a killed git of git-nerve" in res.err, res.err
    assert f"kept: {person}: " in res.err, res.err
    assert person.exists() and not ours.exists()
    assert wfx.state(repo.work, "t1") == "IN_REVIEW"
    # the dead token was consumed: a lock appearing there now is nobody's proven leftover
    ours.write_text("")
    again = rs.run([GW, "status"], wt)
    res = rs.run([GW, "heartbeat"], wt)
    assert ours.exists(), (again.err, res.err)
    ours.unlink()
    person.unlink()


def test_an_unfinished_worktree_add_no_git_nerve_command_recorded_is_kept_and_named(remote_repo):
    work = remote_repo.work
    rs.run(["git-nerve", "init"], work)
    wt = work.parent / "elsewhere" / "mine"
    wt.parent.mkdir()
    build.git(work, "worktree", "add", "-q", "--detach", str(wt), "HEAD")
    admin = _admin(wt)
    (admin / "locked").write_text("initializing", encoding="utf-8")  # a person's add, or one killed: cannot tell
    (admin / "gitdir").write_text("", encoding="utf-8")
    res = rs.run([GW, "spawn", "t2"], work)
    assert f"kept: {admin}: an unfinished `git worktree add`" in res.err, res.err
    assert wt.is_dir() and admin.is_dir() and (work / ".git").is_dir()
    assert "repaired:" not in res.err


def test_a_token_is_alive_while_a_git_child_holds_it_after_its_command_was_killed(repo, tmp_path):
    """The kernel keeps the flock while any holder lives: a command killed alone (its git child still running)
    leaves a live token, whose children's locks are not touched."""
    from git_nerve import liveness

    flag = tmp_path / "block"
    code = ("import os, signal, subprocess, sys; from git_nerve import liveness; liveness.enable(); "
            "fds, marker = liveness.before_git(sys.argv[1], ['status']); "
            "subprocess.Popen(['sh', '-c', 'while [ -e \"$0\" ]; do sleep 0.05; done', sys.argv[2]], pass_fds=fds, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    flag.write_text("")
    proc = subprocess.run([sys.executable, "-c", code, str(repo.work), str(flag)], stderr=subprocess.PIPE, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    common = repo.work / ".git"
    try:
        with liveness.scan(common) as sc:
            assert sc.dead == [] and [r["kind"] for r in sc.alive] == ["git"]
    finally:
        flag.unlink()
    def dead_kinds():
        with liveness.scan(common) as sc:
            return [r["kind"] for d in sc.dead for r, _ in d.records("git")] if sc.dead else None

    assert wait_until(dead_kinds, 10, what="the token to die") == ["git"]


def test_concurrent_merges_from_several_terminals_keep_their_temporary_checkouts(remote_repo):
    """5g: 8 approved tasks, `git worker merge <task>` four at a time: each one's temporary push checkout is its
    own; another merge's repair never removes it."""
    work = remote_repo.work
    tasks = [f"m{i}" for i in range(8)]
    for t in tasks:
        wfx.drive(work, t, "APPROVED")
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: rs.run([GW, "merge", t], work), tasks))
    failed = [(r.argv, r.code, r.err) for r in results if r.code != 0]
    assert not failed, failed
    for r in results:
        assert not re.search(r"removed the temporary checkout|unfinished worktree", r.err), r.err
    assert all(wfx.state(work, t) == "COMPLETED" for t in tasks)
    assert os.listdir(work / ".git" / "nerve" / "tmp") == []
    assert os.listdir(work / ".git" / "nerve" / "alive") == []


KILLED_WRITING_A_MARKER = """
import os, signal, sys
from pathlib import Path
from git_nerve import liveness
from git_nerve.git import cli
from git_nerve.worker import repair

liveness.enable()
cli.run(["rev-parse", "HEAD"], cwd=sys.argv[1])  # a command of ours: it holds a liveness token
def killed(src, dst):  # SIGKILL between the marker's write and its rename
    os.kill(os.getpid(), signal.SIGKILL)
os.replace = killed
repair.set_marker(Path(sys.argv[2]), "integration-ff", {"from": "a", "to": "b"})
"""


def test_a_repair_markers_temporary_a_killed_command_left_is_removed_by_the_next_command(repo):
    """`merge` writes a marker before it fast-forwards the integration checkout; a kill between the marker's write
    and its rename left `nerve/integration-ff.<pid>.tmp` for good (a random-kill run found it). The temporary is
    now flocked while written and the next command's leftover check removes it once its writer is gone; a live
    writer's temporary and a person's file of that look are kept."""
    common = repo.work / ".git"
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITING_A_MARKER, str(repo.work), str(common)],
                          cwd=repo.work, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = [p for p in (common / "nerve").iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1 and re.fullmatch(r"\.integration-ff\.nerve-\d+\.tmp", left[0].name), left
    person = common / "nerve" / "integration-ff.1234.tmp"  # not our name: kept
    person.write_text("a person's")
    live = common / "nerve" / ".done-reset.nerve-1.tmp"  # its writer still holds it: kept
    live.write_text("being written")
    with rs.flock_held(live):
        res = rs.run([GW, "spawn", "t9", "--no-fetch"], repo.work)
        assert res.code == 0, res.err
        assert f"removed {left[0]}, a repair marker a killed command was writing" in res.err, res.err
        assert not left[0].exists() and not (common / "nerve" / "integration-ff").exists()
        assert person.read_text() == "a person's" and live.read_text() == "being written"
