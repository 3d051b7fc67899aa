"""What the reliability suites and ``bench/reliability`` share.

* Invariant checks on a real repository: the message log replays to the
  workers table, no orphan branch / worktree / bus row / lock / temp file,
  no commit lost.
* The stress run: N processes against one repository, each driving its own
  task through the whole lifecycle with real commits (hooks installed) while
  racing to transition the others' tasks.
* The fault cases: a command killed with SIGKILL at an injection point
  (``NERVE_FAULT``, see :mod:`git_nerve.faults`) or inside a git hook, then
  run again; the result must equal one uninterrupted run's.

Run as a script (``python tests/reliability_support.py drive ...``) it is one
stress process.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fixtures.repos import build
from tests import processes
from tests.waiting import wait_until

#: Exit codes a racing transition on another agent's task may end with.
RACE_CODES = {0, 3}
#: What must never reach a user's terminal.
LEAKS = ("database is locked", "sqlite_busy", "database table is locked", "traceback (most recent call last)")
#: Bus message kinds that only inform (liveness, records of what git did); a rerun may lack one
#: that the killed run would have written, without any state or work being lost.
INFORMATIONAL = frozenset({"heartbeat", "commit", "rewrite"})
#: Commit dates pinned for the fault cases, so that a faulted run and the reference run
#: produce byte-identical commits and their refs can be compared sha for sha.
FIXED_DATE = "2026-01-01T00:00:00+0000"


# -- processes --------------------------------------------------------------------------------------


@dataclass
class Proc:
    argv: list[str]
    code: int
    out: str
    err: str
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"argv": self.argv, "code": self.code, "out": self.out, "err": self.err, "seconds": round(self.seconds, 3)}


def run(argv: list[str], cwd: Path, *, env: dict | None = None, timeout: float = 300) -> Proc:
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env or dict(os.environ), text=True, capture_output=True, timeout=timeout,
                          check=False)
    return Proc(list(argv), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def leaks(text: str) -> list[str]:
    low = text.lower()
    return [leak for leak in LEAKS if leak in low]


def git(cwd: Path, *args: str) -> str:
    return build.git(cwd, *args)


@contextlib.contextmanager
def environ(**values: str | None) -> Iterator[None]:
    """Set (or, with None, unset) environment variables for the block."""
    old = {k: os.environ.get(k) for k in values}
    try:
        _put(values)
        yield
    finally:
        _put(old)


def _put(values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def fixed_dates() -> contextlib.AbstractContextManager:
    return environ(GIT_AUTHOR_DATE=FIXED_DATE, GIT_COMMITTER_DATE=FIXED_DATE)


# -- reading a repository -----------------------------------------------------------------------------


_COMMON_DIRS: dict[str, Path] = {}


def common_dir(work: Path) -> Path:
    """The repository's common dir (asked of git once per work tree path: checks call this many times)."""
    key = os.path.abspath(work)
    found = _COMMON_DIRS.get(key)
    if found is None or not found.is_dir():
        found = _COMMON_DIRS[key] = Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    return found


def bus_path(work: Path) -> Path:
    return common_dir(work) / "nerve" / "bus.db"


@contextlib.contextmanager
def bus_conn(work: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(bus_path(work), timeout=60)
    try:
        yield conn
    finally:
        conn.close()


def rows(work: Path) -> list:
    from git_nerve.bus import workers

    if not bus_path(work).exists():
        return []
    _ingest(work)
    with bus_conn(work) as conn:
        return workers.all_workers(conn)


def all_messages(work: Path) -> list:
    from git_nerve.bus import messages

    if not bus_path(work).exists():
        return []
    _ingest(work)
    with bus_conn(work) as conn:
        return messages.since(conn, 0)


def refs(cwd: Path) -> dict[str, str]:
    out = git(cwd, "for-each-ref", "--format=%(objectname) %(refname)")
    return {ref: sha for sha, ref in (line.split(" ", 1) for line in out.splitlines() if line)}


def worktree_list(work: Path) -> list[dict]:
    out = git(work, "worktree", "list", "--porcelain", "-z")
    items, cur = [], {}
    for part in out.split("\0"):
        if not part:
            if cur:
                items.append(cur)
                cur = {}
            continue
        key, _, value = part.partition(" ")
        cur[key] = value
    if cur:
        items.append(cur)
    return items


def dump_bus(work: Path) -> dict[str, list[tuple]]:
    """Every row of every table, to prove a refused command wrote nothing (after the spooled commits are in)."""
    path = bus_path(work)
    if not path.exists():
        return {}
    _ingest(work)
    with bus_conn(work) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: conn.execute(f'SELECT * FROM "{t}" ORDER BY rowid').fetchall() for t in tables}


