"""Shared mode (issue 24): steady work of three machines (each its own `nerve.machine`) through `git daemon` on
127.0.0.1, background syncs on: spawn, start, commit, heartbeat, done, cancel, approve and merge over several
tasks, interleaved with syncs; then, after a final sync on every machine, the invariants: every claim chain
linear, one owner per task, events produced = events ingested on every machine (0 lost, 0 duplicated), every
machine's view equal, and the finished tasks' claims archived."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fixtures.repos import build
from tests import shared_support as ss
from tests.shared_support import daemon  # noqa: F401  (the fixture)


_row = ss.row


def _quiet(work: Path) -> None:
    """Wait until no background sync runs or waits here (they publish and archive on their own)."""
    from git_nerve import locks
    from git_nerve.shared.background import lock_paths

    common = Path(build.git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    deadline = time.monotonic() + 60
    while any(locks.is_held(p) for p in lock_paths(common)) and time.monotonic() < deadline:
        time.sleep(0.1)


def _chains(bare: Path) -> dict[str, list[dict]]:
    """{task: its claim chain} of every task, live or archived (the newest tip of each)."""
    tips = {ref.rsplit("/", 1)[1]: sha for ref, sha in (ln.split() for ln in build.git(
        bare, "for-each-ref", "--format=%(refname) %(objectname)", "refs/nerve/claims/").splitlines())}
    for ref in build.git(bare, "for-each-ref", "--format=%(refname)", "refs/nerve/finished/").split():
        for s in build.git(bare, "rev-list", "--first-parent", "--reverse", ref).split():
            for d in map(json.loads, build.git(bare, "show", f"{s}:finished.jsonl").splitlines()):
                tips.setdefault(d["task"], d["tip"])
    out = {}
    for task, tip in tips.items():
        assert build.git(bare, "rev-list", "--merges", tip) == "", task  # linear
        out[task] = [json.loads(build.git(bare, "show", f"{s}:record.json"))
                     for s in build.git(bare, "rev-list", "--reverse", tip).split()]
    return out


def test_steady_work_of_three_machines_keeps_every_invariant(tmp_path, daemon):
    machines = ["a", "b", "c"]
    works = dict(zip(machines, ss.team(tmp_path, daemon.url("project.git"), machines)))
    plan = {m: [f"{m}-{k}" for k in range(3)] for m in machines}
    for step in range(5):
        for m, w in works.items():
            for i, task in enumerate(plan[m]):
                if step == 0:
                    ss.ok(["worker", "spawn", task, "-d", f"work {task}"], w)
                elif step == 1:
                    ss.ok(["worker", "start", "--task", task], w)
                elif step == 2:
                    build.commit_file(Path(_row(w, task).worktree), f"{task}.txt", f"{task}\n")
                    ss.ok(["worker", "heartbeat", "--task", task, "--status", "committed"], w)
                elif step == 3 and i == 2:
                    ss.ok(["worker", "cancel", task], w)
                elif step == 3:
                    ss.ok(["worker", "done", "--task", task], w)
                elif step == 4 and i == 0 and m == "a":
                    ss.ok(["worker", "approve", task], w)
                    ss.ok(["worker", "merge", task], w)
            ss.ok(["nerve", "post", "--task", plan[m][0], "--role", "tester", f"step {step} on {m}"], w)
            if (step + machines.index(m)) % 2:
                ss.ok(["nerve", "sync"], w)  # in the middle of the others' work
    for _ in range(2):  # the final sync on every machine (twice: each sees what the others published last)
        for w in works.values():
            _quiet(w)
            ss.ok(["nerve", "sync"], w)
    for w in works.values():
        _quiet(w)
    from git_nerve.bus import shared as cache

    chains = _chains(daemon.base / "project.git")
    assert sorted(chains) == sorted(t for ts in plan.values() for t in ts)
    for m, tasks in plan.items():
        for task in tasks:
            chain = chains[task]
            assert chain and {r["owner"] for r in chain} == {m}  # one owner, never another
            assert [r["seq"] for r in chain] == list(range(1, len(chain) + 1))
            assert [_row(w, task) is not None for w in works.values()] == [o == m for o in machines]
    assert chains["a-0"][-1]["state"] == "COMPLETED" and all(chains[f"{m}-2"][-1]["state"] == "FAILED" for m in machines)
    produced = {}
    for m, w in works.items():
        with ss.bus(w) as b:
            produced[m] = cache.local_count(b.conn)
    for m, w in works.items():
        with ss.bus(w) as b:
            assert cache.event_counts(b.conn) == {o: produced[o] for o in machines if o != m}, m  # 0 lost, 0 dup
    views = [sorted((r["task_id"], r["state"], r["machine"]) for r in json.loads(ss.ok(["worker", "status", "--json"], w).stdout))
             for w in works.values()]
    assert all(v == views[0] for v in views) and len(views[0]) == 9, json.dumps(views)
    assert {t: s for t, s, _ in views[0]} == {t: c[-1]["state"] for t, c in chains.items()}
    live = build.git(daemon.base / "project.git", "for-each-ref", "--format=%(refname)", "refs/nerve/claims/").split()
    assert sorted(r.rsplit("/", 1)[1] for r in live) == sorted(t for t, c in chains.items()
                                                               if c[-1]["state"] not in ("COMPLETED", "FAILED"))
