"""Crashes at the worst moment: a command killed with SIGKILL at each injection
point (and git hooks killed mid-run), then run again, must end exactly where
one uninterrupted run ends: same refs (sha for sha), worktrees, bus rows and
state log, with no orphan branch, worktree, lock, temporary file or lost commit."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
import reliability_support as rs

from git_nerve import faults
from git_nerve.locks import hold, try_hold

_REFERENCES: dict[str, rs.Reference] = {}


@pytest.fixture(scope="session")
def space(tmp_path_factory):
    return rs.Workspace(tmp_path_factory.getbasetemp() / "faults")


@pytest.fixture
def reference(space):
    def get(group: str) -> rs.Reference:
        if group not in _REFERENCES:
            _REFERENCES[group] = rs.reference(space, rs.GROUPS[group])
        return _REFERENCES[group]

    return get


@pytest.mark.parametrize("case", rs.selected_cases(), ids=lambda c: c.id)
def test_killed_command_converges_when_run_again(case, reference, space):
    ref = reference(case.group)
    res = rs.run_case(space, case, ref)
    assert res.killed, res.problems
    assert res.converged, "\n".join(res.problems)


def test_the_reference_runs_did_what_the_commands_promise(reference):
    """Guard the comparisons above: the uninterrupted runs reach the states they should."""
    expected = {"spawn": "ASSIGNED", "done": "IN_REVIEW", "done-remote": "IN_REVIEW", "done-conflict": "CONFLICTED",
                "approve": "APPROVED", "merge": "COMPLETED", "merge-delete": "COMPLETED", "merge-remote": "COMPLETED",
                "cancel": "FAILED", "commit": "IN_REVIEW", "amend": "IN_REVIEW", "push": "IN_REVIEW"}
    assert set(expected) == set(rs.GROUPS)
    for group, state in expected.items():
        if not any(c.group == group for c in rs.selected_cases()):
            continue
        ref = reference(group)
        assert [r["state"] for r in ref.snapshot["rows"]] == [state], group
        assert ref.codes[0] == rs.GROUPS[group].expect, group
    assert "refs/nerve/archive/t1" in reference("merge").snapshot["refs"]
    assert reference("done-conflict").snapshot["wt_rebase"] is True


def test_every_injection_point_in_the_source_is_exercised():
    src = (rs.ROOT / "git_nerve").rglob("*.py")
    named = set()
    for path in src:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "faults.point(" in line:
                named.add(line.split('faults.point("', 1)[1].split('"', 1)[0])
    covered = {c.point for c in rs.CASES}
    for point, test_file in ELSEWHERE.items():  # a point another suite kills at: named there, or not covered
        if f'"NERVE_FAULT": "{point}"' in (rs.ROOT / test_file).read_text(encoding="utf-8"):
            covered.add(point)
    assert named and named <= covered, sorted(named - covered)


#: injection points killed and rerun by a suite of their own (it needs what the reliability workspace has not:
#: several clones and a real PostgreSQL): point -> that test file, which must name the point in NERVE_FAULT
ELSEWHERE = {
    "move.after-load": "tests/test_shared_move.py",
    "move.after-freeze": "tests/test_shared_move.py",
    "work-tree-file.written": "tests/test_crash_cases.py",
}


def test_fault_point_is_a_no_op_unless_named(monkeypatch):
    monkeypatch.delenv(faults.ENV, raising=False)
    faults.point("anything")
    monkeypatch.setenv(faults.ENV, "other.point")
    faults.point("anything")
    monkeypatch.setenv(faults.ENV, "anything:enospc")
    with pytest.raises(OSError) as info:
        faults.point("anything")
    assert info.value.errno == 28


def test_a_lock_left_by_a_killed_holder_is_taken_at_once(tmp_path):
    lock = tmp_path / "locks" / "merge.lock"
    code = (
        "import os, signal, sys; sys.path.insert(0, sys.argv[2]);"
        "from git_nerve.locks import hold\n"
        "with hold(sys.argv[1]):\n"
        "    print('held', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(lock), str(rs.ROOT)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == -signal.SIGKILL and proc.stdout == "held\n"
    assert lock.exists()  # the file stays; the kernel dropped the flock with the process
    cm = try_hold(lock)
    assert cm is not None
    cm.__exit__(None, None, None)
    t0 = time.monotonic()
    with hold(lock, timeout=None):  # would wait for ever if the dead holder still counted
        pass
    assert time.monotonic() - t0 < 5


def test_a_lock_held_by_a_live_process_is_waited_for_then_reported(tmp_path):
    from git_nerve.locks import LockTimeout

    lock = tmp_path / "merge.lock"
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[2]);"
        "from git_nerve.locks import hold\n"
        "with hold(sys.argv[1]):\n"
        "    print('held', flush=True); time.sleep(30)"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(lock), str(rs.ROOT)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "held\n"
        with pytest.raises(LockTimeout, match="held by another process"), hold(lock, timeout=0.2, what="the merge lock"):
            pass
    finally:
        child.kill()
        child.wait()
    with hold(lock, timeout=5):
        pass


def _stale_git_lock(repo, gw, lock_rel: str, args: list[str], cwd_key: str, detached: bool):
    from fixtures.repos import worker as wfx

    wt = wfx.drive(repo.work, "t1", "APPROVED" if args[0] == "merge" else "WORKING")
    if args[0] == "done":
        rs.build.commit_file(wt, "t1.txt", "x\n", "t1: work")
    rs.build.commit_file(repo.work, "other.txt", "main moved\n", "main: other")  # done must rebase
    if detached:  # main checked out nowhere: merge moves the ref itself
        rs.git(repo.work, "config", "nerve.integration", "main")
        rs.git(repo.work, "checkout", "-q", "--detach")
    cwd = repo.work if cwd_key == "work" else wt
    git_dir = rs.Path(rs.git(cwd, "rev-parse", "--path-format=absolute", "--git-dir"))
    lock = (rs.common_dir(repo.work) if lock_rel.startswith("refs/") else git_dir) / lock_rel
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    before = rs.dump_bus(repo.work), rs.refs(repo.work)
    return gw(args, cwd), lock, before, cwd


_LOCK_CASES = [
    ("refs/heads/main.lock", ["merge", "t1"], "work", False),
    ("refs/heads/main.lock", ["merge", "t1"], "work", True),
    ("index.lock", ["merge", "t1"], "work", False),
    ("index.lock", ["done"], "wt", False),
]
_LOCK_IDS = ["merge-ref-lock", "merge-ref-lock-no-checkout", "merge-index-lock", "done-index-lock"]


@pytest.mark.parametrize("lock_rel,args,cwd_key,detached", _LOCK_CASES, ids=_LOCK_IDS)
def test_a_git_lock_file_no_git_nerve_token_covers_is_kept_named_and_fails_clearly(repo, gw, lock_rel, args, cwd_key,
                                                                                   detached):
    """Nobody holds it open, but nothing proves a git of git-nerve made it (it may be a person's git waiting in
    its editor): it is kept, named with what to do, the command fails with exit 4 and changes nothing; once the
    person removes it, the command works. (A lock a killed git of ours left: tests/test_liveness.py.)"""
    res, lock, before, cwd = _stale_git_lock(repo, gw, lock_rel, args, cwd_key, detached)
    assert res.code == 4, res
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    assert lines[0] == f"kept: {lock}: a git lock file of another process (a git still running?); " \
                       f"if no git is running there, remove it", res.err
    assert lines[-1].startswith("error: ") and f"remove {lock}" in lines[-1], res.err
    assert not any(ln.startswith("repaired: ") for ln in lines), res.err
    assert lock.exists() and "Traceback" not in res.err
    assert (rs.dump_bus(repo.work), rs.refs(repo.work)) == before
    lock.unlink()
    assert gw(args, cwd).code == 0


@pytest.mark.parametrize("lock_rel,args,cwd_key,detached", _LOCK_CASES[:1] + _LOCK_CASES[3:], ids=["merge-ref-lock", "done-index-lock"])
def test_a_git_lock_file_a_live_process_holds_is_one_clear_error_and_changes_nothing(repo, gw, lock_rel, args, cwd_key,
                                                                                      detached, tmp_path):
    holder = None

    def hold_open(path):
        nonlocal holder
        holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); print('open', flush=True); "
                                   "time.sleep(120)", str(path)], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline() == "open\n"  # it holds the file open now

    from fixtures.repos import worker as wfx

    wt = wfx.drive(repo.work, "t1", "APPROVED" if args[0] == "merge" else "WORKING")
    if args[0] == "done":
        rs.build.commit_file(wt, "t1.txt", "x\n", "t1: work")
    rs.build.commit_file(repo.work, "other.txt", "main moved\n", "main: other")
    cwd = repo.work if cwd_key == "work" else wt
    git_dir = rs.Path(rs.git(cwd, "rev-parse", "--path-format=absolute", "--git-dir"))
    lock = (rs.common_dir(repo.work) if lock_rel.startswith("refs/") else git_dir) / lock_rel
    lock.write_text("")
    hold_open(lock)
    try:
        before = rs.dump_bus(repo.work), rs.refs(repo.work)
        res = gw(args, cwd)
        assert res.code == 4, res
        lines = [ln for ln in res.err.splitlines() if ln.strip() and not ln.startswith(f"kept: {lock}: ")]
        assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.err, res.err
        assert f"remove {lock}" in lines[0], lines[0]
        assert (rs.dump_bus(repo.work), rs.refs(repo.work)) == before
        assert lock.exists()
    finally:
        holder.kill()
        holder.wait()
    lock.unlink()
    assert gw(args, cwd).code == 0