def rebase_in_progress(wt: Path) -> bool:
    git_dir = Path(git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))
    return (git_dir / "rebase-merge").exists() or (git_dir / "rebase-apply").exists()


# -- invariants ------------------------------------------------------------------------------------------


def replay_problems(work: Path) -> list[str]:
    """The message log must replay, task by task, to exactly the workers table."""
    from git_nerve.worker.states import replay

    problems = []
    events: dict[str, list] = {}
    for m in all_messages(work):
        if m.kind == "task_assign":
            events.setdefault(m.task_id, []).append((m.kind, None, m.payload.get("to")))
        elif m.kind == "state_change":
            events.setdefault(m.task_id, []).append((m.kind, m.payload.get("from"), m.payload.get("to")))
    table = {w.task_id: w.state for w in rows(work)}
    for task_id in sorted(set(events) | set(table)):
        try:
            replayed = replay(events.get(task_id, []))
        except ValueError as exc:
            problems.append(f"{task_id}: the log does not replay: {exc}")
            continue
        if replayed != table.get(task_id):
            problems.append(f"{task_id}: the log replays to {replayed} but the table says {table.get(task_id)}")
    return problems


def lock_held(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def bus_writable_now(work: Path) -> bool:
    """True when a write transaction can start at once (no dead process holds SQLite's lock)."""
    path = bus_path(work)
    if not path.exists():
        return True
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def orphan_problems(work: Path, *, prefix: str = "feat/") -> list[str]:
    """Branches, worktrees, directories, locks and temporary files that belong to nothing."""
    problems = []
    common = common_dir(work)
    table = {w.task_id: w for w in rows(work)}
    by_branch = {w.branch: w for w in table.values()}
    live = {"ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED"}
    for ref in refs(work):
        if ref.startswith(f"refs/heads/{prefix}") and ref[len("refs/heads/"):] not in by_branch:
            problems.append(f"orphan branch {ref}: no task on the bus")
    registered = {}
    for item in worktree_list(work):
        path = item["worktree"]
        if "prunable" in item:
            problems.append(f"stale worktree registration {path}")
        registered[os.path.realpath(path)] = item
    task_paths = {os.path.realpath(w.worktree): w for w in table.values()}
    main = os.path.realpath(work)
    for path, item in registered.items():
        if path != main and path not in task_paths and "bare" not in item:
            problems.append(f"orphan worktree {path}: no task on the bus")
    for w in table.values():
        wt = Path(w.worktree)
        if w.state in live:
            if not wt.is_dir():
                problems.append(f"{w.task_id} is {w.state} but its worktree {wt} is missing")
            elif os.path.realpath(wt) not in registered:
                problems.append(f"{w.task_id}: {wt} exists but git does not know it as a worktree")
            if f"refs/heads/{w.branch}" not in refs(work):
                problems.append(f"{w.task_id} is {w.state} but its branch {w.branch} is missing")
    roots = {Path(w.worktree).parent for w in table.values()}
    for root in roots:
        if root.is_dir():
            for entry in root.iterdir():
                if os.path.realpath(entry) not in registered:
                    problems.append(f"orphan directory {entry}: not a registered worktree")
    for path in common.rglob("*"):
        rel = path.relative_to(common)
        if rel.parts[:2] == ("nerve", "locks"):
            if path.is_file() and lock_held(path):
                _quiet(work.parent)  # background work a command started (the radar's recompute) ends by itself
                if lock_held(path):
                    problems.append(f"lock {rel} is still held")
            continue
        if path.name.endswith(".lock") and path.is_file():
            problems.append(f"git lock file left behind: {rel}")
        elif path.name.endswith(".tmp") or (path.name.startswith("snapshot-") and path.name.endswith(".index")):
            problems.append(f"temporary file left behind: {rel}")
    if not bus_writable_now(work):
        problems.append("the bus write lock is held")
    return problems


def unreachable(cwd: Path, shas: list[str]) -> list[str]:
    """The shas no ref (branches, remotes, refs/nerve/archive/*, tags) reaches."""
    reachable = set(git(cwd, "rev-list", "--all").split())
    return [s for s in shas if s not in reachable]


def fsck_problems(cwd: Path) -> list[str]:
    proc = subprocess.run(["git", "fsck", "--no-progress", "--no-dangling"], cwd=cwd, capture_output=True, text=True,
                          check=False)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln and not ln.startswith("notice")]
    return lines if proc.returncode or lines else []


