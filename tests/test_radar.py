"""The conflict radar on real repositories: overlaps, conflicts, uncommitted work, freshness, telling the agents."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.repos.build import git, write
from git_nerve.bus import rounds
from git_nerve.bus.connection import Bus
from git_nerve.git.overlap import conflict_ranges
from radar_support import commit_file, radar_rounds, spawn
from waiting import wait_until

APP = "def greet(name):\n    return f'hello {name}'\n"
README = "# Project\n\nA small project.\n"


def test_pairs_conflict_overlap_and_uncommitted_work(repo, gw):
    work = repo.work
    t1, t2, t3, t4 = (spawn(gw, work, t) for t in ("t1", "t2", "t3", "t4"))
    commit_file(t1, "src/app.py", APP.replace("hello", "hi"), "t1: hi")
    commit_file(t2, "src/app.py", APP.replace("hello", "howdy"), "t2: howdy")  # same line as t1
    commit_file(t1, "README.md", README + "\nMore from t1.\n", "t1: readme tail")
    commit_file(t3, "README.md", "# Project, by t3\n\nA small project.\n", "t3: readme title")  # same file, other lines
    write(t4, "src/app.py", APP.replace("hello", "hey"))  # uncommitted, conflicts with t1 and t2

    res = gw("conflicts --json --refresh", work)
    assert res.code == 0, res
    data = json.loads(res.out)
    pairs = {(p["a"], p["b"]): p for p in data["pairs"]}
    assert pairs[("t1", "t2")]["kind"] == "conflict" and pairs[("t1", "t2")]["conflicts"]["src/app.py"] == [[2, 2]]
    assert pairs[("t1", "t3")]["kind"] == "overlap" and pairs[("t1", "t3")]["files"] == ["README.md"]
    assert pairs[("t1", "t4")]["kind"] == "conflict" and pairs[("t2", "t4")]["kind"] == "conflict"
    assert ("t2", "t3") not in pairs and ("t3", "t4") not in pairs  # no file in common: not listed
    # nothing was touched: t4's edit is still uncommitted, its index unchanged
    assert git(t4, "status", "--porcelain") == "M src/app.py"

    text = gw("conflicts", work).out
    assert "CONFLICT  t1 <-> t2: src/app.py (lines 2 of t1)" in text
    assert "overlap   t1 <-> t3: README.md (merges cleanly)" in text

    status = gw("status", work).out
    assert "! conflict: t2" in status and "! overlap: t3" in status
    rows = {r["task_id"]: r for r in json.loads(gw("status --json", work).out)}
    assert "conflict: t1" in rows["t2"]["radar"]

    # both agents are told, once, in their threads and by a notice their next hook message prints
    assert any("t2" in r.content and "src/app.py" in r.content for r in radar_rounds(work, "t1"))
    assert any("t1" in r.content for r in radar_rounds(work, "t2"))
    notice = git(t1, "rev-parse", "--git-path", "nerve/radar-notice")
    assert "conflicts with task t2" in (t1 / notice).read_text()
    before = len(radar_rounds(work, "t1"))
    assert gw("conflicts --refresh", work).code == 0
    assert len(radar_rounds(work, "t1")) == before  # an old conflict is not news


def test_a_conflict_with_the_integration_branch(repo, gw):
    work = repo.work
    t1 = spawn(gw, work, "t1")
    commit_file(t1, "src/app.py", APP.replace("hello", "hi"), "t1: hi")
    commit_file(work, "src/app.py", APP.replace("hello", "good day"), "main moved on")
    data = json.loads(gw("conflicts --json --refresh", work).out)
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"], pair["kind"]) == ("t1", "@integration", "conflict")
    assert "integration (main)" in gw("conflicts", work).out


def test_only_pairs_whose_inputs_changed_are_recomputed(repo, gw):
    from git_nerve.radar import scan
    from git_nerve.worker.lifecycle import open_repo

    work = repo.work
    trees = [spawn(gw, work, f"t{i}") for i in range(4)]
    for i, t in enumerate(trees):
        commit_file(t, f"f{i}.txt", "x\n", f"t{i}")
    with open_repo(work) as r:
        full = scan.recompute(r)
        assert full.computed == 6 + 4 and full.reused == 0  # 6 pairs + 4 against integration
        commit_file(trees[0], "f0.txt", "y\n", "t0 again")
        again = scan.recompute(r, changed=["t0"])
        assert again.computed == 3 + 1 and again.reused == 6  # only t0's pairs


def test_a_commit_in_a_worker_refreshes_the_radar_in_the_background_and_the_next_hook_tells(repo, gw, sh):
    work = repo.work
    t1, t2 = spawn(gw, work, "t1"), spawn(gw, work, "t2")
    commit_file(t1, "src/app.py", APP.replace("hello", "hi"), "t1: hi")
    assert json.loads(gw("conflicts --json --refresh", work).out)["pairs"] == []
    write(t2, "src/app.py", APP.replace("hello", "howdy"))
    res = sh(["git", "commit", "-qam", "t2: howdy"], t2)  # through our post-commit hook
    assert res.code == 0, res

    def pairs():
        return json.loads(gw("conflicts --json", work).out)["pairs"]

    found = wait_until(pairs, 60, interval=0.2, fail=False)  # the commit did not wait for the radar; it catches up
    assert [(p["a"], p["b"], p["kind"]) for p in found] == [("t1", "t2", "conflict")]
    write(t1, "README.md", README + "more\n")
    res = sh(["git", "commit", "-qam", "t1: readme"], t1)
    assert "git-nerve radar: your work conflicts with task t2: src/app.py (your lines 2)" in res.err


def test_conflict_ranges_are_numbered_in_the_first_sides_file():
    merged = "a\n<<<<<<< ours\nb1\nb2\n=======\nB\n>>>>>>> theirs\nc\n<<<<<<< ours\nd\n||||||| base\nD0\n=======\nD\n>>>>>>> theirs\n"
    assert conflict_ranges(merged) == [(2, 3), (5, 5)]


def test_the_merge_queue_takes_tasks_in_no_conflict_first_and_a_conflict_does_not_block(repo, gw):
    work = repo.work
    t1, t2 = spawn(gw, work, "t1"), spawn(gw, work, "t2")
    commit_file(t1, "src/app.py", APP.replace("hello", "hi"), "t1: hi")
    commit_file(t2, "docs/guide.md", "# Guide\n\nRead me.\n", "t2: guide")
    for t, tree in (("t1", t1), ("t2", t2)):
        assert gw("start", tree).code == 0
        assert gw("done", tree).code == 0
        assert gw(["approve", t], work).code == 0  # t1 approved first: the older approval
    commit_file(work, "src/app.py", APP.replace("hello", "good day"), "main moved on")  # t1 now conflicts
    assert gw("conflicts --refresh", work).code == 0
    res = gw("merge --all --json", work)
    data = json.loads(res.out)
    assert [m["task_id"] for m in data["merged"]] == ["t2"], res
    assert [f["task_id"] for f in data["failed"]] == ["t1"] and data["failed"][0]["files"] == ["src/app.py"]
    with Bus(work / ".git" / "nerve" / "bus.db") as bus:
        from git_nerve.bus import messages

        order = [m.task_id for m in messages.since(bus.conn, 0) if m.kind == "state_change" and m.payload.get("by") == "merge"]
    assert order.index("t2") < order.index("t1")  # the clean task did not wait behind the conflicting one


# -- the batched queue ------------------------------------------------------------------------

CHECK = "python3 check.py"
CHECKER = "import pathlib, sys\nbad = [p.name for p in pathlib.Path('.').glob('*.txt') if 'BROKEN' in p.read_text()]\nprint('broken:', bad)\nsys.exit(1 if bad else 0)\n"


def approved_tasks(gw, work: Path, n: int, broken: set[int]) -> list[str]:
    commit_file(work, "check.py", CHECKER, "a check")
    names = []
    for i in range(n):
        t = f"b{i}"
        tree = spawn(gw, work, t)
        commit_file(tree, f"{t}.txt", ("BROKEN\n" if i in broken else "fine\n"), f"{t}: work")
        assert gw("start", tree).code == 0 and gw("done", tree).code == 0
        assert gw(["approve", t], work).code == 0
        names.append(t)
    return names


def test_a_batch_with_one_failing_task_bisects_and_sends_only_it_back(repo, gw):
    work = repo.work
    names = approved_tasks(gw, work, 4, broken={2})
    res = gw(["merge", "--all", "--batch", "4", "--check", CHECK, "--json"], work)
    data = json.loads(res.out)
    assert [m["task_id"] for m in data["merged"]] == ["b0", "b1", "b3"], res
    assert [f["task_id"] for f in data["failed"]] == ["b2"] and res.code == 7
    assert "batch of 4: 4 check run(s); passing: b0, b1, b3; failing: b2" in res.err  # not one per task, once bisected
    rows = {r["task_id"]: r["state"] for r in json.loads(gw("status --json", work).out)}
    assert rows == {"b0": "COMPLETED", "b1": "COMPLETED", "b2": "WORKING", "b3": "COMPLETED"}
    with Bus(work / ".git" / "nerve" / "bus.db") as bus:
        got = rounds.load(bus.conn, "b2", list(range(1, rounds.last_round(bus.conn, "b2") + 1)))
    assert any("broken: ['b2.txt']" in r.content for r in got)  # the check's output reached the task's thread
    assert not (work / "b2.txt").exists() and (work / "b3.txt").read_text() == "fine\n"


def test_a_batch_with_two_failing_tasks(repo, gw):
    work = repo.work
    approved_tasks(gw, work, 6, broken={1, 4})
    res = gw(["merge", "--all", "--batch", "6", "--check", CHECK, "--json"], work)
    data = json.loads(res.out)
    assert sorted(m["task_id"] for m in data["merged"]) == ["b0", "b2", "b3", "b5"], res
    assert sorted(f["task_id"] for f in data["failed"]) == ["b1", "b4"]


def test_batch_needs_all_and_check(repo, gw):
    res = gw(["merge", "--all", "--batch", "4"], repo.work)
    assert res.code == 2 and "--batch needs --all and --check" in res.err
