"""Random SIGKILLs of a whole command's process group (git children and hooks included), at instants
drawn uniformly over the command's duration or inside a git child (at a ref transaction, locks held, or
in a checkout), then one rerun: every invariant of crash_support.check must hold. A reduced sweep
(crash_support.CI_KILLS per command, every command of issue 21); bench/crash.py runs more.
A failure names the seed and fraction that replay it (bench/crash.py --replay GROUP:SEED:FRACTION)."""

from __future__ import annotations

import os

import crash_support as cs
import pytest

SEED = int(os.environ.get("NERVE_CRASH_SEED", "13"))
KILLS = int(os.environ.get("NERVE_CRASH_KILLS", str(cs.CI_KILLS)))


@pytest.mark.timeout(900)  # 15 kills of a 1-7 s command, each with a rerun: ~1-2 min quiet, far more on a loaded box
@pytest.mark.parametrize("group", list(cs.GROUPS))
def test_random_kill_then_rerun_converges(group, tmp_path):
    space = cs.Workspace(tmp_path / "crash")
    ref = cs.reference(space, cs.GROUPS[group])
    failures = []
    for seed, fraction in cs.kill_plan(cs.group_seed(SEED, group), KILLS):
        k = cs.run_planned(space, ref, seed, fraction)
        if not k.converged:
            failures.append(f"{k.replay()} (replay: {k.replay_command()}):\n    " + "\n    ".join(k.problems))
    assert not failures, f"{len(failures)}/{KILLS} kills did not converge:\n" + "\n".join(failures)


def test_every_command_of_issue_21_has_a_group():
    """spawn, start, done (clean and conflicting rebase), approve, request-changes, merge, merge --all (with --check,
    with --batch), cancel --cleanup (with --force), retry, hooks install/uninstall, init: each is killed."""
    covered = {g for names in cs.COMMANDS.values() for g in names}
    assert covered <= set(cs.GROUPS) and set(cs.GROUPS) <= covered
    argv = {" ".join(g.argv) for g in cs.GROUPS.values()}
    for words in (("spawn",), ("start",), ("done",), ("approve",), ("request-changes",), ("merge", "t1"),
                  ("merge", "--all"), ("--all", "--check"), ("--batch",), ("cancel", "--cleanup"),
                  ("--cleanup", "--force"), ("retry",), ("hooks", "install"), ("hooks", "uninstall"), ("init",)):
        assert any(all(w in a.split() for w in words) for a in argv), words
    assert {g.expect for g in cs.GROUPS.values() if "done" in g.argv} == {0, 6}  # clean and conflicting rebases


@pytest.mark.timeout(300)
def test_bench_crash_resumes_from_its_out_file_and_prints_the_table(tmp_path):
    """bench/crash.py appends every kill to --out; run again with the same --out it only prints the table."""
    import subprocess
    import sys

    bench = cs.rs.ROOT / "bench" / "crash.py"
    out = tmp_path / "crash.jsonl"
    argv = [sys.executable, str(bench), "--kills", "2", "--groups", "approve", "--seed", "5", "--out", str(out)]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 to go" in first.stdout and "approve" in first.stdout and "2/2" in first.stdout, first.stdout
    kills = [ln for ln in out.read_text(encoding="utf-8").splitlines() if '"group"' in ln]
    assert len(kills) == 2
    again = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 already in" in again.stdout and "0 to go" in again.stdout, again.stdout
    assert "2/2" in again.stdout, again.stdout
    assert (tmp_path / "crash.jsonl.table.txt").read_text(encoding="utf-8").count("approve") >= 2
    other = subprocess.run([*argv[:-4], "--seed", "6", "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert other.returncode != 0 and "not kills=2 seed=6" in other.stderr + other.stdout
