#!/usr/bin/env python3
"""Random SIGKILLs of every state-changing command, each followed by a rerun and every invariant (issue 21).

    bench/crash.py --kills 2000 --jobs 2 --seed 1 --out crash.jsonl      # ~30-60 min on 2 cores
    bench/crash.py --kills 2000 --jobs 2 --seed 1 --out crash.jsonl      # again: resumes where it stopped
    bench/crash.py --kills 110 --jobs 1 --groups retry,done-conflict     # a sample of some commands
    bench/crash.py --replay done-conflict:705034:0.772225                # one kill again, its problems shown

Each kill (tests/crash_support.py): a fresh copy of the command's starting state, the command started in its own
process group and the whole group (git children and hooks too) SIGKILLed, at a random instant over its measured
duration, or inside a git child at the k-th ref transaction (git holding its lock files) or the k-th file a
checkout writes; then the same command runs again and the checks follow: it ends as an uninterrupted run does,
every commit reachable before (or recorded on the bus) still reachable, `git worker status` agreeing with the bus,
branches agreeing with origin as after an uninterrupted run, no orphan branch / worktree / lock file / temporary
checkout, no staged deletion, the bus passing PRAGMA integrity_check, fsck, fetch and `git worktree list` working.

The kills are spread evenly over the groups and handed out round-robin in chunks, so a partial run covers every
command. Every kill is appended to --out (JSON lines) as it finishes; rerun with the same --out, --kills and --seed
to go on from there. Prints converged/total per group and per command, the replay of every kill that did not
converge, and the wall time; the table also goes to <out>.table.txt. Exits 1 when any kill did not converge.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/ itself (sys.path[0]) holds queue.py, which would shadow the standard library's for pygit2
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


def _ensure_interpreter() -> None:
    try:
        import click  # noqa: F401
        import pygit2  # noqa: F401
    except ImportError:
        if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != VENV_PYTHON.parent.parent.resolve():
            os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), __file__, *sys.argv[1:]])
        raise SystemExit("bench/crash.py: needs git-nerve's dependencies (run it with the project's venv python)")


def _prepare(tmp: Path) -> None:
    """Bytecode written once, this checkout's modules and commands first, a hermetic environment."""
    import compileall

    compileall.compile_dir(str(ROOT / "git_nerve"), quiet=2)
    for path in (ROOT / "tests", ROOT):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    from fixtures.repos import build

    env = build.hermetic_env(tmp / "home")
    env.pop("NERVE_DEBUG", None)  # users see one error line, not a traceback
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    os.environ.clear()
    os.environ.update(env)


def _load(out: Path, kills: int, seed: int) -> dict[tuple[str, int], dict]:
    """The kills an earlier run with the same --kills and --seed already recorded in ``out``."""
    done: dict[tuple[str, int], dict] = {}
    if not out.exists():
        return done
    for line in out.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut off by a kill of this script
        if rec.get("run") is not None:
            if rec["run"] != {"kills": kills, "seed": seed}:
                raise SystemExit(f"bench/crash.py: {out} holds a run with {rec['run']}, not kills={kills} seed={seed}; "
                                 "give another --out")
            continue
        if "group" in rec and "seed" in rec:
            done[(rec["group"], rec["seed"])] = rec
    return done


def _table(records: list[dict], groups: list[str], seconds: float, jobs: int, resumed: int) -> list[str]:
    import crash_support as cs

    per: dict[str, list[int]] = {g: [0, 0, 0] for g in groups}
    for r in records:
        c = per.setdefault(r["group"], [0, 0, 0])
        c[0] += not r["problems"]
        c[1] += 1
        c[2] += bool(r["killed"])
    lines = [f"{'group':24s} {'converged':>11s}  killed mid-run"]
    for g in groups:
        c, t, k = per[g]
        lines.append(f"{g:24s} {c:>5d}/{t:<5d}  {k}")
    lines.append("")
    lines.append(f"{'command (issue 21)':28s} {'converged':>11s}")
    for command, names in cs.COMMANDS.items():
        c = sum(per[n][0] for n in names if n in per)
        t = sum(per[n][1] for n in names if n in per)
        if t:
            lines.append(f"{command:28s} {c:>5d}/{t:<5d}")
    total = sum(c for c, _, _ in per.values())
    count = sum(t for _, t, _ in per.values())
    modes: dict[str, int] = {}
    for r in records:
        modes[r.get("mode", "instant")] = modes.get(r.get("mode", "instant"), 0) + 1
    lines.append(f"{'total':28s} {total:>5d}/{count:<5d}  (by instant: {modes})")
    lines.append(f"wall time {seconds:.0f} s with {jobs} process(es)"
                 + (f" (this run; {resumed} kills came from the earlier run in --out)" if resumed else ""))
    return lines


def replay(spec: str, tmp: Path) -> int:
    import crash_support as cs

    try:
        group, seed, fraction = spec.split(":")
        seed_n, frac = int(seed), float(fraction)
    except ValueError:
        print("bench/crash.py: --replay takes GROUP:SEED:FRACTION (as a NOT CONVERGED line prints it)", file=sys.stderr)
        return 2
    if group not in cs.GROUPS:
        print(f"bench/crash.py: no group {group!r} (groups: {', '.join(cs.GROUPS)})", file=sys.stderr)
        return 2
    space = cs.Workspace(tmp / "crash")
    ref = cs.reference(space, cs.GROUPS[group])
    k = cs.run_planned(space, ref, seed_n, frac)
    print(f"{k.replay()}: {'converged' if k.converged else 'NOT CONVERGED'} (killed mid-run: {k.killed})")
    for p in k.problems:
        print(f"  {p}")
    return 0 if k.converged else 1


