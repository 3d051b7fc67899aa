"""A full disk and a read-only ``.git`` for every lifecycle command, not only spawn (issue 13).

Each case takes a starting state of the random-kill harness (tests/crash_support.py GROUPS: start, done with and
without origin, approve, merge with and without origin, cancel --cleanup, retry), then:

* full disk: the whole scenario (repository, worktrees, origin) lives on a small tmpfs, the rest of which a filler
  file takes; the command runs;
* read-only ``.git``: the command runs in a private mount namespace where the repository's git dir is bind-mounted
  read-only (root ignores file modes, so chmod would prove nothing).

Either the command still did its whole job (nothing it needed to write did not fit), or it failed with ONE
``error:`` line and exit 4 (git) or 5 (database), and nothing is half-written: the task's state, its log, the refs
(ours and origin's), the registered worktrees are exactly as before, no ``*.lock`` is left, ``git fsck --full`` is
clean. Then the room (or write access) comes back and the same command run again finishes exactly as an
uninterrupted run does, every invariant of crash_support.check holding. Where a tmpfs or a mount namespace cannot be
had, the test is skipped and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import crash_support as cs
import pytest
import reliability_support as rs

COMMANDS = ["start", "done", "done-remote", "approve", "merge", "merge-remote", "cancel", "retry"]


def _frozen(s: rs.Scenario) -> dict:
    """What a refused command must leave exactly as it was (read after the room came back)."""
    bus = rs.dump_bus(s.work)
    return {
        "workers": bus.get("workers"),
        "messages": bus.get("messages"),
        "refs": rs.refs(s.work),
        "origin": rs.refs(s.origin) if s.origin else None,
        "worktrees": rs.worktree_list(s.work),
    }


def _git_locks(s: rs.Scenario) -> list[str]:
    roots = [rs.common_dir(s.work)] + ([s.origin] if s.origin else [])
    return [str(p) for root in roots for p in root.rglob("*.lock") if p.is_file()
            and p.relative_to(root).parts[:2] != ("nerve", "locks")]


def _failed_cleanly(res: rs.Proc) -> str | None:
    """None when ``res`` is one clear error line with a documented exit code for a full/read-only disk."""
    if res.code not in (4, 5):
        return f"exit {res.code}, expected 4 (git) or 5 (database): {res.err.strip()[-400:]!r}"
    if "Traceback" in res.err:
        return f"traceback: {res.err[-500:]}"
    lines = [ln for ln in res.err.splitlines() if ln.strip() and not ln.startswith("repaired: ")]
    if len(lines) != 1 or not lines[0].startswith("error: "):
        return f"expected one `error:` line, got: {res.err.strip()[-500:]!r}"
    return None


def _after_refusal(s: rs.Scenario, group: cs.Group, res: rs.Proc, before: dict) -> list[str]:
    problems = []
    if res.code == group.expect and cs.state_of(s.work) == group.state:
        return problems  # it fit: the command did its whole job (the rerun below proves the state is sound)
    problem = _failed_cleanly(res)
    if problem:
        problems.append(problem)
    after = _frozen(s)
    for key in before:
        if after[key] != before[key]:
            problems.append(f"{key} changed although the command failed: {before[key]!r} -> {after[key]!r}"[:600])
    problems += [f"lock left behind: {p}" for p in _git_locks(s)]
    problems += cs.fsck_full(s.work)
    return problems


def _rerun_converges(s: rs.Scenario, group: cs.Group, ref: cs.Reference, seen: set[str], origin: set[str]) -> list[str]:
    rerun = rs.run(list(group.argv), s.cwd(group.where), env=dict(os.environ), timeout=120)
    return cs.check(s, ref, rerun, seen, origin)


def _reference(tmp_path: Path, group: cs.Group) -> cs.Reference:
    return cs.reference(cs.Workspace(tmp_path / "reference"), group)


# -- a full disk ------------------------------------------------------------------------------------------------


def _mount_tmpfs(path: Path, size: str) -> str | None:
    """None when a tmpfs of ``size`` is mounted at ``path``, else why not."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "not root: cannot mount a tmpfs, a full disk is not exercised"
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    return None if proc.returncode == 0 else f"mount -t tmpfs failed ({proc.stderr.strip()}): full disk not exercised"


