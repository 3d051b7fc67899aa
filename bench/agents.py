#!/usr/bin/env python3
"""Benchmark of the workflow runner against the real agent CLIs (issue 11). Prints figures; asserts nothing.

For each real CLI the real-agent contract suite installs (tests/test_real_agents.py), its
happy-path `git nerve run develop` on the scripted model (127.0.0.1) is run
through pytest with NERVE_BENCH_ROUNDS set; tests/real_agents.py appends each
run's JSON result there. Per round, the runner reports the agent process's own
time and ``overhead_s``: everything else it did for that round (prompt and
prompt file, spawning the CLI, git before and after, extraction, the thread
append). Printed: one row per CLI and role, and the overhead's share.

Run from the repository root with the venv's interpreter:
    .venv/bin/python bench/agents.py [CLI ...]      (default: every CLI in tests/agent_drivers.py)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.agent_drivers import DRIVERS

    wanted = sys.argv[1:] or sorted(DRIVERS)
    with tempfile.TemporaryDirectory(prefix="nerve-bench-agents-") as tmp:
        out = Path(tmp) / "rounds.jsonl"
        env = dict(os.environ, NERVE_BENCH_ROUNDS=str(out))
        for name in wanted:
            subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "tests/test_real_agents.py",
                 "-k", f"test_develop_completes and {name}"],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        runs = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    if not runs:
        print("no run recorded: are the real CLIs installable here (npm, pip)? see `pytest -m real -rs`")
        return
    print(f"{'CLI':<10} {'role':<9} {'agent s':>8} {'runner ms':>10} {'share':>7}")
    for run in runs:
        adapter = run.get("adapter", "?")
        for r in run.get("rounds", []):
            agent = max(r.get("duration_s", 0.0), 1e-9)
            over = r.get("overhead_s", 0.0)
            print(f"{adapter:<10} {r['role']:<9} {agent:>8.1f} {over * 1000:>10.0f} {over / (agent + over):>7.1%}")
    overheads = [r.get("overhead_s", 0.0) * 1000 for run in runs for r in run.get("rounds", [])]
    print(f"runner overhead per round: median {statistics.median(overheads):.0f} ms, max {max(overheads):.0f} ms "
          f"over {len(overheads)} rounds")


if __name__ == "__main__":
    main()