# -- stress -----------------------------------------------------------------------------------------------

_TRANSITION_LINE = re.compile(r"^[A-Z][A-Za-z ]*: (\S+) \((\w+) -> (\w+)\)$", re.MULTILINE)


def claimed(record: dict) -> list[tuple[str, str | None, str]]:
    """The transitions a successful command says it made: (task, from or None, to)."""
    if record["code"] != 0:
        return []
    out, argv = record["out"], record["argv"]
    found = [(m[1], m[2], m[3]) for m in _TRANSITION_LINE.finditer(out)]
    if argv[:2] == ["git", "worker"] and len(argv) > 2:
        cmd = argv[2]
        if cmd == "spawn" and out.startswith("Created worker: "):
            found.append((argv[3], None, "ASSIGNED"))
        elif cmd == "done" and re.search(r"^Ready for review: (\S+)$", out, re.MULTILINE):
            found.append((record["task"], None, "IN_REVIEW"))
        elif cmd == "merge":
            m = re.search(r"^Merged: (\S+) into ", out, re.MULTILINE)
            if m:
                found.append((m[1], "APPROVED", "COMPLETED"))
    return found


def drive(work: Path, index: int, procs: int, races: int, seed: int, out: Path) -> None:
    """One stress process: drive task s<index> to COMPLETED, racing ``races`` times on others' tasks."""
    rng = random.Random(seed * 1000 + index)
    task = f"s{index:03d}"
    records: list[dict] = []
    commits: list[str] = []

    def call(argv: list[str], cwd: Path, kind: str, about: str) -> Proc:
        p = run(argv, cwd)
        records.append({**p.as_dict(), "kind": kind, "task": about})
        return p

    def state_of(task_id: str) -> str | None:
        with bus_conn(work) as conn:
            row = conn.execute("SELECT state FROM workers WHERE task_id = ?", (task_id,)).fetchone()
        return row[0] if row else None

    def race() -> None:
        # the others are spawning at the same moment: wait for one to exist rather than skip the race
        deadline = time.monotonic() + 60
        while True:
            with bus_conn(work) as conn:
                others = conn.execute("SELECT task_id, state FROM workers WHERE task_id != ?", (task,)).fetchall()
            if others or procs < 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if not others:
            return
        other, state = rng.choice(others)
        # mostly the move that applies to the state just read (so that races are won as well as lost)
        fitting = {"ASSIGNED": "start", "IN_REVIEW": "approve", "APPROVED": "request-changes"}.get(state)
        verb = fitting if fitting and rng.random() < 0.7 else rng.choice(["approve", "request-changes", "start"])
        argv = ["git", "worker", verb, other] if verb != "start" else ["git", "worker", "start", "--task", other]
        if verb == "request-changes":
            argv += ["--comment", f"racer {task} wants changes"]
        call(argv, work, "race", other)

    race_at = sorted(rng.choice(range(8)) for _ in range(races))
    step = 0
    spawned = call(["git", "worker", "spawn", task, "-d", f"stress task {index}"], work, "own", task)
    wt = None
    if spawned.code == 0:
        for line in spawned.out.splitlines():
            if line.strip().startswith("Worktree:"):
                wt = Path(line.split(":", 1)[1].strip())
    commit_no = 0
    for step in range(40):
        while race_at and race_at[0] <= step:
            race_at.pop(0)
            race()
        if wt is None:
            break
        state = state_of(task)
        if state == "ASSIGNED":
            call(["git", "worker", "start"], wt, "own", task)
        elif state == "WORKING":
            commit_no += 1
            (wt / f"{task}.txt").write_text("".join(f"{task} line {i}\n" for i in range(commit_no + 1)), encoding="utf-8")
            p1 = call(["git", "add", f"{task}.txt"], wt, "own", task)
            subject = f"{task}: step {commit_no}"
            p2 = call(["git", "commit", "-q", "-m", subject], wt, "commit", task)
            if p1.code == 0 and p2.code == 0:
                commits.append(subject)
            call(["git", "worker", "heartbeat", "--status", f"step {commit_no}", "--progress", "0.5"], wt, "own", task)
            call(["git", "worker", "done"], wt, "own", task)
        elif state == "IN_REVIEW":
            call(["git", "worker", "approve", task, "--comment", "looks fine"], work, "own", task)
        elif state == "APPROVED":
            call(["git", "worker", "merge", task], work, "own", task)
        elif state == "CONFLICTED":
            call(["git", "rebase", "--abort"], wt, "own", task)
            call(["git", "worker", "start"], wt, "own", task)
        else:
            break
    for _ in race_at:
        race()
    out.write_text(json.dumps({"task": task, "records": records, "commits": commits, "steps": step + 1}), encoding="utf-8")


