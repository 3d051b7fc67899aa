#!/usr/bin/env python3
"""The CPU an agent-facing command spends alone (issue 27). Prints, asserts nothing.

Under load (24-64 workers on 2 cores) a command's wall time is almost all waiting for a CPU, so its p99 scales
with its own CPU time (bench/waits.py); most of that was starting Python and importing modules. Each command
alone, interleaved with ``python -c pass`` (the floor) and, with ``--before SRC``, the same command run with the
git-nerve whose source tree is SRC (a checkout of an older commit, on PYTHONPATH): median CPU (user + system,
its git children included) and wall time, their ratios to the floor and to before, side by side in one run.
`status --json`, `show T --json` and `conflicts --json` (the radar's last result) each twice: answered by the
clone's warm reader (git_nerve/warm: the command's own CPU, then the server's per answer, from /proc where there is
one) and directly (NERVE_WARM=0).

The agent's loop (issue 37): `git nerve thread` (a task with a description and a knowledge index: its briefing and
where-to-look line), `git worker heartbeat` and `git nerve knowledge query` against their goals (<= 3x, 3x, 4x
`python -c pass`, wall and CPU medians), and the MCP server's first `tools/list`: milliseconds from the start of
`git nerve mcp` to the answer (initialize, initialized and tools/list sent at once; the SDK's answers recorded by a
first start, as after any earlier run in the repository), goal <= 300 ms.

    .venv/bin/python bench/startup.py [--runs 15] [--before /tmp/old-checkout] [--mcp-runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import hermetic  # noqa: E402
from fixtures.repos import build  # noqa: E402

HOOK = ("import sys; sys.path[:] = [p for p in sys.path if p] + [sys.argv[1]]; "
        "from git_nerve.hooks.run import main; sys.exit(main(sys.argv[2:]))")


def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(wall, CPU) seconds of one run, its children's CPU included."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    took = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return took, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def setup(root: Path, env: dict) -> tuple[Path, Path, Path]:
    """A repository, a WORKING task (start, heartbeat, show run on it) and an IN_REVIEW one (done runs on it)."""
    work = build.many_files(root, 300).work
    subprocess.run(["git", "config", "nerve.knowledge", "true"], cwd=work, env=env, check=True)  # the default
    for task in ("solo", "finished", "third", "fourth"):  # four live tasks: the clone gets a warm reader
        subprocess.run(["git", "worker", "spawn", task, "--no-fetch"], cwd=work, env=env, check=True, capture_output=True)
    wt, wt_done = (work.parent / f"{work.name}.worktrees" / t for t in ("solo", "finished"))
    for where in (wt, wt_done):
        subprocess.run(["git", "worker", "start"], cwd=where, env=env, check=True, capture_output=True)
    subprocess.run(["git", "worker", "done", "--allow-empty"], cwd=wt_done, env=env, check=True, capture_output=True)
    # the view spawn started in the background, made now for certain (an older git-nerve made none at spawn)
    subprocess.run(["git", "nerve", "knowledge", "sync"], cwd=wt, env=env, check=True, capture_output=True)
    subprocess.run(["git", "nerve", "post", "--role", "coder", "--meta", "step=1", "looked at the module"], cwd=wt,
                   env=env, check=True, capture_output=True)
    # the radar computed once: `conflicts --json` then reads its result (served; a recompute never is)
    subprocess.run(["git", "worker", "conflicts", "--refresh"], cwd=work, env=env, check=True, capture_output=True)
    return work, wt, wt_done


def cases(work: Path, wt: Path, wt_done: Path, src: Path) -> dict[str, tuple[Path, list[str], dict]]:
    """name: (cwd, argv, extra env); the post-commit hook's Python part as its shim starts it (in the background,
    when other workers exist)."""
    return {
        "start (already WORKING)": (wt, ["git", "worker", "start"], {}),
        "start --json": (wt, ["git", "worker", "start", "--json"], {}),
        "done (already IN_REVIEW)": (wt_done, ["git", "worker", "done"], {}),
        "heartbeat": (wt, ["git", "worker", "heartbeat"], {}),
        "thread": (wt, ["git", "nerve", "thread"], {}),
        "knowledge query": (wt, ["git", "nerve", "knowledge", "query", "module function"], {}),
        "status --json (direct)": (work, ["git", "worker", "status", "--json"], {"NERVE_WARM": "0"}),
        "status --json (served)": (work, ["git", "worker", "status", "--json"], {}),
        "show T --json (direct)": (work, ["git", "worker", "show", "solo", "--json"], {"NERVE_WARM": "0"}),
        "show T --json (served)": (work, ["git", "worker", "show", "solo", "--json"], {}),
        "conflicts --json (direct)": (work, ["git", "worker", "conflicts", "--json"], {"NERVE_WARM": "0"}),
        "conflicts --json (served)": (work, ["git", "worker", "conflicts", "--json"], {}),
        "post-commit hook (Python)": (wt, [sys.executable, "-S", "-c", HOOK, str(src), "post-commit"],
                                      {"NERVE_HOOK_BACKGROUND": "1"}),
    }


def warm_reader(work: Path, env: dict) -> int | None:
    """Start the clone's warm reader (a direct `status --json` does, at four live tasks) and wait until it answers;
    its pid (None when it did not start: e.g. a socket path too long)."""
    from git_nerve import locks

    lock = work / ".git" / "nerve" / "locks" / "warm.lock"
    subprocess.run(["git", "worker", "status", "--json"], cwd=work, env=env, check=True, capture_output=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if locks.is_held(lock) and (work / ".git" / "nerve" / "warm.sock").exists():
            return locks.holder(lock)
        time.sleep(0.05)
    print("(no warm reader started: the served figures are direct ones)")
    return None


#: the agent loop's goals (issue 37): ratio to `python -c pass`
GOALS = {"thread": 3.0, "heartbeat": 3.0, "knowledge query": 4.0}
MCP_GOAL_MS = 300.0
MCP_SESSION = b"".join(json.dumps(m).encode() + b"\n" for m in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))


def mcp_first_tools_list(wt: Path, env: dict) -> float:
    """Seconds from the start of `git nerve mcp` to its answer to the first tools/list."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(["git", "nerve", "mcp"], cwd=wt, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    proc.stdin.write(MCP_SESSION)
    proc.stdin.flush()
    took = None
    for line in proc.stdout:
        if json.loads(line).get("id") == 2:
            took = time.perf_counter() - t0
            break
    proc.stdin.close()
    proc.stdout.read()
    proc.wait(timeout=60)
    if took is None:
        raise SystemExit("git nerve mcp gave no answer to tools/list")
    return took


