"""The radar is never stale (issue 27): what changes it (done, merge, cancel) recomputes it in the background,
finished tasks carry no marks, and after a merge a task that now conflicts with the integration branch says so
without `--refresh`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fixtures.repos.build import git, write
from git_nerve.radar import queue
import radar_support
from radar_support import commit_file

APP = "def greet(name):\n    return f'hello {name}'\n"


def spawn(gw, work: Path, task: str) -> Path:
    return radar_support.spawn(gw, work, task, describe=False)


def pairs(gw, work: Path) -> set[tuple[str, str, str]]:
    res = gw("conflicts --json", work)
    assert res.code == 0, res
    return {(p["a"], p["b"], p["kind"]) for p in json.loads(res.out)["pairs"]}


def marks(gw, work: Path) -> dict[str, list[str]]:
    res = gw("status --json", work)
    assert res.code == 0, res
    return {r["task_id"]: r["radar"] for r in json.loads(res.out)}


def wait_until(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_finished_tasks_carry_no_marks(repo, gw):
    work = repo.work
    t1, t2, t3 = (spawn(gw, work, t) for t in ("t1", "t2", "t3"))
    commit_file(t1, "src/app.py", APP.replace("hello", "hi"), "t1: hi")
    commit_file(t2, "src/app.py", APP.replace("hello", "howdy"), "t2: howdy")
    commit_file(t3, "src/app.py", APP.replace("hello", "hey"), "t3: hey")
    assert gw("conflicts --refresh", work).code == 0
    assert ("t1", "t2", "conflict") in pairs(gw, work) and ("t1", "t3", "conflict") in pairs(gw, work)
    assert gw(["cancel", "t1", "--reason", "dropped"], work).code == 0  # FAILED: no radar mark names it any more
    assert not {p for p in pairs(gw, work) if "t1" in p[:2]}
    shown = marks(gw, work)
    assert shown["t1"] == [] and "conflict: t1" not in shown["t2"] and "conflict: t3" in shown["t2"]
    for t, tree in (("t2", t2),):
        assert gw("start", tree).code == 0 and gw("done", tree).code == 0
        assert gw(["approve", t], work).code == 0 and gw(["merge", t], work).code == 0
    shown = marks(gw, work)
    assert shown["t2"] == [] and not {p for p in pairs(gw, work) if "t2" in p[:2]}  # COMPLETED: none either
    assert all("t2" not in m for m in shown["t3"])
    # t2's change is on main now: t3 conflicts with main instead, once the merge's recompute ran
    assert wait_until(lambda: marks(gw, work)["t3"] == ["conflict: main"]), marks(gw, work)


def test_after_a_merge_the_task_that_now_conflicts_with_main_says_so_without_refresh(repo, gw):
    work = repo.work
    t1, t2 = spawn(gw, work, "t1"), spawn(gw, work, "t2")
    commit_file(t1, "src/app.py", APP.replace("hello", "hi"), "t1: hi")
    commit_file(t2, "src/app.py", APP.replace("hello", "howdy"), "t2: howdy")
    for tree in (t1, t2):
        assert gw("start", tree).code == 0 and gw("done", tree).code == 0
    assert gw("conflicts --refresh", work).code == 0
    assert pairs(gw, work) == {("t1", "t2", "conflict")}  # main has not moved yet: no conflict with it
    assert gw(["approve", "t1"], work).code == 0 and gw(["merge", "t1"], work).code == 0
    # no --refresh: the merge asked for the recompute, which runs in the background
    got = wait_until(lambda: ("t2", "@integration", "conflict") in pairs(gw, work))
    assert got, pairs(gw, work)
    assert pairs(gw, work) == {("t2", "@integration", "conflict")}
    shown = marks(gw, work)
    assert shown["t2"] == ["conflict: main"] and shown["t1"] == []
    assert wait_until(lambda: not queue.waiting(work / ".git"), 10)  # every request was taken


def test_requests_while_a_runner_works_are_coalesced_and_none_is_lost(repo):
    common = repo.work / ".git"
    steps: list[set[str] | None] = []

    def step(tasks):
        steps.append(tasks)
        if len(steps) == 1:  # requests arriving while the runner works
            queue.add(common, ["b"])
            queue.add(common, ["c"])

    queue.add(common, ["a"])
    assert queue.run(common, step) == 2
    assert steps == [{"a"}, {"b", "c"}] and not queue.waiting(common)
    queue.add(common, ["a"])
    queue.add(common, None)  # a merge: every task
    assert queue.run(common, lambda tasks: steps.append(tasks)) == 1 and steps[-1] is None


def test_the_background_recompute_also_looks_at_uncommitted_work(repo, gw):
    work = repo.work
    t1, t2, _ = (spawn(gw, work, t) for t in ("t1", "t2", "t3"))
    assert gw("conflicts --refresh", work).code == 0 and pairs(gw, work) == set()
    commit_file(t1, "src/app.py", APP.replace("hello", "hi"), "t1: hi")
    write(t2, "src/app.py", APP.replace("hello", "howdy"))  # never committed
    assert gw(["cancel", "t3", "--reason", "dropped"], work).code == 0  # asks for a recompute of every task
    assert wait_until(lambda: ("t1", "t2", "conflict") in pairs(gw, work)), pairs(gw, work)
    assert git(t2, "status", "--porcelain") == "M src/app.py"  # looked at, not touched


def racy_edit(root: Path, rel: str, text: str) -> None:
    """Change ``rel`` (to a text of the same size) the way an agent does right after a checkout: in the same
    second the index was written. Only git's racy-git check (the entry's mtime is not older than the index
    file's) tells the change from clean; the file's stat data is the one the index recorded. Made exact
    instead of timed: the file and the index are both set to one past time (``core.trustctime=false`` keeps
    ctime, which cannot be set, out of the comparison)."""
    path, index = root / rel, Path(git(root, "rev-parse", "--path-format=absolute", "--git-path", "index"))
    past = (int(time.time()) - 100) * 10**9
    assert len(path.read_bytes()) == len(text.encode())
    os.utime(path, ns=(past, past))
    git(root, "update-index", "--refresh")  # the index records the file at that mtime
    write(root, rel, text)
    os.utime(path, ns=(past, past))
    os.utime(index, ns=(past, past))
    # git itself sees the change (and, like the radar, writes no index: a status that may would smudge the entry)
    assert git(root, "--no-optional-locks", "status", "--porcelain") == "M src/app.py"


def test_a_change_made_in_the_second_the_index_was_written_is_seen(repo, gw):
    """The snapshot of uncommitted work started from a copy of the worktree's index with a new mtime, so git
    took such a change for clean and the radar compared the task's committed work only (the intermittent miss
    of the background test above)."""
    work = repo.work
    git(work, "config", "core.trustctime", "false")
    t1, t2 = spawn(gw, work, "t1"), spawn(gw, work, "t2")
    commit_file(t1, "src/app.py", APP.replace("hello", "hi"), "t1: hi")
    racy_edit(t2, "src/app.py", APP.replace("hello", "howdy"))
    assert gw("conflicts --refresh", work).code == 0
    assert ("t1", "t2", "conflict") in pairs(gw, work), pairs(gw, work)
    assert git(t2, "show", ":src/app.py") == APP.strip()  # looked at, not touched


def test_a_link_or_directory_planted_among_the_requests_does_not_keep_the_runner_busy(repo, tmp_path):
    """What is not a request of ours is neither taken nor counted: the runner finishes (it used to go round
    forever, the pending directory never empty) and the planted things are where they were."""
    import threading

    common = repo.work / ".git"
    queue.add(common, ["a"])
    person = tmp_path / "person.txt"
    person.write_text("mine\n")
    (queue.pending_dir(common) / "planted-link").symlink_to(person)
    (queue.pending_dir(common) / "planted-dir").mkdir()
    steps: list = []
    done: list[int] = []
    runner = threading.Thread(target=lambda: done.append(queue.run(common, steps.append)), daemon=True)
    runner.start()
    runner.join(10)
    assert not runner.is_alive(), "the runner never finished"
    assert done == [1] and steps == [{"a"}] and not queue.waiting(common)
    assert (queue.pending_dir(common) / "planted-link").is_symlink() and person.read_text() == "mine\n"
    assert (queue.pending_dir(common) / "planted-dir").is_dir()


def test_a_runner_whose_looker_could_not_open_the_repository_finishes(tmp_path):
    """The recompute runs from a worktree; when that worktree is removed (its task merged) the looker thread cannot
    open the repository and ends. What is asked of it later is nobody's to do: the runner used to wait for it for
    ever, holding the radar's run lock, so no recompute ran in that clone again (a CI run left one behind)."""
    import threading

    from git_nerve.radar.looker import Looker

    looker = Looker(str(tmp_path / "removed-worktree"))
    looker.thread.join(10)
    assert not looker.thread.is_alive()
    looker.ask(["t1"])
    assert not looker.busy()
    common = tmp_path / "common"
    queue.add(common, ["t1"])
    done: list[int] = []
    runner = threading.Thread(target=lambda: done.append(queue.run(common, lambda tasks: looker.ask(["t2"]),
                                                                    busy=looker.busy)), daemon=True)
    runner.start()
    runner.join(10)
    assert not runner.is_alive() and done == [1]
    looker.close()