@dataclass
class StressReport:
    procs: int
    tasks: int = 0
    commands: int = 0
    transitions: int = 0
    races: int = 0
    races_refused: int = 0
    commits: int = 0
    completed: int = 0
    errors_shown: int = 0  #: commands that ended with an error line (a refused race, a lost race...)
    hook_warnings: int = 0
    lost_writes: int = 0
    wall: float = 0.0
    problems: list[str] = field(default_factory=list)


def run_stress(work: Path, procs: int, races: int = 3, seed: int = 1, *, timeout: float = 1800) -> StressReport:
    """Start ``procs`` drivers at once against ``work`` and check everything afterwards."""
    outdir = work.parent / "stress-out"
    outdir.mkdir(exist_ok=True)
    t0 = time.monotonic()
    children = []
    for i in range(procs):
        argv = [sys.executable, str(Path(__file__).resolve()), "drive", "--work", str(work), "--index", str(i),
                "--procs", str(procs), "--races", str(races), "--seed", str(seed), "--out", str(outdir / f"{i}.json")]
        children.append(subprocess.Popen(argv, cwd=work, env=dict(os.environ), stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True))
    report = StressReport(procs=procs)
    for i, child in enumerate(children):
        _, stderr = child.communicate(timeout=timeout)
        if child.returncode != 0:
            report.problems.append(f"driver {i} crashed (exit {child.returncode}): {stderr.strip()[-2000:]}")
    report.wall = time.monotonic() - t0
    results = [json.loads(p.read_text()) for p in sorted(outdir.glob("*.json"))]
    check_stress(work, results, report)
    return report


