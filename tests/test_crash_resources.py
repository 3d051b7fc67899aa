"""A full disk and a read-only ``.git`` under every lifecycle command (issue 13, last point).

The starting states and commands are the crash harness's (crash_support.GROUPS): each command runs
once on a real tmpfs filled to the last byte (or with the repository's ``.git`` bind-mounted
read-only in a private mount namespace), and must either

* finish normally (what it had to write fitted in what was left), or
* refuse with one ``error:`` line, a documented exit code (1 for an OS error, 4 git, 5 bus), no
  traceback, and leave everything as it was: every bus row, every ref, the worktree list, the
  worktree directories, no git ``*.lock`` or temporary file, no held lock.

Then the room comes back (the filler is deleted / the mount is gone), the same command runs again
and every invariant of the crash harness holds (crash_support.check: the state an uninterrupted run
reaches, fsck, no orphan, no lost commit, indexes equal to HEAD, context files). Where the machine
cannot mount a tmpfs or make a private mount namespace, the test is skipped and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import crash_support as cs
import pytest
import reliability_support as rs

#: the lifecycle commands beyond spawn (spawn's own tests are in test_crash_cases / test_reliability_hostile)
COMMANDS = ["start", "done", "done-remote", "done-conflict", "approve", "merge", "merge-remote", "merge-delete",
            "merge-all", "cancel", "retry"]

#: what a refusal may exit with (git_nerve/errors.py): an OS error (ENOSPC, EROFS), git, the bus
REFUSAL_CODES = {1, 4, 5}


def _env() -> dict:
    """The user's environment: without NERVE_DEBUG (the suite's, which turns an OSError into a traceback)."""
    return {k: v for k, v in os.environ.items() if k != "NERVE_DEBUG"}


def _scenario(root: Path, group: cs.Group) -> rs.Scenario:
    s = rs.make_scenario(root, group.as_rs_group())
    rs._quiet(root)  # background work of the setup's hooks must not write while the disk fills
    return s


def _reference(root: Path, group: cs.Group) -> cs.Reference:
    """The uninterrupted run, on a normal disk: its exit code and the commits it stops referencing."""
    s = _scenario(root, group)
    before = cs.reachable(s.work)
    with rs.fixed_dates():
        p = rs.run(list(group.argv), s.cwd(group.where), env=_env(), timeout=120)
    assert p.code == group.expect, f"{group.name}: the uninterrupted run exited {p.code}:\n{p.err}"
    return cs.Reference(group, p.seconds, p.code, before - cs.reachable(s.work), porcelain=cs.porcelain(s.work),
                        hooks=cs.hooks_snapshot(s.work), origin_agrees=cs.origin_agreement(s))


def _frozen(s: rs.Scenario) -> dict:
    """What a refused command must leave exactly as it was."""
    wt_root = s.work.parent / f"{s.work.name}.worktrees"
    bus = rs.dump_bus(s.work)
    # what a hook records of git's own work (a commit, a rebase's rewrite) is a fact, not a change of state
    bus["messages"] = [m for m in bus.get("messages", []) if m[3] not in rs.INFORMATIONAL]
    bus.pop("sqlite_sequence", None)
    return {
        "bus": bus,
        # a fetch (of merge/done with origin) updating remote-tracking refs is a read of origin, not a half-write
        "refs": {r: sha for r, sha in rs.refs(s.work).items() if not r.startswith("refs/remotes/")},
        "origin": rs.refs(s.origin) if s.origin else {},
        "worktrees": rs.worktree_list(s.work),
        "dirs": sorted(p.name for p in wt_root.iterdir()) if wt_root.is_dir() else [],
    }


def _refusal_problems(res: rs.Proc) -> list[str]:
    if res.code not in REFUSAL_CODES:
        return [f"exit {res.code} (a refusal exits 1, 4 or 5): {res.err.strip()[-400:]!r}"]
    if "Traceback" in res.err:
        return [f"traceback: {res.err[-600:]}"]
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    if len(lines) != 1 or not lines[0].startswith("error: "):
        return [f"expected one error line, got: {res.err.strip()[-600:]!r}"]
    return []


def _outcome_problems(s: rs.Scenario, group: cs.Group, res: rs.Proc, before: dict) -> list[str]:
    """A run without room: finished as an uninterrupted run does, or refused having changed nothing."""
    if res.code == group.expect and not res.err.startswith("error:"):
        st = cs.state_of(s.work)
        return [] if st == group.state else [f"exit {res.code} but t1 is {st}, not {group.state}"]
    problems = _refusal_problems(res)
    after = _frozen(s)
    if group.argv[1:2] == ("done",):
        problems += _rebased_only(s, before, after)
    if group.argv[1:2] == ("merge",):
        problems += _merged_only(s, before, after)
    if group.argv[1:2] == ("cancel",):
        problems += _cancelled_only(s, res, before, after)
    for ref, sha in after["refs"].items():
        # the archive ref a command writes first is a copy of what the task holds, so nothing can be lost
        if ref.startswith("refs/nerve/archive/") and ref not in before["refs"]:
            task = ref.rsplit("/", 1)[1]
            branch_tip = before["refs"].get(f"refs/heads/feat/{task}")
            if sha == branch_tip or rs.git(s.work, "log", "-1", "--format=%s", sha).startswith("nerve snapshot"):
                before["refs"] = dict(before["refs"], **{ref: sha})
    for key in before:
        if after[key] != before[key]:
            problems.append(f"the refused command changed {key}: {before[key]!r} -> {after[key]!r}"[:800])
    problems += rs.orphan_problems(s.work)
    return problems


def _rebased_only(s: rs.Scenario, before: dict, after: dict) -> list[str]:
    """`done` rebases the task's branch onto the integration branch before it moves the bus row: a refusal
    after that step keeps the rebase (complete: the same change, now on top of main, checked out in the
    worktree), the row stays WORKING and the rerun goes on from there. Accept exactly that, then compare
    the rest as for any refusal."""
    branch = "refs/heads/feat/t1"
    old, new = before["refs"].get(branch), after["refs"].get(branch)
    if old == new:
        return []
    main = before["refs"]["refs/heads/main"]
    problems = []
    if new is None or subprocess.run(["git", "merge-base", "--is-ancestor", main, new], cwd=s.work).returncode:
        problems.append(f"{branch} moved to {new}, not a rebase onto main")
    else:
        def patch(a: str, b: str) -> str:
            diff = rs.git(s.work, "diff", "--binary", a, b)
            return subprocess.run(["git", "patch-id", "--stable"], cwd=s.work, input=diff, capture_output=True,
                                  text=True).stdout.split(" ")[0]

        if patch(rs.git(s.work, "merge-base", main, old), old) != patch(main, new):
            problems.append(f"{branch} moved to {new}, whose change is not the task's change")
    if rs.git(s.wt, "rev-parse", "HEAD") != new or rs.git(s.wt, "status", "--porcelain"):
        problems.append("the worktree does not hold the rebased branch, clean")
    before["refs"] = dict(before["refs"], **{branch: new})
    before["worktrees"] = after["worktrees"]  # (the worktree's HEAD is the branch's tip, checked above)
    return problems


def _merged_only(s: rs.Scenario, before: dict, after: dict) -> list[str]:
    """`merge` publishes first (the integration branch moves to a merge commit of its old tip and the task's
    tip, the main checkout follows), then moves the bus row: a refusal after publishing keeps the merge, the row
    stays APPROVED and the rerun finishes (and is checked to). Accept exactly that."""
    main = "refs/heads/main"
    old, new = before["refs"][main], after["refs"].get(main)
    if old == new:
        return []
    tips = {sha for r, sha in before["refs"].items() if r.startswith("refs/heads/feat/")}
    if new is None or subprocess.run(["git", "merge-base", "--is-ancestor", old, new], cwd=s.work).returncode:
        return [f"{main} moved to {new}, which does not contain its old tip"]
    for line in rs.git(s.work, "rev-list", "--first-parent", "--parents", f"{old}..{new}").splitlines():
        sha, *parents = line.split()
        if sha not in tips and not (len(parents) == 2 and parents[1] in tips):
            return [f"{main} moved to {new}: {sha} is neither a task's tip nor a merge of one"]
    if rs.git(s.work, "status", "--porcelain"):
        return [f"the main checkout differs from {main}: {rs.git(s.work, 'status', '--porcelain').splitlines()[:5]}"]
    before["refs"] = dict(before["refs"], **{main: new})
    before["worktrees"] = after["worktrees"]
    return []


def _cancelled_only(s: rs.Scenario, res: rs.Proc, before: dict, after: dict) -> list[str]:
    """`cancel --cleanup` moves the row to FAILED first (the cancel itself: the agent must stop), then
    archives and removes the worktree: a cleanup refused for lack of room leaves a FAILED task whose worktree
    and branch are intact (the rerun, or `cancel --cleanup` again, removes them). Accept exactly that."""
    if before["bus"] == after["bus"]:
        return []
    if cs.state_of(s.work) != "FAILED":
        return [f"the refused cancel left t1 {cs.state_of(s.work)}"]
    if not s.wt.is_dir() or rs.git(s.wt, "status", "--porcelain"):
        return ["the refused cleanup left the worktree missing or changed"]
    before["bus"] = after["bus"]
    return []


def _converges(s: rs.Scenario, ref: cs.Reference, seen: set[str], origin_before: set[str]) -> list[str]:
    group = ref.group
    with rs.fixed_dates():
        rerun = rs.run(list(group.argv), s.cwd(group.where), env=_env(), timeout=120)
    return [f"after the room came back: {p}" for p in cs.check(s, ref, rerun, seen, origin_before)]


# -- a full disk -------------------------------------------------------------------------------------------


def _mount_tmpfs(path: Path, size: str) -> str | None:
    """None when a tmpfs of ``size`` is mounted at ``path``, else why not."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None:
        return "mount(8) is not installed"
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    return None if proc.returncode == 0 else f"mount -t tmpfs failed: {proc.stderr.strip()}"


