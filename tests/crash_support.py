"""Random crashes, even inside git: what tests/test_crash_random.py and ``bench/reliability --crash N`` share.

The fault suite (:mod:`reliability_support`) kills at named points; this one kills at *random
instants*. For one case (a group: a starting state plus the command that is killed):

1. the command runs once uninterrupted from a fresh copy of the starting state (its duration,
   exit code and final state are the reference);
2. for every kill, from a fresh copy again, it runs as a subprocess in its own process group
   and the whole group (git children and hooks included) is SIGKILLed after a delay drawn
   uniformly over the measured duration;
3. the same command runs again, and the invariants are checked (:func:`check`):
   it finished (the uninterrupted run's exit code and state), ``git worker status`` works,
   no orphan worktree / branch / bus row / lock, no commit that was reachable is lost,
   origin lost nothing, ``git fsck --full`` is clean, ``git fetch`` and ``git worktree list``
   work, every worktree's index and files equal its HEAD (except where a stopped rebase is
   the expected outcome), each live task's context file names it.

Three ways to pick the instant (the kill's ``mode``, rotating with the seed), none of which reads ``/proc``:

* ``instant``: a delay drawn over the measured duration;
* ``ref``: inside a git child, at the k-th ref transaction, while git holds its lock files (a
  ``reference-transaction`` hook in the "prepared" state waits there, see :data:`HOLD_SCRIPT`);
* ``checkout``: inside a git child, at the k-th file a checkout writes (a smudge filter waits there);
* ``create`` / ``remove``: inside a git child's own file work, at the k-th file it has just created (still empty:
  a worktree's ``.git`` file, an admin dir's ``HEAD``) or is about to remove (`git worktree remove` half done),
  through tests/crash_hold.c preloaded into git (:func:`preload_library`; Linux with a C compiler). Only the
  groups whose ``holds`` name them use these.

k is drawn over the number of such points the uninterrupted run passed (a group's ``holds`` narrow them to the
points whose text contains a pattern, so its kills cover the instants it was made for). The hook and the filter
signal the harness through files in the directory ``$NERVE_CRASH_HOLD`` names, and do nothing
(but count) without a wanted point, so every run (reference, kill, rerun) has them installed.

Everything is seeded: a failure prints ``group=<g> seed=<n> fraction=<f>``, and
``bench/crash.py --replay <g>:<n>:<f>`` (or :func:`run_planned`) replays it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import reliability_support as rs
from waiting import wait_until

from fixtures.repos import build

LIVE = {"ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED"}


# -- starting states (beyond reliability_support's) ---------------------------------------------


def setup_spawned(s: rs.Scenario) -> None:
    from git_nerve.worker import lifecycle

    with rs._lifecycle(s.work) as repo:
        lifecycle.spawn(repo, "t1", description="crash case")


def setup_failed(s: rs.Scenario) -> None:
    from git_nerve.worker import lifecycle

    rs._spawn_started(s)
    with rs._lifecycle(s.work) as repo:
        lifecycle.cancel(repo, "t1", reason="stop", cleanup=True)


def setup_working_dirty(s: rs.Scenario) -> None:
    rs._spawn_started(s)
    build.write(s.wt, "t1.txt", "work of t1\nmore work\n")


def setup_two_approved(s: rs.Scenario) -> None:
    """t1 and t2 APPROVED, main moved on (merge --all merges both)."""
    from git_nerve.worker import lifecycle

    rs._spawn_started(s)
    with rs._lifecycle(s.work) as repo:
        res = lifecycle.spawn(repo, "t2", description="second")
        lifecycle.start(repo, "t2")
    build.commit_file(Path(res.worker.worktree), "t2.txt", "work of t2\n", "t2: add t2.txt")
    with rs._lifecycle(s.work) as repo:
        for t in ("t1", "t2"):
            lifecycle.done(repo, t)
            lifecycle.approve(repo, t, by="tester")
    rs._main_moves(s)


def setup_hooks_uninstalled(s: rs.Scenario) -> None:
    """Set up for git-nerve (bus, config, nerve.toml committed), its hooks then uninstalled."""
    for argv in (("git-nerve", "init"), ("git-nerve", "hooks", "uninstall")):
        res = rs.run(list(argv), s.work)
        assert res.code == 0, res.err
    build.git(s.work, "add", "nerve.toml")
    build.git(s.work, "commit", "-q", "-m", "nerve.toml")


@dataclass(frozen=True)
class Group:
    name: str
    remote: bool
    setup: object
    where: str
    argv: tuple[str, ...]
    expect: int = 0
    state: str | None = ""  #: t1's state after a run that finished (None: no task involved)
    commit: bool = False  #: a plain `git commit` (rerun only while the change is not committed)
    #: the hold points this group's kills rotate through, (mode, pattern): the instants it is there to cover (a
    #: kill lands at the k-th point of that mode whose text contains the pattern; "...$": ends with it); empty:
    #: every mode of MODES, any point
    holds: tuple[tuple[str, str], ...] = ()

    def as_rs_group(self) -> rs.Group:
        return rs.Group(self.name, self.remote, self.setup, ((self.where, self.argv),), self.expect)


GW = "git-worker"
GROUPS = {g.name: g for g in [
    Group("spawn", False, rs.setup_fresh, "work", (GW, "spawn", "t1", "-d", "crash case"), state="ASSIGNED"),
    Group("spawn-remote", True, rs.setup_fresh, "work", (GW, "spawn", "t1", "-d", "crash case"), state="ASSIGNED"),
    Group("start", False, setup_spawned, "work", (GW, "start", "--task", "t1"), state="WORKING"),
    Group("done", False, rs.setup_working_behind, "wt", (GW, "done"), state="IN_REVIEW"),
    Group("done-remote", True, rs.setup_working_behind, "wt", (GW, "done"), state="IN_REVIEW"),
    Group("done-conflict", False, rs.setup_working_conflict, "wt", (GW, "done"), expect=6, state="CONFLICTED"),
    Group("done-conflict-remote", True, rs.setup_working_conflict, "wt", (GW, "done"), expect=6, state="CONFLICTED"),
    Group("approve", False, rs.setup_in_review, "work", (GW, "approve", "t1", "--by", "r", "--comment", "ok"),
          state="APPROVED"),
    Group("merge", False, rs.setup_approved_behind, "work", (GW, "merge", "t1"), state="COMPLETED"),
    Group("merge-remote", True, rs.setup_approved_behind, "work", (GW, "merge", "t1"), state="COMPLETED"),
    Group("merge-delete", True, rs.setup_approved_behind, "work", (GW, "merge", "t1", "--delete-branch"),
          state="COMPLETED"),
    Group("merge-all", False, setup_two_approved, "work", (GW, "merge", "--all"), state="COMPLETED"),
    Group("cancel", False, rs.setup_working, "work", (GW, "cancel", "t1", "--cleanup", "--reason", "stop"),
          state="FAILED"),
    Group("retry", False, setup_failed, "work", (GW, "retry", "t1"), state="ASSIGNED"),
    Group("commit", False, setup_working_dirty, "wt", ("git", "commit", "-q", "-am", "t1: more"), state="WORKING",
          commit=True),
    Group("request-changes", False, rs.setup_in_review, "work",
          (GW, "request-changes", "t1", "--by", "r", "--comment", "fix it"), state="WORKING"),
    Group("merge-all-check", False, setup_two_approved, "work", (GW, "merge", "--all", "--check", "test -f other.txt"),
          state="COMPLETED"),
    Group("merge-all-batch", False, setup_two_approved, "work",
          (GW, "merge", "--all", "--check", "test -f other.txt", "--batch", "2"), state="COMPLETED"),
    Group("cancel-force", False, setup_working_dirty, "work",
          (GW, "cancel", "t1", "--cleanup", "--force", "--reason", "stop"), state="FAILED"),
    Group("hooks-install", False, setup_hooks_uninstalled, "work", ("git-nerve", "hooks", "install"), state=None),
    Group("hooks-uninstall", False, rs.setup_working, "work", ("git-nerve", "hooks", "uninstall"), state="WORKING"),
    Group("init", False, rs.setup_fresh, "work", ("git-nerve", "init"), state=None),
    # issue 35 point 8: the instants inside git's own worktree work that the sweeps above reach only rarely, each
    # group's kills spread over them alone (the file points need tests/crash_hold.c: without it, random instants)
    Group("retry-add", False, setup_failed, "work", (GW, "retry", "t1"), state="ASSIGNED",
          # every file `git worktree add` creates, and its .git file alone (created, not yet written)
          holds=(("create", "t1/"), ("create", "/t1/.git$"), ("ref", ""))),
    Group("merge-all-check-remove", False, setup_two_approved, "work",
          (GW, "merge", "--all", "--check", "test -f other.txt"), state="COMPLETED",
          # the check checkout's removal: its files, its admin dir, the admin dir once the files are gone
          holds=(("remove", "/nerve/tmp/check-"), ("remove", "/worktrees/check-"), ("remove", "/gitdir$"))),
    Group("merge-all-batch-remote", True, setup_two_approved, "work",
          (GW, "merge", "--all", "--check", "test -f other.txt", "--batch", "4"), state="COMPLETED",
          # the check and push checkouts' adds (an admin dir written whole: HEAD 0000... until git's update-ref),
          # their removals
          holds=(("create", "/worktrees/"), ("create", "/commondir$"), ("ref", ""), ("remove", "/nerve/tmp/"),
                 ("remove", "/worktrees/"))),
]}

#: the commands issue 21 names, each covered by at least one group (bench/crash.py reports per command too)
COMMANDS = {
    "spawn": ("spawn", "spawn-remote"), "start": ("start",), "done (clean rebase)": ("done", "done-remote"),
    "done (conflicting rebase)": ("done-conflict", "done-conflict-remote"), "approve": ("approve",),
    "request-changes": ("request-changes",), "merge": ("merge", "merge-remote", "merge-delete"),
    "merge --all": ("merge-all",), "merge --all --check": ("merge-all-check", "merge-all-check-remove"),
    "merge --all --batch": ("merge-all-batch", "merge-all-batch-remote"), "cancel --cleanup": ("cancel",),
    "cancel --cleanup --force": ("cancel-force",), "retry": ("retry", "retry-add"), "hooks install": ("hooks-install",),
    "hooks uninstall": ("hooks-uninstall",), "init": ("init",), "git commit (hooks)": ("commit",),
}

#: how many kills per group CI runs (test_crash_random.py: 15 x 25 groups = 375; 330 for the 22 groups before
#: issue 35's three, what 22 x 15 groups cost before the request-changes, merge --all --check/--batch, cancel
#: --force, hooks and init groups came); bench/crash.py takes more
CI_KILLS = 15

#: how a kill picks its instant, by seed (see the module docstring)
MODES = ("instant", "ref", "checkout")
HOLD_VAR = "NERVE_CRASH_HOLD"
#: the hold point, POSIX sh: ``crash-hold ref <state>`` (a reference-transaction hook, the transaction on stdin)
#: or ``crash-hold checkout <path>`` (a smudge filter: the content on stdin, passed through)
HOLD_SCRIPT = r"""#!/bin/sh
kind=$1; shift
d=$NERVE_CRASH_HOLD
what=$1
if [ "$kind" = ref ]; then
  what="$1 $(tr '\n' ' ')"
  [ "$1" = prepared ] || exit 0