def mcp_figures(wt: Path, sides: dict, runs: int) -> None:
    """The MCP server's first tools/list, each side's median (a first start records the SDK's answers)."""
    for side, (_, side_env) in sides.items():
        mcp_first_tools_list(wt, side_env)  # the recording start
        times = [mcp_first_tools_list(wt, side_env) for _ in range(runs)]
        ms = statistics.median(times) * 1000
        print(f"  MCP first tools/list ({side}): median {ms:6.1f} ms of {runs} starts, goal <= {MCP_GOAL_MS:.0f} ms: "
              f"{'met' if ms <= MCP_GOAL_MS else 'NOT met'}")


def goals(med: dict, floor: tuple[float, float], sides: dict) -> None:
    """The agent loop's commands against their goals, as ratios of wall and CPU medians to `python -c pass`."""
    for name, goal in GOALS.items():
        for side in sides:
            w, c = med[(name, side)]
            ok = "met" if w / floor[0] <= goal and c / floor[1] <= goal else "NOT met"
            print(f"  {name + ' (' + side + ')':<27} wall {w / floor[0]:5.2f}x  cpu {c / floor[1]:5.2f}x  goal <= {goal:g}x: {ok}")


def server_cpu(pid: int | None) -> float:
    """Seconds of CPU the process ``pid`` has used (Linux /proc; -1 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return -1.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--before", type=Path, help="the source tree of the git-nerve to compare with")
    ap.add_argument("--mcp-runs", type=int, default=7, help="starts of `git nerve mcp` timed (0: none)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-startup-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        env = hermetic(root)
        work, wt, wt_done = setup(root, env)
        server = warm_reader(work, env)
        sides = {"now": (ROOT, env)}
        if args.before:
            sides["before"] = (args.before.resolve(), {**env, "PYTHONPATH": str(args.before.resolve())})
        server_cpu_at_start = server_cpu(server) if server is not None else 0.0
        t: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):  # interleaved: drift on the shared machine hits every figure alike
            t.setdefault(("pass", ""), []).append(timed([sys.executable, "-c", "pass"], work, env))
            for side, (src, side_env) in sides.items():
                for name, (cwd, argv, extra) in cases(work, wt, wt_done, src).items():
                    t.setdefault((name, side), []).append(timed(argv, cwd, {**side_env, **extra}))
        med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in t.items()}
        floor = med[("pass", "")]
        print(f"median of {args.runs}, interleaved; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; "
              f"python -c pass: cpu {floor[1] * 1000:5.1f} ms, wall {floor[0] * 1000:5.1f} ms")
        print(f"  {'command':<27} {'cpu ms':>7} {'wall ms':>8} {'cpu/pass':>9} {'wall/pass':>10}"
              + (f" | {'before cpu':>10} {'wall':>6} {'cpu/pass':>9} | {'cpu now/before':>14}" if args.before else ""))
        for name in cases(work, wt, wt_done, ROOT):
            w, c = med[(name, "now")]
            line = f"  {name:<27} {c * 1000:7.1f} {w * 1000:8.1f} {c / floor[1]:9.2f} {w / floor[0]:10.2f}"
            if args.before:
                bw, bc = med[(name, "before")]
                line += f" | {bc * 1000:10.1f} {bw * 1000:6.1f} {bc / floor[1]:9.2f} | {c / bc:14.2f}"
            print(line, flush=True)
        if server is not None:
            served = sum(len(v) for (name, _), v in t.items() if name.endswith("(served)"))
            spent = server_cpu(server) - server_cpu_at_start
            print(f"  warm reader (pid {server}): cpu {spent / max(served, 1) * 1000:5.1f} ms per answer "
                  f"({served} answers; /proc's clock ticks)" if spent >= 0 else "  warm reader: its CPU unknown here")
        print("the agent's loop (issue 37):")
        goals(med, floor, sides)
        if args.mcp_runs > 0:
            mcp_figures(wt, sides, args.mcp_runs)
        print(f"  (load average at the end {os.getloadavg()[0]:.1f})")
        if server is not None:
            try:
                os.kill(server, signal.SIGTERM)  # (it would stop anyway once its clone is removed)
            except ProcessLookupError:  # it stopped already (with --before: the other install's request stops it)
                pass


if __name__ == "__main__":
    main()