def main() -> int:
    parser = argparse.ArgumentParser(description="Random kills of every git-nerve command, rerun, invariants checked.")
    parser.add_argument("--kills", type=int, default=2000, help="kills in all, spread over the groups (default 2000)")
    parser.add_argument("--jobs", type=int, default=1, help="processes sharing the kills (default 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--groups", help="comma-separated groups (default: every one; see tests/crash_support.GROUPS)")
    parser.add_argument("--out", type=Path, help="JSON lines of every kill (appended; resumes a run with the same "
                                                  "--kills and --seed); the table goes to <out>.table.txt")
    parser.add_argument("--chunk", type=int, default=5, help="kills handed to a process at a time (default 5)")
    parser.add_argument("--replay", metavar="GROUP:SEED:FRACTION", help="run one kill again and show its problems")
    parser.add_argument("--keep", action="store_true", help="keep the temporary repositories")
    args = parser.parse_args()

    _ensure_interpreter()
    tmp = Path(tempfile.mkdtemp(prefix="nerve-crash-"))
    try:
        _prepare(tmp)
        if args.replay:
            return replay(args.replay, tmp)
        return sweep(args, tmp)
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            from git_nerve.git import destroy

            destroy.remove_own_tempdir(tmp, prefix="nerve-crash-")  # through the one door, like every removal


def sweep(args, tmp: Path) -> int:
    import crash_support as cs

    groups = args.groups.split(",") if args.groups else list(cs.GROUPS)
    unknown = [g for g in groups if g not in cs.GROUPS]
    if unknown:
        print(f"bench/crash.py: no group {', '.join(unknown)} (groups: {', '.join(cs.GROUPS)})", file=sys.stderr)
        return 2
    per = max(1, -(-args.kills // len(groups)))
    done = _load(args.out, args.kills, args.seed) if args.out else {}
    out = None
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        fresh = not args.out.exists()
        out = args.out.open("a", encoding="utf-8")
        if fresh:
            out.write(json.dumps({"run": {"kills": args.kills, "seed": args.seed}}) + "\n")
            out.flush()
    plans = {g: [p for p in cs.kill_plan(cs.group_seed(args.seed, g), per) if (g, p[0]) not in done] for g in groups}
    chunks = {g: [plans[g][i:i + args.chunk] for i in range(0, len(plans[g]), args.chunk)] for g in groups}
    rounds = []
    while any(chunks.values()):
        for g in groups:
            if chunks[g]:
                rounds.append((g, chunks[g].pop(0)))
    records = [r for (g, _), r in done.items() if g in groups]
    todo = sum(len(p) for _, p in rounds)
    print(f"crash: {per} kills for each of {len(groups)} groups (seed {args.seed}, {args.jobs} process(es)); "
          f"{len(records)} already in {args.out}, {todo} to go", flush=True)
    t0 = time.monotonic()
    finished = 0

    def report(group: str, kills: list, seconds: float) -> None:
        nonlocal finished
        for k in kills:
            rec = {"group": k.group, "seed": k.seed, "fraction": k.fraction, "mode": k.mode, "delay": k.delay,
                   "killed": k.killed, "problems": k.problems, **({"pattern": k.pattern} if k.pattern else {})}
            records.append(rec)
            if out is not None:
                out.write(json.dumps(rec) + "\n")
            if not k.converged:
                print(f"  NOT CONVERGED {k.replay()}: {k.problems[0]}\n    replay: {k.replay_command()}", flush=True)
        if out is not None:
            out.flush()
        finished += len(kills)
        mine = [r for r in records if r["group"] == group]
        ok = sum(not r["problems"] for r in mine)
        elapsed = time.monotonic() - t0
        eta = elapsed / finished * (todo - finished) if finished else 0
        print(f"  [{finished}/{todo}, {elapsed:.0f} s, ~{eta / 60:.0f} min left] {group:22s} converged {ok}/{len(mine)} "
              f"(the command takes {seconds:.2f} s)", flush=True)

    try:
        if args.jobs <= 1:
            for g, part in rounds:
                report(g, *cs._run_chunk(str(tmp / "crash"), g, part))
        else:
            import concurrent.futures as cf
            import multiprocessing

            with cf.ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
                futures = {pool.submit(cs._run_chunk, str(tmp / "crash"), g, part): g for g, part in rounds}
                for fut in cf.as_completed(futures):
                    report(futures[fut], *fut.result())
    finally:
        if out is not None:
            out.close()
    seconds = time.monotonic() - t0
    lines = _table(records, groups, seconds, args.jobs, len(done))
    failed = [r for r in records if r["problems"]]
    if failed:
        lines.append("")
        lines.append(f"{len(failed)} kill(s) did not converge:")
        for r in failed:
            lines.append(f"  bench/crash.py --replay {r['group']}:{r['seed']}:{r['fraction']!r}  ({r['mode']}): "
                         f"{r['problems'][0][:300]}")
    print()
    print("\n".join(lines), flush=True)
    if args.out:
        Path(f"{args.out}.table.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