def check_stress(work: Path, results: list[dict], report: StressReport) -> None:
    problems = report.problems
    claims: Counter = Counter()
    claimed_from: list[tuple[str, str, str]] = []
    commits: dict[str, list[str]] = {}
    for res in results:
        commits[res["task"]] = res["commits"]
        for rec in res["records"]:
            report.commands += 1
            text = rec["out"] + rec["err"]
            for leak in leaks(text):
                problems.append(f"{' '.join(rec['argv'])}: {leak!r} reached the user: {rec['err'].strip()[-300:]}")
            if "warning: git-nerve" in rec["err"]:
                report.hook_warnings += 1
            if rec["code"] != 0:
                report.errors_shown += 1
                if not any(line.startswith(("error:", "Error:")) for line in rec["err"].splitlines()):
                    problems.append(f"{' '.join(rec['argv'])}: exit {rec['code']} without an error line: {rec['err'][-300:]!r}")
            if rec["kind"] == "race":
                report.races += 1
                if rec["code"] != 0:
                    report.races_refused += 1
                if rec["code"] not in RACE_CODES:
                    problems.append(f"race {' '.join(rec['argv'])}: exit {rec['code']}: {rec['err'].strip()[-300:]}")
            elif rec["kind"] == "own" and rec["code"] not in RACE_CODES:
                problems.append(f"{rec['task']}: {' '.join(rec['argv'])}: exit {rec['code']}: {rec['err'].strip()[-300:]}")
            elif rec["kind"] == "commit" and rec["code"] != 0:
                problems.append(f"{rec['task']}: git commit failed: {rec['err'].strip()[-300:]}")
            for task_id, frm, to in claimed(rec):
                claims[(task_id, to)] += 1
                if frm:
                    claimed_from.append((task_id, frm, to))
    logged: Counter = Counter()
    logged_from: Counter = Counter()
    for m in all_messages(work):
        if m.kind == "task_assign":
            logged[(m.task_id, "ASSIGNED")] += 1
        elif m.kind == "state_change":
            logged[(m.task_id, m.payload["to"])] += 1
            logged_from[(m.task_id, m.payload["from"], m.payload["to"])] += 1
    report.transitions = sum(logged.values())
    for key in sorted(set(claims) | set(logged)):
        if claims[key] != logged[key]:
            problems.append(f"{key[0]} -> {key[1]}: commands report {claims[key]} transition(s), the log holds {logged[key]}")
    for key in claimed_from:
        if not logged_from[key]:
            problems.append(f"{key[0]}: a command reported {key[1]} -> {key[2]}, which the log does not hold")
    problems.extend(replay_problems(work))
    table = {w.task_id: w for w in rows(work)}
    report.tasks = len(table)
    if len(table) != report.procs:
        problems.append(f"{report.procs} tasks spawned, {len(table)} on the bus")
    merges = Counter()
    for subject in git(work, "log", "--format=%s", "main").splitlines():
        m = re.match(r"^Merge \S+ \((\S+)\)$", subject)
        if m:
            merges[m[1]] += 1
    history = set(git(work, "log", "--format=%s", "main").splitlines())
    everywhere = set(git(work, "log", "--all", "--format=%s").splitlines())
    for task_id, w in sorted(table.items()):
        if w.state == "COMPLETED":
            report.completed += 1
            if merges[task_id] != 1:
                problems.append(f"{task_id} is COMPLETED and merged {merges[task_id]} time(s) into main")
            lost = [s for s in commits.get(task_id, []) if s not in history]
        else:
            problems.append(f"{task_id} ended {w.state}, not COMPLETED")
            if merges[task_id]:
                problems.append(f"{task_id} is {w.state} but merged {merges[task_id]} time(s) into main")
            lost = [s for s in commits.get(task_id, []) if s not in everywhere]
        report.lost_writes += len(lost)
        for s in lost:
            problems.append(f"{task_id}: commit {s!r} is lost")
        report.commits += len(commits.get(task_id, []))
    if "refs/remotes/origin/main" in refs(work):
        remote_main = git(work, "ls-remote", "origin", "refs/heads/main").split()[0]
        if remote_main != git(work, "rev-parse", "main"):
            problems.append("origin's main and the local main differ after the run")
    problems.extend(orphan_problems(work, prefix="feat/"))
    problems.extend(fsck_problems(work))


# -- fault cases -------------------------------------------------------------------------------------------


@dataclass
class Scenario:
    root: Path
    work: Path
    origin: Path | None = None

    @property
    def wt(self) -> Path:
        return self.root / f"{self.work.name}.worktrees" / "t1"

    def cwd(self, where: str) -> Path:
        return {"work": self.work, "wt": self.wt, "origin": self.origin}[where]


def _lifecycle(work: Path):
    from fixtures.repos import worker as wfx

    return wfx.opened(work)


def _spawn_started(s: Scenario) -> None:
    from git_nerve.worker import lifecycle

    with _lifecycle(s.work) as repo:
        lifecycle.spawn(repo, "t1", description="fault case\nsecond line")
        lifecycle.start(repo, "t1")
    build.commit_file(s.wt, "t1.txt", "work of t1\n", "t1: add t1.txt")
    _ingest(s.work)


def _ingest(work: Path) -> None:
    """Take in what the hook shims spooled, as any reader of the bus does first."""
    from fixtures.repos import worker as wfx

    wfx.ingest(work)


def _main_moves(s: Scenario, rel: str = "other.txt", text: str = "main moved on\n") -> None:
    if s.origin is None:
        build.commit_file(s.work, rel, text, f"main: {rel}")
        return
    from fixtures.repos import worker as wfx

    clone = s.root / "other-clone"
    if not clone.exists():
        wfx.second_clone(s.origin, clone)
    wfx.push_from(clone, rel, text)


def _to(s: Scenario, target: str) -> None:
    from git_nerve.worker import lifecycle

    with _lifecycle(s.work) as repo:
        lifecycle.done(repo, "t1")
        if target == "IN_REVIEW":
            return
        lifecycle.approve(repo, "t1", by="tester")


def setup_fresh(s: Scenario) -> None:
    pass


def setup_working_behind(s: Scenario) -> None:
    _spawn_started(s)
    _main_moves(s)


def setup_working(s: Scenario) -> None:
    _spawn_started(s)


def setup_working_committed(s: Scenario) -> None:
    """Working, with one commit the hook shim spooled and no reader has ingested yet."""
    _spawn_started(s)
    build.git(s.wt, "commit", "-q", "--allow-empty", "-m", "t1: more")


