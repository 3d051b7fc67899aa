"""Compute the radar: every pair of live workers, and each against the integration branch.

A worker's *side* is its branch tip plus, when its worktree has uncommitted
changes, a snapshot of them (a commit object only: no index, work tree or
ref moves). A pair is recomputed only when one of its sides (tip or
snapshot) or the integration tip changed; the others are reused from the
cache. A conflict belongs to the work that makes it: two tasks are compared
by their own changes (each against its merge base with the integration
branch) replayed on the integration tip, a task and the integration branch
by the task's change against what landed since its base. The comparison
itself is in memory (:mod:`git_nerve.git.overlap`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import itertools
import time
from collections.abc import Iterable
from pathlib import Path

from .. import clock
from ..bus import workers as bus_workers
from ..errors import GitError, NerveError
from ..git import refs, worktrees
from ..locks import hold
from . import cache

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: The states whose work is still on its way to the integration branch.
LIVE = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")


@dataclass
class Pair:
    a: str
    b: str  #: a task id, or cache.INTEGRATION
    kind: str
    files: list[str]
    conflicts: dict[str, list[list[int]]]
    #: shared mode: the machine holding ``b`` when it is another machine's task (:mod:`.remote`); ``a`` is ours
    machine: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {"a": self.a, "b": self.b, "kind": self.kind, "files": self.files, "conflicts": self.conflicts}
        if self.machine is not None:
            out["machine"] = self.machine
        return out


@dataclass
class Scan:
    pairs: list[Pair] = field(default_factory=list)  #: every overlapping or conflicting pair
    at: float | None = None
    computed: int = 0
    reused: int = 0
    duration_s: float = 0.0
    new_conflicts: list[Pair] = field(default_factory=list)
    #: pairs in conflict in the last result and no more (a side moved, or finished)
    resolved: list[Pair] = field(default_factory=list)
    integration: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "integration": self.integration, "at": clock.iso(self.at) if self.at else None,
            "age_s": round(time.time() - self.at, 1) if self.at else None,
            "computed": self.computed, "reused": self.reused, "duration_s": self.duration_s,
            "pairs": [p.as_dict() for p in self.pairs],
        }

    def for_task(self, task_id: str) -> list[Pair]:
        return [p for p in self.pairs if task_id in (p.a, p.b)]


def _side(ov, w, old: dict | None, refresh: bool, look: bool = True) -> dict | None:
    tip = ov.tip(f"refs/heads/{w.branch}") if w.branch else None
    if tip is None:
        return None
    if old and not refresh and old.get("commit") == tip:
        return old
    tree = ov.tree_of(tip)
    dirty = False
    worktree = Path(w.worktree) if w.worktree and look else None
    if worktree is not None and worktree.is_dir():
        try:
            if worktrees.dirty_files(worktree):
                snap = worktrees.snapshot(worktree, tip, f"nerve radar snapshot of {w.task_id}")
                tree, dirty = ov.tree_of(snap), True
        except GitError:
            pass  # a worktree mid-operation: compare its committed work
    side = {"commit": tip, "tree": tree, "dirty": dirty, "at": time.time()}
    if worktree is None and old and (old.get("dirty") or old.get("unlooked")):
        side["unlooked"] = True  # it had uncommitted work, not looked at since its tip moved (a quick pass)
    return side


def _look_first(ov, live, common, changed_set: set[str]) -> dict[str, dict]:
    """The sides of the tasks in ``changed_set``, their worktrees looked at (no lock held)."""
    old = cache.load(common)["sides"]
    found = {}
    for w in live:
        if w.task_id in changed_set:
            side = _side(ov, w, old.get(w.task_id), True)
            if side is not None:
                found[w.task_id] = side
    return found


def _sides(ov, live, old: dict, changed_set: set[str] | None, worktrees_too: bool, looked: dict) -> dict[str, dict]:
    """Every live task's side: the one looked at before the lock while its tip is still there, else the cached
    one while its tip did not move, else computed now."""
    sides: dict[str, dict] = {}
    for w in live:
        got = looked.get(w.task_id)
        if got is not None and w.branch and got["commit"] == ov.tip(f"refs/heads/{w.branch}"):
            side = got
        else:
            look = worktrees_too and got is None
            side = _side(ov, w, old.get(w.task_id), look and (changed_set is None or w.task_id in changed_set), look)
        if side is not None:
            sides[w.task_id] = side
    return sides


def recompute(repo, *, changed: Iterable[str] | None = None, worktrees_too: bool = True) -> Scan:
    """Bring the cache up to date. ``changed``: the tasks whose worktrees must be looked at again
    (a commit there); None: every task (a full recompute). ``worktrees_too=False``: committed work only (no
    `git status` of any worktree: what moved branch tips only; the quick first pass under load)."""
    from ..git import overlap  # pygit2: only when computing (status reads the cache without it)
    from ..worker.lifecycle import integration_ref

    started = time.monotonic()
    common = repo.paths.common_dir
    changed_set = None if changed is None else set(changed)
    live = bus_workers.all_workers(repo.bus.conn, states=LIVE)
    ov = overlap.Repo(common)
    # the worktrees of the tasks asked for are looked at before the lock: `git status` of a busy worktree takes
    # long, and a quick pass for a new commit must not wait behind it
    looked = _look_first(ov, live, common, changed_set) if worktrees_too and changed_set is not None else {}
    with hold(cache.lock(common), timeout=120, what="the radar lock"):
        data = cache.load(common)
        sides = _sides(ov, live, data["sides"], changed_set, worktrees_too, looked)
        integration = None
        try:
            integration = repo.settings.integration
            tip = refs.resolve(repo.cwd, integration_ref(repo, integration, fetch=False))
            if tip:
                sides[cache.INTEGRATION] = {"commit": tip, "tree": ov.tree_of(tip), "dirty": False, "at": time.time()}
        except NerveError:
            pass
        scan = Scan(integration=integration)
        pairs = _pairs(ov, sides, data["pairs"], scan)
        elsewhere = _across_machines(repo, ov, sides, data, scan)
        now = time.time()
        save = {"sides": sides, "pairs": pairs, "at": now, "integration": integration, **elsewhere}
        cache.save(common, save)
    scan.at = now
    scan.pairs = [_pair(*k.split("|"), v) for k, v in sorted(pairs.items()) if v["kind"] != "clean"]
    scan.pairs += _remote_pairs(elsewhere)
    scan.duration_s = round(time.monotonic() - started, 3)
    return scan


def _pairs(ov, sides: dict[str, dict], old_pairs: dict[str, dict], scan: Scan) -> dict[str, dict]:
    """Every pair's record: reused while its inputs (both sides' tips and trees, the integration tip) are the same,
    else computed (:meth:`~git_nerve.git.overlap.Repo.compare_on`: each task's own change, replayed on the
    integration tip). New conflicts go to ``scan.new_conflicts``, conflicts gone to ``scan.resolved``."""
    from ..git import overlap

    onto = sides.get(cache.INTEGRATION, {}).get("commit")
    tasks = sorted(t for t in sides if t != cache.INTEGRATION)
    combos = list(itertools.combinations(tasks, 2)) + [(t, cache.INTEGRATION) for t in tasks if onto]
    pairs: dict[str, dict] = {}
    for a, b in combos:
        k = cache.key(a, b)
        first, second = k.split("|")
        s1, s2 = sides[first], sides[second]
        inputs = [s1["commit"], s1["tree"], s2["commit"], s2["tree"], onto]
        old = old_pairs.get(k)
        if old and (old.get("inputs") == inputs
                    or (old.get("kind") == "conflict" and (s1.get("unlooked") or s2.get("unlooked")))):
            # a conflict is kept while a side's uncommitted work is not looked at again: no "resolved" told by a
            # quick pass that compared only its commits, and no conflict told anew once it is looked at
            pairs[k] = old
            scan.reused += 1
            continue
        one, two = overlap.Side(s1["commit"], s1["tree"]), overlap.Side(s2["commit"], s2["tree"])
        result = ov.compare(one, two) if second == cache.INTEGRATION else ov.compare_on(one, two, onto)
        pairs[k] = {"inputs": inputs, **result.as_dict(), "at": time.time()}
        scan.computed += 1
        if result.kind == "conflict" and ((old or {}).get("kind") != "conflict" or old.get("files") != pairs[k]["files"]):
            scan.new_conflicts.append(_pair(first, second, pairs[k]))
    scan.resolved = [_pair(*k.split("|"), v) for k, v in sorted(old_pairs.items())
                     if v.get("kind") == "conflict" and pairs.get(k, {}).get("kind") != "conflict"]
    return pairs


def _across_machines(repo, ov, sides: dict[str, dict], data: dict, scan: Scan) -> dict[str, Any]:
    """Shared mode (:mod:`.remote`): publish this machine's moved tips, compare its tasks with other machines';
    what the cache keeps of it ({} without shared mode)."""
    from . import remote

    stamp = remote.stamp(repo.bus.conn)
    if stamp is None:
        return {}
    tip = sides.get(cache.INTEGRATION, {}).get("commit")
    mine = {t: s for t, s in sides.items() if t != cache.INTEGRATION}
    pairs, new = remote.compare(repo, ov, mine, tip, data.get("remote_pairs") or {})
    scan.new_conflicts += [_remote_pair(v) for v in new]
    published = remote.publish(repo, ov, mine, tip, data.get("published") or {})
    return {"remote_pairs": pairs, "published": published, "remote_stamp": stamp}


def _remote_pairs(data: dict) -> list[Pair]:
    return [_remote_pair(v) for _, v in sorted((data.get("remote_pairs") or {}).items()) if v.get("kind") != "clean"]


def _remote_pair(v: dict) -> Pair:
    """A pair of this machine's task ``a`` and another machine's task ``b`` (:mod:`.remote`)."""
    return Pair(v["a"], v["b"], v["kind"], list(v.get("files", [])), dict(v.get("conflicts", {})), v.get("machine"))


def _pair(a: str, b: str, v: dict) -> Pair:
    return Pair(a, b, v["kind"], list(v.get("files", [])), dict(v.get("conflicts", {})))


def cached(common_dir) -> Scan:
    """The last result, as it is (never recomputes)."""
    data = cache.load(common_dir)
    scan = Scan(at=data.get("at"), integration=data.get("integration"))
    scan.pairs = [_pair(*k.split("|"), v) for k, v in sorted(data["pairs"].items()) if v.get("kind") != "clean"]
    scan.pairs += _remote_pairs(data)
    return scan


def among(result: Scan, live: set[str]) -> Scan:
    """``result`` without the pairs of a task that is no longer live (finished since it was computed): a
    COMPLETED, FAILED or cancelled task collides with nothing."""
    result.pairs = [p for p in result.pairs if all(t == cache.INTEGRATION or t in live for t in (p.a, p.b))]
    return result


__all__ = ["LIVE", "Pair", "Scan", "among", "cached", "recompute"]