def _fill(mnt: Path) -> Path:
    """Take every free block of ``mnt``."""
    filler = mnt / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
    subprocess.run(["dd", "if=/dev/zero", f"of={mnt / 'filler-tail'}", "bs=512"], capture_output=True)
    assert shutil.disk_usage(mnt).free < 64 * 1024, "the filler did not fill the disk"
    return filler


@pytest.mark.parametrize("name", COMMANDS)
def test_a_full_disk_is_one_clear_line_nothing_half_written_and_the_rerun_converges(name, tmp_path):
    group = cs.GROUPS[name]
    mnt = tmp_path / "small"
    why = _mount_tmpfs(mnt, "24m")
    if why:
        pytest.skip(why)
    try:
        ref = _reference(tmp_path, group)
        s = rs.make_scenario(mnt / "case", group.as_rs_group())
        rs._quiet(s.root)
        before = _frozen(s)
        seen = cs.reachable(s.work)
        origin = cs.reachable(s.origin) if s.origin else set()
        filler = _fill(mnt)
        with rs.fixed_dates():
            res = rs.run(list(group.argv), s.cwd(group.where), env=dict(os.environ), timeout=120)
        filler.unlink()
        (mnt / "filler-tail").unlink()
        print(f"\nDISKFULL {name}: exit {res.code}: {res.err.strip()!r}")
        problems = _after_refusal(s, group, res, before)
        assert not problems, f"{name} on a full disk:\n" + "\n".join(problems)
        problems = _rerun_converges(s, group, ref, seen, origin)
        assert not problems, f"{name}: with room again, the rerun does not converge:\n" + "\n".join(problems)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# -- a read-only .git -----------------------------------------------------------------------------------------------


def _read_only_runner():
    """(runner, None) where a private mount namespace can make a directory read-only for root, else (None, why)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0:
        return None, "not root: this test needs a read-only bind mount (chmod is what non-root tests use)"
    if unshare is None:
        return None, "unshare(1) is missing: cannot make .git read-only for root"
    probe = subprocess.run([unshare, "-m", "true"], capture_output=True, text=True)
    if probe.returncode:
        return None, f"no mount namespaces here ({probe.stderr.strip()}): cannot make .git read-only for root"
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@"'

    def run(git_dir: Path, argv: list[str], cwd: Path) -> rs.Proc:
        return rs.run([unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", str(git_dir), *argv], cwd,
                      env=dict(os.environ), timeout=120)

    return run, None


@pytest.mark.parametrize("name", COMMANDS)
def test_a_read_only_git_dir_is_one_clear_line_nothing_written_and_the_rerun_converges(name, tmp_path):
    group = cs.GROUPS[name]
    runner, why = _read_only_runner()
    if runner is None:
        pytest.skip(why)
    ref = _reference(tmp_path, group)
    s = rs.make_scenario(tmp_path / "case", group.as_rs_group())
    rs._quiet(s.root)
    with rs.bus_conn(s.work) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = _frozen(s)
    seen = cs.reachable(s.work)
    origin = cs.reachable(s.origin) if s.origin else set()
    with rs.fixed_dates():
        res = runner(rs.common_dir(s.work), list(group.argv), s.cwd(group.where))
    print(f"\nREADONLY {name}: exit {res.code}: {res.err.strip()!r}")
    assert res.code != group.expect or cs.state_of(s.work) != group.state, \
        f"{name} reported success with a read-only .git: {res.err!r}"
    problems = _after_refusal(s, group, res, before)
    assert not problems, f"{name} with a read-only .git:\n" + "\n".join(problems)
    problems = _rerun_converges(s, group, ref, seen, origin)
    assert not problems, f"{name}: writable again, the rerun does not converge:\n" + "\n".join(problems)
