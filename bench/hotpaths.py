#!/usr/bin/env python3
"""The agent-facing hot paths against their floors (issue 27), side by side in one run; prints, asserts nothing.

In a worker's worktree of a fresh repository, runs interleaved (one of each per round, ``--runs`` rounds):

1. the notes hook with nothing pending: the command the claude adapter installs (its sh gate), run the way
   Claude Code runs it (``/bin/sh -c``, the hook JSON on stdin), against ``sh -c :`` and ``python -c pass``;
   and, for scale, the Python hook behind it (``git-nerve notes --hook claude``)
2. ``git worker heartbeat`` against ``python -c pass``
3. ``git nerve mcp``: start the real server over stdio, send ``initialize``, time to its answer, against
   ``python -c pass`` (the SDK's answer recorded by a first start, as after any earlier run in the repository);
   the first start (no record yet) once, for scale
4. the readers an orchestrator polls: ``git worker status --json`` and ``git worker conflicts --json`` (three
   tasks, each with a commit its hook spooled), against ``python -c pass``

Medians of wall time and of the child's CPU time (user + sys: less sensitive to a busy machine; none for the
MCP server, ended once it answered) with their ratios to the floor. Goals: notes hook <= 10 ms, heartbeat <= 3 x python -c pass, initialize <= 300 ms.

    .venv/bin/python bench/hotpaths.py [--runs 20] [--only status,conflicts]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import plain_env  # noqa: E402

BIN = Path(sys.executable).parent
PAYLOAD = json.dumps({"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
                      "tool_response": {"stdout": "a\nb\n" * 200}})
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(argv: list[str], cwd: Path, env: dict, stdin: str = "") -> tuple[float, float]:
    """(wall, cpu) seconds of one command run to its end."""
    c0, t0 = _cpu(), time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if proc.returncode != 0 or proc.stderr:
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall, cpu


def mcp_initialize(wt: Path, env: dict, *, finish: bool = False) -> tuple[float, float]:
    """(wall, nan) from starting `git nerve mcp` to its answer to initialize. The server is then ended (its
    SDK still loading: the machine is shared), unless ``finish`` (the first start, which records the answer)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "git-nerve"), "mcp"], cwd=wt, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write((INIT + "\n").encode())
    proc.stdin.flush()
    answer = proc.stdout.readline()
    wall = time.perf_counter() - t0
    if not finish:
        proc.kill()
    proc.stdin.close()
    proc.wait(timeout=60)
    if b'"result"' not in answer:
        raise SystemExit(f"no answer to initialize: {answer!r} {proc.stderr.read()!r}")
    return wall, float("nan")


def setup(root: Path, env: dict) -> tuple[Path, Path, str]:
    work = root / "project"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True, env=env)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "init"], cwd=work, check=True, env=env)
    subprocess.run([str(BIN / "git-nerve"), "init"], cwd=work, check=True, env=env, capture_output=True)
    for task in ("t1", "t2", "t3"):
        subprocess.run([str(BIN / "git-worker"), "spawn", task, "-d", "bench"], cwd=work, check=True, env=env,
                       capture_output=True)
    shown = subprocess.run([str(BIN / "git-worker"), "show", "t1", "--json"], cwd=work, env=env, check=True,
                           capture_output=True, text=True).stdout
    wt = Path(json.loads(shown)["worker"]["worktree"])
    for task in ("t1", "t2", "t3"):  # a commit each, through the hooks (spooled, ingested by the first reader)
        tree = wt.parent / task
        (tree / f"{task}.txt").write_text(task)
        subprocess.run(["git", "add", "."], cwd=tree, check=True, env=env)
        subprocess.run(["git", "commit", "-q", "-m", task], cwd=tree, check=True, env=env, capture_output=True)
    return work, wt, gate_command(wt)


def gate_command(wt: Path) -> str:
    """The notes hook command the claude adapter writes into a run's settings for task t1."""
    from git_nerve.paths import discover
    from git_nerve.workflow.adapters import claude
    from git_nerve.workflow.adapters.base import AgentContext, StartFrame
    from git_nerve.workflow.adapters.command import Invocation

    paths = discover(wt)
    start = StartFrame(task_id="t1", workflow="develop", content="bench", workdir=str(wt))
    inv = Invocation(argv=[], env={}, workdir=str(wt), tmpdir=str(wt), git_dir=str(paths.git_dir),
                     common_dir=str(paths.common_dir),
                     ctx=AgentContext(start=start, rounds=[], workdir=str(wt), task_id="t1"))
    command = claude.notes_command(inv)
    if not command or "notes-hook.sh" not in command:
        raise SystemExit(f"the adapter installs no sh gate: {command!r}")
    return command


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated words: only the cases naming one (the floors always)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-bench-hot-") as tmp:
        root = Path(tmp)
        env = plain_env(root)
        work, wt, gate = setup(root, env)
        first_mcp = mcp_initialize(wt, env, finish=True)  # records the SDK's answer (and warms the bytecode)
        run([str(BIN / "git-worker"), "status", "--json"], work, env)  # warms its bytecode
        cases = {
            "sh -c :": lambda: run(["/bin/sh", "-c", ":"], wt, env),
            "python -c pass": lambda: run([sys.executable, "-c", "pass"], wt, env),
            "notes hook, nothing pending (sh gate)": lambda: run(["/bin/sh", "-c", gate], wt, env, PAYLOAD),
            "notes hook in Python (behind the gate)": lambda: run(
                [str(BIN / "git-nerve"), "notes", "--hook", "claude"], wt, env, PAYLOAD),
            "git worker heartbeat": lambda: run([str(BIN / "git-worker"), "heartbeat"], wt, env),
            "git nerve mcp: initialize answered": lambda: mcp_initialize(wt, env),
            "git worker status --json": lambda: run([str(BIN / "git-worker"), "status", "--json"], work, env),
            "git worker conflicts --json": lambda: run([str(BIN / "git-worker"), "conflicts", "--json"], work, env),
        }
        words = [w for w in args.only.split(",") if w]
        cases = {name: fn for name, fn in cases.items()
                 if name in ("sh -c :", "python -c pass") or not words or any(w in name for w in words)}
        got: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, fn in cases.items():
                got[name].append(fn())
        report(got, first_mcp, args.runs)


def report(got: dict, first_mcp: tuple[float, float], runs: int) -> None:
    med = {name: (statistics.median(w for w, _ in xs), statistics.median(c for _, c in xs)) for name, xs in got.items()}
    py, sh = med["python -c pass"], med["sh -c :"]
    print(f"agent hot paths, {runs} interleaved runs each: medians (wall ms, cpu ms) and ratios to the floor")
    print(f"{'':40s} {'wall':>8s} {'cpu':>7s}   {'x python -c pass (wall/cpu)':>28s}   {'x sh -c : (wall)':>16s}")
    for name, (wall, cpu) in med.items():
        print(f"{name:40s} {wall * 1000:8.1f} {cpu * 1000:7.1f}   {wall / py[0]:13.2f} / {cpu / py[1]:5.2f}   "
              f"{wall / sh[0]:16.2f}")
    wall, cpu = first_mcp
    print(f"{'git nerve mcp: first start (no record)':40s} {wall * 1000:8.1f} {cpu * 1000:7.1f}   "
          f"{wall / py[0]:13.2f} / {cpu / py[1]:5.2f}   (once)")
    print("goals: notes hook <= 10 ms; heartbeat <= 3 x python -c pass; initialize <= 300 ms")


if __name__ == "__main__":
    main()