fi
if [ -n "$d" ] && [ -d "$d" ]; then
  echo "$what" >> "$d/$kind.count"
  if [ -f "$d/$kind.want" ]; then
    read -r n pat < "$d/$kind.want"
    case "$what" in *"$pat"*)
      echo x >> "$d/$kind.matched"
      if [ "$(( $(wc -l < "$d/$kind.matched") ))" -eq "$n" ]; then
        printf '%s %s\n' "$kind" "$what" > "$d/reached.tmp" && mv "$d/reached.tmp" "$d/reached"
        while [ ! -e "$d/release" ]; do sleep 0.02; done
      fi;;
    esac
  fi
fi
if [ "$kind" = checkout ]; then exec cat; fi
exit 0
"""


def install_hold(work: Path, script: Path) -> None:
    """Put the hold points into the repository of ``work``: the reference-transaction hook (in git's hooks
    directory, beside git-nerve's) and the smudge filter on every path (no clean filter: nothing else changes)."""
    if not script.exists():
        script.parent.mkdir(parents=True, exist_ok=True)
        tmp = script.with_name(f"{script.name}.{os.getpid()}")
        tmp.write_text(HOLD_SCRIPT, encoding="utf-8")
        tmp.chmod(0o755)
        os.replace(tmp, script)
    hooks = Path(rs.git(work, "rev-parse", "--path-format=absolute", "--git-path", "hooks"))
    hooks.mkdir(parents=True, exist_ok=True)
    hook = hooks / "reference-transaction"
    hook.write_text(f"#!/bin/sh\nexec '{script}' ref \"$@\"\n", encoding="utf-8")
    hook.chmod(0o755)
    build.git(work, "config", "filter.crashhold.smudge", f"'{script}' checkout %f")
    info = rs.common_dir(work) / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text("* filter=crashhold\n", encoding="utf-8")


def hold_count(hold: Path, kind: str, pattern: str = "") -> int:
    """The ``kind`` points a run passed (whose text contains ``pattern``; "...$": ends with it)."""
    try:
        lines = (hold / f"{kind}.count").read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    if pattern.endswith("$"):
        return sum(1 for ln in lines if ln.rstrip().endswith(pattern[:-1]))
    return sum(1 for ln in lines if pattern in ln)


def fresh_hold(base: Path) -> Path:
    hold = base / "hold"
    if hold.exists():
        shutil.rmtree(hold)
    hold.mkdir(parents=True)
    return hold


#: the hold points inside git's own file work (tests/crash_hold.c, preloaded): a file git just created, still
#: empty ("create"), a file or directory git is about to remove ("remove")
FILE_MODES = ("create", "remove")
_PRELOAD: dict[str, Path | None] = {}


def preload_library() -> Path | None:
    """tests/crash_hold.c built once per process (a C compiler and a glibc-style LD_PRELOAD needed: Linux), or None
    when it cannot be (the "create" and "remove" modes then fall back to a random instant)."""
    src = Path(__file__).with_name("crash_hold.c")
    key = os.fspath(src)
    if key not in _PRELOAD:
        import tempfile

        out = None
        if sys.platform.startswith("linux") and shutil.which("cc"):
            out = Path(tempfile.mkdtemp(prefix="nerve-crash-hold-")) / "crash_hold.so"  # private to this process
            import atexit

            atexit.register(shutil.rmtree, out.parent, True)
            proc = subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src), "-ldl"],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                out = None
        _PRELOAD[key] = out
    return _PRELOAD[key]