def setup_working_amended(s: Scenario) -> None:
    """Working, with an amend the hook shim spooled and no reader has ingested yet."""
    _spawn_started(s)
    build.git(s.wt, "commit", "-q", "--amend", "-m", "t1: amended")


def setup_working_conflict(s: Scenario) -> None:
    from fixtures.repos import worker as wfx

    _spawn_started(s)
    build.commit_file(s.wt, wfx.APP, wfx.app_text("hi from t1"), "t1: greeting")
    _main_moves(s, wfx.APP, wfx.app_text("hi from main"))


def setup_in_review(s: Scenario) -> None:
    _spawn_started(s)
    _to(s, "IN_REVIEW")


def setup_approved_behind(s: Scenario) -> None:
    _spawn_started(s)
    _to(s, "APPROVED")
    _main_moves(s)


@dataclass(frozen=True)
class Group:
    """A starting state and the command(s) a case kills and reruns."""

    name: str
    remote: bool
    setup: Callable[[Scenario], None]
    steps: tuple[tuple[str, tuple[str, ...]], ...]  #: (cwd key, argv); the first step is the one killed
    expect: int = 0  #: exit code of the killed command when it runs uninterrupted


GROUPS = {g.name: g for g in [
    Group("spawn", False, setup_fresh, (("work", ("git-worker", "spawn", "t1", "-d", "fault case\nsecond line")),)),
    Group("done", False, setup_working_behind, (("wt", ("git-worker", "done")),)),
    Group("done-remote", True, setup_working_behind, (("wt", ("git-worker", "done")),)),
    Group("done-conflict", False, setup_working_conflict, (("wt", ("git-worker", "done")),), expect=6),
    Group("approve", False, setup_in_review, (("work", ("git-worker", "approve", "t1", "--by", "r", "--comment", "ok")),)),
    Group("merge", False, setup_approved_behind, (("work", ("git-worker", "merge", "t1")),)),
    Group("merge-delete", False, setup_approved_behind, (("work", ("git-worker", "merge", "t1", "--delete-branch")),)),
    Group("merge-remote", True, setup_approved_behind, (("work", ("git-worker", "merge", "t1")),)),
    Group("cancel", False, setup_working, (("work", ("git-worker", "cancel", "t1", "--cleanup", "--reason", "stop")),)),
    # the hooks only append to the worktree's spool; the first reader of the bus (here `done`) ingests it
    Group("commit", False, setup_working_committed, (("wt", ("git-worker", "done")),)),
    Group("amend", False, setup_working_amended, (("wt", ("git-worker", "done")),)),
    Group("push", True, setup_working, (("wt", ("git-worker", "done")),)),
]}


@dataclass(frozen=True)
class Case:
    group: str
    point: str  #: a NERVE_FAULT point, or "hook:<name>" to kill that git hook mid-run

    @property
    def id(self) -> str:
        return f"{self.group}@{self.point}"


CASES = [Case(g, p) for g, points in [
    ("spawn", ["spawn.after-worktree", "ctx.write", "spawn.after-ctx", "spawn.before-commit", "spawn.after-bus"]),
    ("done", ["done.after-rebase", "done.after-reset", "bus.commit"]),
    ("done-remote", ["done.after-rebase", "done.after-reset", "done.after-push"]),
    ("done-conflict", ["done.after-git-rebase"]),
    ("approve", ["bus.commit"]),
    ("merge", ["merge.after-commit", "merge.before-transition", "merge.after-transition", "cleanup.after-archive"]),
    ("merge-delete", ["merge.after-transition", "cleanup.after-archive"]),
    ("merge-remote", ["merge.after-commit", "merge.in-checkout", "merge.after-push", "merge.before-transition", "merge.after-transition"]),
    ("cancel", ["cancel.after-transition", "cleanup.before-remove"]),
    ("commit", ["spool.after-claim", "spool.after-record"]),
    ("amend", ["spool.after-record"]),
    ("push", ["hook:pre-push"]),
] for p in points]


#: The cases CI runs (one or two per command, a hook, a remote); ``NERVE_FAULT_CASES=all``
#: (what ``bench/reliability`` sets) runs every case.
CI_CASES = {
    "spawn@spawn.before-commit", "spawn@spawn.after-bus", "done@done.after-reset", "done-remote@done.after-push",
    "done-conflict@done.after-git-rebase", "approve@bus.commit", "merge@merge.before-transition",
    "merge@cleanup.after-archive", "merge-remote@merge.in-checkout", "merge-remote@merge.after-push", "cancel@cancel.after-transition",
    "commit@spool.after-record", "push@hook:pre-push",
}