def _fill(mnt: Path, leave: int = 0) -> list[Path]:
    """Take every free byte of the filesystem at ``mnt`` (big blocks, then single pages) but ``leave``."""
    reserve = mnt / "reserve"
    if leave:
        reserve.write_bytes(b"\0" * leave)
    fillers = []
    for i, bs in enumerate(("1M", "4k")):
        f = mnt / f"filler-{i}"
        subprocess.run(["dd", "if=/dev/zero", f"of={f}", f"bs={bs}", "count=1000000"], capture_output=True)
        fillers.append(f)
    st = os.statvfs(mnt)
    assert st.f_bavail * st.f_frsize < 8192, f"{mnt} still has {st.f_bavail * st.f_frsize} bytes free"
    reserve.unlink(missing_ok=True)
    return fillers


#: (command, bytes left free): 0 fails at the bus's first write; 64 KiB lets the bus open and git start,
#: so the disk fills inside git (worktree add, rebase, merge commit, push) or at the bus commit
FULL_DISK = [(name, 64 * 1024) for name in COMMANDS] + [("start", 0), ("merge-remote", 0), ("retry", 0)]


@pytest.mark.parametrize("name,leave", FULL_DISK, ids=[f"{n}-{leave // 1024}k" for n, leave in FULL_DISK])
def test_a_full_disk_is_one_clear_line_nothing_half_written_and_the_rerun_converges(name, leave, tmp_path):
    group = cs.GROUPS[name]
    ref = _reference(tmp_path / "ref", group)
    mnt = tmp_path / "small"
    why = _mount_tmpfs(mnt, "48m")
    if why:
        pytest.skip(f"a full disk is not exercised: {why}")
    try:
        s = _scenario(mnt / "repo", group)
        before = _frozen(s)
        seen = cs.reachable(s.work)
        origin_before = cs.reachable(s.origin) if s.origin else set()
        fillers = _fill(mnt, leave)
        with rs.fixed_dates():
            res = rs.run(list(group.argv), s.cwd(group.where), env=_env(), timeout=120)
        for f in fillers:
            f.unlink()
        seen |= cs.reachable(s.work)
        problems = _outcome_problems(s, group, res, before)
        if res.code in REFUSAL_CODES and not any(w in res.err.lower() for w in ("no space left", "disk is full", "out of diskspace")):
            problems.append(f"the error does not say the disk is full: {res.err.strip()!r}")
        assert not problems, f"{name} on a full disk:\n" + "\n".join(problems)
        problems = _converges(s, ref, seen, origin_before)
        assert not problems, f"{name} after a full disk:\n" + "\n".join(problems)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# -- a read-only .git --------------------------------------------------------------------------------------

