"""Shared mode (issue 24): the conflict radar compares tasks of different machines through a real bare remote
(file://). Each machine publishes, at the commits its hooks see, what its tasks changed; after a sync either
machine's `git worker conflicts` names the pair, the other task marked with its machine."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fixtures.repos import build
from tests import shared_support as ss

APP = "def greet(name):\n    return f'hello {name}'\n"


def _worktree(work: Path, task: str) -> Path:
    from git_nerve.bus import workers

    with ss.bus(work) as b:
        return Path(workers.get(b.conn, task).worktree)


def _published(work: Path, task: str, commit: str, timeout: float = 60) -> None:
    """Wait for the radar the commit's hook started (in the background) to publish the task's footprint."""
    from git_nerve.bus import messages

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with ss.bus(work) as b:
            if any(m.payload.get("commit") == commit for m in messages.for_task(b.conn, task, kinds=("radar_side",))):
                return
        time.sleep(0.2)
    raise AssertionError(f"{task}'s footprint at {commit} was never published")


def _pairs(work: Path) -> list[tuple]:
    data = json.loads(ss.ok(["worker", "conflicts", "--json"], work).stdout)
    return sorted((p["a"], p["b"], p.get("machine"), p["kind"], tuple(p["files"])) for p in data["pairs"]
                  if "@integration" not in (p["a"], p["b"]))


def _task(work: Path, task: str) -> Path:
    ss.ok(["worker", "spawn", task], work)
    ss.ok(["worker", "start", "--task", task], work)
    return _worktree(work, task)


def test_the_radar_names_a_conflict_between_tasks_of_two_machines(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    mine = build.commit_file(_task(one, "a"), "src/app.py", "def greet(name):\n    return f'hi {name}'\n")
    theirs = build.commit_file(_task(two, "b"), "src/app.py", "def greet(name):\n    return f'good day {name}'\n")
    other = build.commit_file(_task(two, "c"), "docs/guide.md", "# Guide\n\n## Install\n\nUse pip.\n")
    for work, task, commit in ((one, "a", mine), (two, "b", theirs), (two, "c", other)):
        _published(work, task, commit)  # the post-commit hook's recompute published it
    assert _pairs(one) == [] and _pairs(two) == []  # nothing synced: each machine sees only its own tasks
    for work in (one, two, one):
        ss.ok(["nerve", "sync"], work)
    assert _pairs(one) == [("a", "b", "two", "conflict", ("src/app.py",))]
    assert _pairs(two) == [("b", "a", "one", "conflict", ("src/app.py",))]  # c touched other files: no pair
    shown = json.loads(ss.ok(["worker", "conflicts", "--json"], two).stdout)
    pair = next(p for p in shown["pairs"] if p["b"] == "a")
    assert pair["conflicts"] == {"src/app.py": [[2, 2]]}
    text = ss.ok(["worker", "conflicts"], two).stdout
    assert "CONFLICT  b <-> a (machine one): src/app.py (lines 2 of b)" in text
    rows = {r["task_id"]: r for r in json.loads(ss.ok(["worker", "status", "--json"], two).stdout)}
    assert rows["b"]["radar"] == ["conflict: a (machine one)"] and rows["c"]["radar"] == []
    assert rows["a"]["machine"] == "one" and rows["a"]["radar"] == ["conflict: b (this machine)"]
    assert "! conflict: a (machine one)" in ss.ok(["worker", "status"], two).stdout
    # once a's commit is here (its branch pushed by `done`, fetched by plain git), the pair is compared exactly
    ss.ok(["worker", "done", "--task", "a"], one)
    build.git(two, "fetch", "-q", "origin")
    for work in (one, two):
        ss.ok(["nerve", "sync"], work)
    exact = json.loads(ss.ok(["worker", "conflicts", "--json"], two).stdout)
    assert [(p["a"], p["b"], p["machine"], p["conflicts"]) for p in exact["pairs"] if p["b"] == "a"] == [
        ("b", "a", "one", {"src/app.py": [[2, 2]]})]
    with ss.bus(two) as b:
        from git_nerve.radar import cache

        record = cache.load(b.path.parent.parent)["remote_pairs"]["b|one:a"]
    assert record["inputs"][-1] is True  # compared from a's commit, not its footprint
    # the agent of b heard of it in its own thread; a's thread is its holder's alone (no round of it made here)
    assert any(r["role"] == "radar" and "task a (on machine one)" in r["content"]
               for r in json.loads(ss.ok(["nerve", "thread", "b", "--json"], two).stdout)["rounds"])
    assert all(r["role"] != "radar" or "machine two" in r["content"]
               for r in json.loads(ss.ok(["nerve", "thread", "a", "--json"], two).stdout)["rounds"])


def test_a_task_of_another_machine_on_other_lines_or_finished_is_not_flagged(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    long = "".join(f"line {i}\n" for i in range(1, 41))
    build.git(one, "pull", "-q")  # the file both edit, far apart
    build.commit_file(one, "notes.txt", long)
    build.git(one, "push", "-q", "origin", "HEAD:main")
    build.git(two, "pull", "-q")
    mine = build.commit_file(_task(one, "a"), "notes.txt", long.replace("line 3\n", "line three\n"))
    theirs = build.commit_file(_task(two, "b"), "notes.txt", long.replace("line 30\n", "line thirty\n"))
    _published(one, "a", mine)
    _published(two, "b", theirs)
    for work in (one, two, one):
        ss.ok(["nerve", "sync"], work)
    assert _pairs(two) == [("b", "a", "one", "overlap", ("notes.txt",))]  # same file, merges cleanly
    ss.ok(["worker", "cancel", "a"], one)
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)
    assert _pairs(two) == []  # a finished task collides with nothing


def test_footprints_agree_with_the_in_memory_merge(tmp_path):
    """What another machine's radar concludes from two footprints (no commits) is what merging the two commits
    concludes: the same lines, adjacent lines, an insertion at the same place conflict; lines far apart merge."""
    from git_nerve.git import overlap

    repo = build.simple(tmp_path / "r").work
    text = "".join(f"line {i}\n" for i in range(1, 21))
    base = build.commit_file(repo, "f.txt", text)
    cases = {
        "same line": (text.replace("line 5\n", "five\n"), text.replace("line 5\n", "FIVE\n")),
        "adjacent lines": (text.replace("line 5\n", "five\n"), text.replace("line 6\n", "six\n")),
        "same insertion point": (text.replace("line 9\n", "line 9\nnew a\n"), text.replace("line 9\n", "line 9\nnew b\n")),
        "far apart": (text.replace("line 2\n", "two\n"), text.replace("line 18\n", "eighteen\n")),
        "other files": (None, None),
    }
    for name, (mine, theirs) in cases.items():
        tips = []
        for i, new in enumerate((mine, theirs)):
            build.git(repo, "checkout", "-q", "-B", f"side{i}", base)
            tips.append(build.commit_file(repo, "f.txt" if new else f"other{i}.txt", new or "x\n"))
        ov = overlap.Repo(repo)
        exact = ov.compare(*(overlap.Side(t, ov.tree_of(t)) for t in tips))
        a, b = (overlap.footprint(ov, t, ov.tree_of(t), base) for t in tips)
        guessed = overlap.compare_footprints(a, b)
        assert (guessed.kind, guessed.files) == (exact.kind, exact.files), name
        if exact.kind == "conflict":
            assert set(guessed.conflicts) == set(exact.conflicts), name