def selected_cases() -> list[Case]:
    if os.environ.get("NERVE_FAULT_CASES", "ci") == "all":
        return list(CASES)
    return [c for c in CASES if c.id in CI_CASES]


def make_scenario(root: Path, group: Group) -> Scenario:
    root.mkdir(parents=True, exist_ok=True)
    with fixed_dates():
        repos = build.with_origin(root) if group.remote else build.simple(root)
        s = Scenario(root, repos.work, repos.origin)
        group.setup(s)
    return s


class Workspace:
    """Fresh copies of each group's starting state, always at the same path.

    A group's state is built once, then copied back into place (``cp -a``)
    for every run: git and the bus store absolute paths, so a copy is only
    valid where the original was built, and the same path also makes the
    reference run's snapshot comparable with every faulted run's.
    """

    def __init__(self, base: Path):
        self.base = base
        base.mkdir(parents=True, exist_ok=True)

    def fresh(self, group: Group) -> Scenario:
        root = self.base / group.name
        template = self.base / f"{group.name}.template"
        if root.exists():
            shutil.rmtree(root)
        if not template.exists():
            s = make_scenario(root, group)
            _quiet(root)  # a commit's background work (the radar's recompute) must not change files mid-copy
            subprocess.run(["cp", "-a", str(root), str(template)], check=True)
            return s
        subprocess.run(["cp", "-a", str(template), str(root)], check=True)
        origin = root / "project-origin.git"
        return Scenario(root, root / "project", origin if group.remote else None)


def _quiet(root: Path, timeout: float = 30.0) -> None:
    """Wait until no process works on ``root`` (background work started by its hooks has ended: the radar's and
    the knowledge index's background commands name their worktree in their command line)."""
    wait_until(lambda: not processes.naming(root), timeout, interval=0.05, fail=False)


