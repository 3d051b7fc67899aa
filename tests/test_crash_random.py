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


#: Groups with a known kill window that does not converge yet (each names its replay); bench/reliability
#: still runs them, and the closing note of the session that left them says what is open.
KNOWN_OPEN: set[str] = set()


@pytest.mark.timeout(900)  # 15 kills of a 1-7 s command, each with a rerun: ~1-2 min quiet, far more on a loaded box
@pytest.mark.parametrize("group", [g for g in cs.GROUPS if g not in KNOWN_OPEN])
def test_random_kill_then_rerun_converges(group, tmp_path):
    space = cs.Workspace(tmp_path / "crash")
    ref = cs.reference(space, cs.GROUPS[group])
    failures = []
    for seed, fraction in cs.kill_plan(cs.group_seed(SEED, group), KILLS):
        k = cs.run_planned(space, ref, seed, fraction)
        if not k.converged:
            failures.append(f"{k.replay()} (replay: {k.replay_command()}):\n    " + "\n    ".join(k.problems))
    assert not failures, f"{len(failures)}/{KILLS} kills did not converge:\n" + "\n".join(failures)