#: argv prefix making "$1" read-only for the rest of argv, in a private mount namespace (root ignores modes)
_RO = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@"'


def _read_only_prefix(git_dir: Path) -> tuple[list[str] | None, str]:
    if os.geteuid() != 0:
        return None, "not root: chmod would do, but the harness runs as root in CI"
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "unshare(1) is not installed"
    proc = subprocess.run([unshare, "-m", "true"], capture_output=True, text=True)
    if proc.returncode:
        return None, f"no private mount namespace (unshare -m: {proc.stderr.strip()})"
    return [unshare, "-m", "--propagation", "private", "sh", "-c", _RO, "sh", str(git_dir)], ""


@pytest.mark.parametrize("name", COMMANDS)
def test_a_read_only_git_dir_is_one_clear_line_changes_nothing_and_the_rerun_converges(name, tmp_path):
    group = cs.GROUPS[name]
    s = _scenario(tmp_path / "repo", group)
    prefix, why = _read_only_prefix(rs.common_dir(s.work))
    if prefix is None:
        pytest.skip(f"a read-only .git cannot be arranged: {why}")
    ref = _reference(tmp_path / "ref", group)
    with rs.bus_conn(s.work) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = _frozen(s)
    seen = cs.reachable(s.work)
    origin_before = cs.reachable(s.origin) if s.origin else set()
    with rs.fixed_dates():
        res = rs.run([*prefix, *group.argv], s.cwd(group.where), env=_env(), timeout=120)
    # nothing can be written to a read-only .git: the command must refuse, not report success
    problems = _refusal_problems(res) + _outcome_problems(s, group, res, before)
    if "read-only" not in res.err.lower():
        problems.append(f"the error does not say what is read-only: {res.err.strip()!r}")
    assert not problems, f"{name} with a read-only .git:\n" + "\n".join(dict.fromkeys(problems))
    problems = _converges(s, ref, seen, origin_before)
    assert not problems, f"{name} after a read-only .git:\n" + "\n".join(problems)