def hold_env(env: dict, hold: Path) -> dict:
    """``env`` with the hold points on: the hold directory, and the preloaded file points when they can be built."""
    lib = preload_library()
    extra = {HOLD_VAR: str(hold)}
    if lib is not None:
        extra["LD_PRELOAD"] = " ".join(p for p in (env.get("LD_PRELOAD"), os.fspath(lib)) if p)
    return {**env, **extra}


def start_held(argv: list[str], cwd: Path, env: dict, hold: Path, kind: str, n: int, pattern: str = "",
               *, timeout: float = 60) -> tuple[subprocess.Popen, bool]:
    """Start ``argv`` in its own process group with the ``n``-th ``kind`` point (whose text contains ``pattern``)
    wanted; return once a git child waits there (True) or the command ended first (False)."""
    (hold / f"{kind}.want").write_text(f"{n} {pattern}\n", encoding="utf-8")
    child = subprocess.Popen(argv, cwd=cwd, env=hold_env(env, hold), start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reached = hold / "reached"
    wait_until(reached.exists, timeout, interval=0.005, alive=child, fail=False)
    return child, reached.exists()


def kill_group(child: subprocess.Popen, hold: Path | None = None) -> None:
    """SIGKILL ``child``'s whole process group; then let any straggler outside it (detached background work)
    past the hold point."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()
    if hold is not None:
        (hold / "release").write_text("", encoding="utf-8")


# -- reading ----------------------------------------------------------------------------------------


def reachable(cwd: Path) -> set[str]:
    """Commits any ref reaches (when a killed git left a worktree HEAD git cannot read, the refs alone)."""
    for args in (("rev-list", "--all"), ("rev-list", "--branches", "--tags", "--remotes", "--glob=refs/nerve/*")):
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            return set(proc.stdout.split())
    raise AssertionError(f"cannot list the commits of {cwd}: {proc.stderr.strip()}")


def reachable_kept(work: Path) -> set[str]:
    """Commits that refs (branches, tags, remotes, refs/nerve/*) or the HEAD of the main checkout or of a task's
    worktree reach: what a kill must not lose. A temporary checkout's detached HEAD (merge --check's combination
    of tasks, a push checkout) holds nothing of anyone's."""
    heads = []
    tasks = {os.path.realpath(w.worktree) for w in rs.rows(work)} | {os.path.realpath(work)}
    try:
        listed = rs.worktree_list(work)
    except AssertionError:  # a `git worktree add` killed before it wrote the admin dir's commondir: git cannot list
        listed = [{"worktree": os.fspath(w), "HEAD": rs.git(w, "rev-parse", "HEAD")} for w in map(Path, tasks)
                  if w.is_dir() and cs_git_ok(w)]
    for item in listed:
        if os.path.realpath(item["worktree"]) in tasks and item.get("HEAD", "").strip("0"):
            heads.append(item["HEAD"])
    proc = subprocess.run(["git", "rev-list", "--branches", "--tags", "--remotes", "--glob=refs/nerve/*", *heads],
                          cwd=work, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return set(proc.stdout.split())
    return reachable(work)


def cs_git_ok(wt: Path) -> bool:
    """True when git can read the HEAD of the worktree ``wt``."""
    return git_ok(wt, "rev-parse", "-q", "--verify", "HEAD")[0]


def git_ok(cwd: Path, *args: str, timeout: float = 60) -> tuple[bool, str]:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()


def fsck_full(cwd: Path) -> list[str]:
    """``git fsck --full`` (one run): its complaints, or [] when clean."""
    proc = subprocess.run(["git", "fsck", "--full", "--no-progress", "--no-dangling"], cwd=cwd, capture_output=True,
                          text=True, check=False)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln and not ln.startswith("notice")]
    if proc.returncode and not lines:
        lines = [f"git fsck --full exited {proc.returncode}"]
    return [f"git fsck: {ln}" for ln in lines[:20]]


def in_progress(wt: Path) -> bool:
    git_dir = Path(rs.git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))
    return any((git_dir / n).exists() for n in ("rebase-merge", "rebase-apply", "MERGE_HEAD"))


def state_of(work: Path, task: str = "t1") -> str | None:
    for w in rs.rows(work):
        if w.task_id == task:
            return w.state
    return None


# -- one case -----------------------------------------------------------------------------------------


@dataclass
class Reference:
    group: Group
    seconds: float
    code: int
    dropped: set[str]  #: commits the uninterrupted run itself stops referencing (a rebased tip; its reflog keeps it)
    points: dict[str, int] = field(default_factory=dict)  #: hold points passed: "ref" transactions, "checkout" files
    porcelain: dict[str, str] = field(default_factory=dict)  #: worktree path -> `git status --porcelain` at the end
    hooks: dict[str, str] = field(default_factory=dict)  #: git's hooks directory at the end (name -> content)
    origin_agrees: dict[str, bool] = field(default_factory=dict)  #: local branch -> same tip as origin's


@dataclass
class Kill:
    group: str
    seed: int
    delay: float  #: seconds (mode "instant") or the hold point's number k
    killed: bool = False  #: the command was still running when the kill came
    problems: list[str] = field(default_factory=list)
    mode: str = "instant"
    fraction: float | None = None
    pattern: str = ""

    @property
    def converged(self) -> bool:
        return not self.problems

    def replay(self) -> str:
        where = (f"delay={self.delay:.4f}" if self.mode == "instant"
                 else f"at {self.mode} point {int(self.delay)}" + (f" of {self.pattern!r}" if self.pattern else ""))
        frac = f" fraction={self.fraction:.6f}" if self.fraction is not None else ""
        return f"group={self.group} seed={self.seed}{frac} mode={self.mode} {where}"

    def replay_command(self) -> str:
        return f"bench/crash.py --replay {self.group}:{self.seed}:{self.fraction!r}"


class Workspace(rs.Workspace):
    def fresh_group(self, group: Group) -> rs.Scenario:
        s = self.fresh(group.as_rs_group())
        install_hold(s.work, self.base / "crash-hold")
        return s


def _run(group: Group, s: rs.Scenario, env: dict) -> rs.Proc:
    return rs.run(list(group.argv), s.cwd(group.where), env=env, timeout=120)


def hooks_snapshot(work: Path) -> dict[str, str]:
    """git's hooks directory (the harness's own hook left out): name -> content."""
    hooks = Path(rs.git(work, "rev-parse", "--path-format=absolute", "--git-path", "hooks"))
    out = {}
    if hooks.is_dir():
        for p in sorted(hooks.iterdir()):
            if p.name != "reference-transaction" and p.is_file():
                out[p.name] = p.read_text(encoding="utf-8", errors="replace")
    return out


def porcelain(work: Path) -> dict[str, str]:
    return {item["worktree"]: rs.git(Path(item["worktree"]), "status", "--porcelain")
            for item in rs.worktree_list(work) if "bare" not in item and Path(item["worktree"]).is_dir()}


def origin_agreement(s: rs.Scenario) -> dict[str, bool]:
    """For each local branch that origin has too: whether both have the same tip (after a fetch)."""
    if s.origin is None:
        return {}
    git_ok(s.work, "fetch", "-q", "origin")
    have = rs.refs(s.work)
    return {ref[len("refs/heads/"):]: sha == have.get(f"refs/remotes/origin/{ref[len('refs/heads/'):]}")
            for ref, sha in have.items()
            if ref.startswith("refs/heads/") and f"refs/remotes/origin/{ref[len('refs/heads/'):]}" in have}


def recorded_commits(work: Path) -> set[str]:
    """Every commit the bus recorded for any task (the hooks' records, done's rewrites)."""
    found = set()
    for m in rs.all_messages(work):
        if m.kind in ("commit", "merge") and isinstance(m.payload.get("sha"), str):
            found.add(m.payload["sha"])
        elif m.kind == "rewrite":
            for pair in m.payload.get("pairs") or []:
                found.update(x for x in pair if isinstance(x, str))
    return found


def reference(space: Workspace, group: Group) -> Reference:
    s = space.fresh_group(group)
    before = reachable(s.work)
    hold = fresh_hold(space.base)
    with rs.fixed_dates():
        files = any(m in FILE_MODES for m, _ in group.holds)
        env = hold_env(dict(os.environ), hold) if files else {**os.environ, HOLD_VAR: str(hold)}
        p = _run(group, s, env)
    after = reachable(s.work)
    if p.code != group.expect:
        raise AssertionError(f"{group.name}: the uninterrupted run exited {p.code}, expected {group.expect}:\n{p.err}")
    points = {k: hold_count(hold, k) for k in MODES[1:]}
    points.update({hold_key(m, pat): hold_count(hold, m, pat) for m, pat in group.holds if m != "instant"})
    return Reference(group, max(p.seconds, 0.01), p.code, before - after,
                     points=points, porcelain=porcelain(s.work),
                     hooks=hooks_snapshot(s.work), origin_agrees=origin_agreement(s))


def hold_key(mode: str, pattern: str = "") -> str:
    """How :attr:`Reference.points` names a mode's points (whose text contains ``pattern``)."""
    return f"{mode} {pattern}" if pattern else mode


def mode_of(seed: int, group: Group | None = None) -> tuple[str, str]:
    """(mode, pattern) of the kill ``seed`` of ``group``: its own holds in turn, else every mode, any point."""
    holds = (group.holds if group is not None else ()) or tuple((m, "") for m in MODES)
    return holds[seed % len(holds)]


def run_one(space: Workspace, ref: Reference, seed: int, delay: float | None = None, *, mode: str = "instant",
            fraction: float | None = None, pattern: str = "") -> Kill:
    """Kill ``ref.group``'s command, rerun, check. ``mode`` "instant": after ``delay`` seconds (drawn from ``seed``
    when None); "ref" / "checkout" / "create" / "remove": at hold point number ``delay`` (of those whose text
    contains ``pattern``; see the module docstring)."""
    group = ref.group
    rng = random.Random(seed)
    if delay is None:
        delay = (rng.uniform(0, ref.seconds) if mode == "instant"
                 else rng.randint(1, max(1, ref.points.get(hold_key(mode, pattern), 0))))
    k = Kill(group.name, seed, delay, mode=mode, fraction=fraction, pattern=pattern)
    s = space.fresh_group(group)
    origin_before = reachable(s.origin) if s.origin else set()
    seen = reachable(s.work) | recorded_commits(s.work)
    hold = fresh_hold(space.base)
    with rs.fixed_dates():
        env = dict(os.environ)
        argv, cwd = list(group.argv), s.cwd(group.where)
        if mode == "instant":
            child = subprocess.Popen(argv, cwd=cwd, env={**env, HOLD_VAR: str(hold)}, start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)  # makes time pass on purpose: the kill lands at this (random) instant
            k.killed = child.poll() is None
        else:
            child, k.killed = start_held(argv, cwd, env, hold, mode, int(delay), pattern,
                                         timeout=max(60, 10 * ref.seconds))
        kill_group(child, hold)
        seen |= reachable_kept(s.work) | recorded_commits(s.work)
        if s.origin:
            origin_before |= reachable(s.origin)
        rerun = _rerun(group, s, env)
    k.problems += check(s, ref, rerun, seen, origin_before)
    return k


def _rerun(group: Group, s: rs.Scenario, env: dict) -> rs.Proc | None:
    if not group.commit:
        return _run(group, s, env)
    # a plain `git commit`: the next git-nerve command the agent runs meets what the kill left
    # (`git worker start` is idempotent while WORKING), then the agent commits again if it did not land
    started = rs.run([GW, "start"], s.wt, env=env)
    # git-nerve cannot prove that a lock of the killed commit is dead (it was not its own git: issue 21), so it
    # keeps it and says so; the agent does what the line says (no git runs there any more)
    for line in started.err.splitlines():
        if line.startswith("kept: ") and ": a git lock file of another process" in line:
            Path(line[len("kept: "):].split(": a git lock file", 1)[0]).unlink(missing_ok=True)
    # "not committed" is the work tree against HEAD, not `git status`: a commit killed after it moved the branch but
    # before it wrote the index back leaves an index lagging HEAD, and `commit -a` then rightly finds nothing to do
    if rs.git(s.wt, "diff", "--name-only", "HEAD"):
        return _run(group, s, env)
    return None


def check(s: rs.Scenario, ref: Reference, rerun: rs.Proc | None, seen: set[str], origin_before: set[str]) -> list[str]:
    group = ref.group
    work = s.work
    problems: list[str] = []
    if rerun is not None:
        if rerun.code != group.expect:
            problems.append(f"rerun exited {rerun.code} (uninterrupted: {group.expect}): "
                            f"{(rerun.err.strip() or rerun.out.strip())[-500:]}")
        for leak in rs.leaks(rerun.err):
            problems.append(f"rerun printed {leak!r}")
    status = rs.run([GW, "status", "--json"], work, timeout=60)
    if status.code != 0:
        problems.append(f"git worker status exited {status.code}: {status.err.strip()[-300:]}")
    else:
        try:
            shown = {r["task_id"]: r["state"] for r in json.loads(status.out)}
        except (ValueError, KeyError, TypeError) as exc:
            shown = None
            problems.append(f"git worker status --json printed no rows ({exc}): {status.out[:200]!r}")
        table = {w.task_id: w.state for w in rs.rows(work)}
        if shown is not None and shown != table:
            problems.append(f"git worker status shows {shown}, the bus holds {table}")
    st = state_of(work)
    if group.state is not None and st != group.state:
        problems.append(f"t1 is {st}, an uninterrupted run leaves it {group.state}")
    if group.name.startswith("merge-all") and state_of(work, "t2") != "COMPLETED":
        problems.append(f"t2 is {state_of(work, 't2')} after merge --all")
    problems += bus_problems(work)
    hooks = hooks_snapshot(work)
    if hooks != ref.hooks:
        differ = sorted(n for n in set(hooks) | set(ref.hooks) if hooks.get(n) != ref.hooks.get(n))
        problems.append(f"git's hooks directory differs from an uninterrupted run's in {differ}")
    tmp = rs.common_dir(work) / "nerve" / "tmp"
    if tmp.is_dir() and any(tmp.iterdir()):
        problems.append(f"temporary checkouts left in {tmp}: {sorted(p.name for p in tmp.iterdir())[:5]}")
    ok, err = git_ok(work, "worktree", "list")
    if not ok:
        problems.append(f"git worktree list fails: {err[-300:]}")
    problems += fsck_full(work)
    if s.origin is not None:
        ok, err = git_ok(work, "fetch", "-q", "origin")
        if not ok:
            problems.append(f"git fetch fails: {err[-300:]}")
        lost = origin_before - reachable(s.origin)
        problems += [f"origin lost commit {sha}" for sha in sorted(lost)]
        agrees = origin_agreement(s)
        for branch in sorted(set(agrees) | set(ref.origin_agrees)):
            if agrees.get(branch) != ref.origin_agrees.get(branch):
                problems.append(f"branch {branch} and origin's: "
                                f"{_agree_word(agrees.get(branch))} (uninterrupted: {_agree_word(ref.origin_agrees.get(branch))})")
    problems += rs.orphan_problems(work)
    problems += rs.replay_problems(work)
    now = reachable(work)
    lost = seen - now - ref.dropped
    problems += [f"commit {sha} is no longer reachable from any ref" for sha in sorted(lost)]
    try:
        listed = rs.worktree_list(work)
    except AssertionError:
        listed = []  # said above (git worktree list fails)
    for item in listed:
        path = Path(item["worktree"])
        if "bare" in item or not path.is_dir():
            continue
        if "locked" in item:
            problems.append(f"worktree {path} is still locked ({item.get('locked') or 'no reason'})")
        if group.expect == 6 and path == s.wt and in_progress(path):
            continue  # the stopped rebase is what the command promises
        ok, said = git_ok(path, "status", "--porcelain")
        if not ok:
            problems.append(f"git status fails in {path}: {said[-300:]}")
            continue
        dirty = rs.git(path, "status", "--porcelain")
        if dirty == ref.porcelain.get(item["worktree"], ""):
            continue  # as an uninterrupted run leaves it (`init` leaves nerve.toml to commit)
        if dirty and not (group.commit and path == s.wt and "t1.txt" in dirty and dirty.count("\n") == 0):
            deleted = [ln[3:] for ln in dirty.splitlines() if ln.startswith("D ")]
            if deleted:
                problems.append(f"worktree {path} has staged deletions: {deleted[:5]}")
            problems.append(f"worktree {path} differs from its HEAD: {dirty.splitlines()[:5]}")
    for w in rs.rows(work):
        wt = Path(w.worktree)
        if w.state in LIVE and wt.is_dir():
            git_dir = Path(rs.git(wt, "rev-parse", "--path-format=absolute", "--git-dir"))
            ctx = git_dir / "nerve" / ".worker-ctx.json"
            try:
                data = json.loads(ctx.read_text(encoding="utf-8"))
                if data.get("task_id") != w.task_id or data.get("branch") != w.branch:
                    problems.append(f"{ctx} names {data.get('task_id')}/{data.get('branch')}, not {w.task_id}")
            except (OSError, ValueError) as exc:
                problems.append(f"{w.task_id}: context file unreadable: {exc}")
            head = rs.git(wt, "symbolic-ref", "-q", "HEAD") if not in_progress(wt) else f"refs/heads/{w.branch}"
            if head != f"refs/heads/{w.branch}":
                problems.append(f"{w.task_id}: worktree HEAD is {head or 'detached'}, not {w.branch}")
    return problems


def _agree_word(value: bool | None) -> str:
    return {True: "same tip", False: "different tips", None: "not on both"}[value]


def bus_problems(work: Path) -> list[str]:
    """``PRAGMA integrity_check`` of the bus (when there is one)."""
    path = rs.bus_path(work)
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as exc:
        return [f"bus integrity_check failed: {exc}"]
    finally:
        conn.close()
    return [] if result == ["ok"] else [f"bus integrity_check: {'; '.join(result[:5])}"]


# -- a sweep ------------------------------------------------------------------------------------------


@dataclass
class Sweep:
    kills: list[Kill] = field(default_factory=list)
    seconds: float = 0.0  #: wall time (set by bench/reliability)

    def per_group(self) -> dict[str, tuple[int, int, int]]:
        """group -> (converged, total, killed while running)"""
        out: dict[str, tuple[int, int, int]] = {}
        for k in self.kills:
            c, t, r = out.get(k.group, (0, 0, 0))
            out[k.group] = (c + k.converged, t + 1, r + k.killed)
        return out

    def failures(self) -> list[Kill]:
        return [k for k in self.kills if not k.converged]


def kill_plan(seed: int, kills: int) -> list[tuple[int, float]]:
    """``kills`` (seed, fraction of the command's duration) pairs: stratified, so that even a few kills spread over
    the whole run (kill i lands in the i-th of ``kills`` equal slices, at a seeded point inside it)."""
    plan = []
    for i in range(kills):
        s = seed + i
        plan.append((s, (i + random.Random(s).random()) / kills))
    return plan


def group_seed(seed: int, name: str) -> int:
    return seed * 100_000 + list(GROUPS).index(name) * 1000


def run_planned(space: Workspace, ref: Reference, seed: int, fraction: float) -> Kill:
    """The kill ``seed`` of a plan: its mode from the seed, its instant (or hold point) at ``fraction`` of the way."""
    mode, pattern = mode_of(seed, ref.group)
    points = ref.points.get(hold_key(mode, pattern), 0) if mode != "instant" else 0
    if mode != "instant" and points == 0:
        # the command passes no such point (no ref transaction, no checkout; no file points where they cannot be
        # built): a random instant
        mode = "instant"
    if mode == "instant":
        return run_one(space, ref, seed, fraction * ref.seconds, fraction=fraction)
    return run_one(space, ref, seed, float(min(points, 1 + int(fraction * points))), mode=mode, fraction=fraction,
                   pattern=pattern)


def sweep(base: Path, groups: list[str], kills: int, seed: int, *, jobs: int = 1, chunk: int = 10,
          say=lambda line: None) -> Sweep:
    """``kills`` random kills for each group, seeds derived from ``seed``; ``jobs`` processes share the work in
    chunks of ``chunk`` kills, round-robin over the groups (partial results cover every group)."""
    result = Sweep()
    work = [(name, part) for name in groups
            for part in _chunks(kill_plan(group_seed(seed, name), kills), chunk)]
    rounds: list[tuple[str, list]] = []
    by_group = {name: [w for w in work if w[0] == name] for name in groups}
    while any(by_group.values()):
        for name in groups:
            if by_group[name]:
                rounds.append(by_group[name].pop(0))
    refs: dict[str, float] = {}

    def report(name: str, done: list[Kill], seconds: float) -> None:
        result.kills.extend(done)
        refs[name] = seconds
        for k in done:
            if not k.converged:
                say(f"  NOT CONVERGED {k.replay()}: {k.problems[0]}")
        c, t, r = result.per_group()[name]
        say(f"  {name:22s} converged {c}/{t} ({r} killed mid-run; command takes {seconds:.2f} s)")

    if jobs <= 1:
        for name, part in rounds:
            report(name, *_run_chunk(str(base), name, part))
        return result
    import concurrent.futures as cf
    import multiprocessing

    with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {pool.submit(_run_chunk, str(base), name, part): name for name, part in rounds}
        for fut in cf.as_completed(futures):
            report(futures[fut], *fut.result())
    return result


def _chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


_SPACES: dict[str, tuple[Workspace, dict[str, Reference]]] = {}


def _run_chunk(base: str, name: str, plan: list[tuple[int, float]]) -> tuple[list[Kill], float]:
    """One chunk of one group's kills, in this process's own workspace (its templates and references reused)."""
    if base not in _SPACES:
        _SPACES[base] = (Workspace(Path(base) / f"p{os.getpid()}"), {})
    space, refs = _SPACES[base]
    if name not in refs:
        refs[name] = reference(space, GROUPS[name])
    ref = refs[name]
    return [run_planned(space, ref, s, f) for s, f in plan], ref.seconds


def killed_token(cwd: Path, git_args: list[str]) -> None:
    """What a git-nerve command SIGKILLed while it ran ``git <git_args>`` in ``cwd`` leaves: its liveness token
    (git_nerve/liveness.py), dead, recording that git child. A real process is killed; nothing is forged."""
    code = ("import os, signal, sys; from git_nerve import liveness; liveness.enable(); "
            "fds, marker = liveness.before_git(sys.argv[1], sys.argv[2:]); assert marker, 'no token'; "
            "os.kill(os.getpid(), signal.SIGKILL)")
    proc = subprocess.run([sys.executable, "-c", code, str(cwd), *git_args], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