def run_killing_hook(argv: list[str], cwd: Path, work: Path, hook: str, env: dict, *, timeout: float = 60) -> tuple[Proc, bool]:
    """Run ``argv`` while the bus is held locked, so that ``hook`` waits inside its bus write; SIGKILL it there.

    Returns the command's result and whether the hook was caught and killed.
    """
    conn = sqlite3.connect(bus_path(work), timeout=10, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    t0 = time.monotonic()
    child = subprocess.Popen(argv, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def kill_the_hook() -> bool:
        for p in processes.descendants(child.pid):
            words = p.args.split()
            if any("git_nerve.hooks.run" in w for w in words) and hook in words:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
                    return True
        return False

    try:
        killed = bool(wait_until(kill_the_hook, 20, interval=0.01, alive=child, fail=False))
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    out, err = child.communicate(timeout=timeout)
    return Proc(argv, child.returncode, out, err, time.monotonic() - t0), killed


def _norm(value, root: Path):
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return json.loads(text.replace(str(root), "<root>"))


def snapshot(s: Scenario) -> dict:
    """Everything a converged run must agree on with the reference run, with paths made relative."""
    work = s.work
    snap: dict = {}
    snap["refs"] = refs(work)
    if s.origin is not None:
        snap["origin_refs"] = refs(s.origin)
    snap["worktrees"] = [{k: v for k, v in item.items()} for item in worktree_list(work)]
    wt_root = s.wt.parent
    snap["worktree_dirs"] = sorted(p.name for p in wt_root.iterdir()) if wt_root.is_dir() else []
    snap["rows"] = [
        {"task_id": w.task_id, "state": w.state, "branch": w.branch, "worktree": w.worktree, "base": w.base,
         "integration": w.integration, "description": w.description, "approved": w.approved_at is not None,
         "heartbeat_status": w.heartbeat_status, "progress": w.progress}
        for w in rows(work)
    ]
    snap["log"] = [(m.task_id, m.kind, m.payload) for m in all_messages(work) if m.kind not in INFORMATIONAL]
    snap["status"] = git(work, "status", "--porcelain")
    if s.wt.is_dir():
        snap["wt_status"] = git(s.wt, "status", "--porcelain")
        snap["wt_head"] = git(s.wt, "rev-parse", "HEAD")
        snap["wt_rebase"] = rebase_in_progress(s.wt)
    hooks = common_dir(work) / "hooks"
    snap["hooks"] = sorted(p.name for p in hooks.iterdir()) if hooks.is_dir() else []
    return _norm(snap, s.root)


def diff(a: dict, b: dict) -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        if isinstance(x, list) and isinstance(y, list):
            i = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            x, y = (f"[{i}] {json.dumps(v[i]) if i < len(v) else '(end)'}" for v in (x, y))
            out.append(f"{key}: reference {x[:600]} != rerun {y[:600]}")
        elif isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                if x.get(k) != y.get(k):
                    out.append(f"{key}[{k}]: reference {json.dumps(x.get(k))[:300]} != rerun {json.dumps(y.get(k))[:300]}")
        else:
            out.append(f"{key}: reference {json.dumps(x)[:600]} != rerun {json.dumps(y)[:600]}")
    return out


@dataclass
class Reference:
    snapshot: dict
    codes: list[int]


def reference(space: Workspace, group: Group) -> Reference:
    """The uninterrupted run of ``group``."""
    s = space.fresh(group)
    codes = []
    with fixed_dates():
        env = dict(os.environ)
        for where, argv in group.steps:
            codes.append(run(list(argv), s.cwd(where), env=env).code)
    return Reference(snapshot(s), codes)


@dataclass
class CaseResult:
    case: Case
    killed: bool = False
    converged: bool = False
    problems: list[str] = field(default_factory=list)
    first: Proc | None = None
    rerun: Proc | None = None


def run_case(space: Workspace, case: Case, ref: Reference) -> CaseResult:
    """Kill the group's first command at ``case.point``, rerun, compare with ``ref``."""
    group = GROUPS[case.group]
    s = space.fresh(group)
    res = CaseResult(case)
    with fixed_dates():
        env = dict(os.environ)
        (where, argv), rest = group.steps[0], group.steps[1:]
        if case.point.startswith("hook:"):
            first, res.killed = run_killing_hook(list(argv), s.cwd(where), s.work, case.point[5:], env)
            if not res.killed:
                res.problems.append(f"the {case.point[5:]} hook never ran")
        else:
            first = run(list(argv), s.cwd(where), env={**env, "NERVE_FAULT": case.point})
            res.killed = first.code == -signal.SIGKILL
            if not res.killed:
                res.problems.append(f"the fault point {case.point} was not reached (exit {first.code}: {first.err.strip()[-300:]})")
        res.first = first
        # a process killed -9 must leave no lock anyone waits on
        for lock in (common_dir(s.work) / "nerve" / "locks").glob("*.lock"):
            if lock_held(lock):
                res.problems.append(f"{lock.name} is still held after the kill")
        if not bus_writable_now(s.work):
            res.problems.append("the bus write lock is still held after the kill")
        codes = []
        if case.point.startswith("hook:") and group.steps[0][1][0] == "git":
            # git itself finished (a post-* hook's death does not undo the commit): carry on
            codes.append(first.code)
        else:
            res.rerun = run(list(argv), s.cwd(where), env=env)
            codes.append(res.rerun.code)
            for leak in leaks(res.rerun.err):
                res.problems.append(f"rerun printed {leak!r}")
        for where2, argv2 in rest:
            codes.append(run(list(argv2), s.cwd(where2), env=env).code)
    if codes != ref.codes:
        res.problems.append(f"exit codes {codes}, uninterrupted {ref.codes}"
                            + (f"; rerun said: {res.rerun.err.strip()[-400:]}" if res.rerun else ""))
    res.problems.extend(diff(ref.snapshot, snapshot(s)))
    res.problems.extend(orphan_problems(s.work))
    res.problems.extend(replay_problems(s.work))
    res.problems.extend(fsck_problems(s.work))
    lost = unreachable(s.work, [git(s.work, "rev-parse", "refs/heads/main")])
    res.problems.extend(f"commit {sha} unreachable" for sha in lost)
    res.converged = res.killed and not res.problems
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("drive", help="one stress process")
    d.add_argument("--work", type=Path, required=True)
    d.add_argument("--index", type=int, required=True)
    d.add_argument("--procs", type=int, required=True)
    d.add_argument("--races", type=int, default=3)
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    drive(args.work, args.index, args.procs, args.races, args.seed, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())


@contextlib.contextmanager
def flock_held(path):
    """Another process holds an flock on ``path`` for the ``with`` block (a writer still at work)."""
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1]); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()
