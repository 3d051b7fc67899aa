"""The radar tells the truth (issue 37): a conflict belongs to the work that makes it, a verdict is never reused
after either side changed (uncommitted work included), a conflict gone is said to be gone, and the verdicts
agree with `git merge-tree` (bench/radar_truth.py, small)."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.repos.build import git, write
from radar_support import commit_file, radar_rounds, spawn
from waiting import wait_until

CALC = "".join(f"def f{i}(x):  # line {i}\n" if i % 2 else f"    return x + {i}\n" for i in range(1, 21))
APP = "".join(f"value_{i} = {i}\n" for i in range(1, 31))


def line(text: str, n: int, new: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[n - 1] = new + "\n"
    return "".join(lines)


def conflicts(gw, work: Path, *, refresh: bool = True) -> set[tuple[str, str]]:
    res = gw(["conflicts", "--json", *(["--refresh"] if refresh else [])], work)
    assert res.code == 0, res
    return {(p["a"], p["b"]) for p in json.loads(res.out)["pairs"] if p["kind"] == "conflict"}


def merged(gw, work: Path, tree: Path, task: str) -> None:
    for args, cwd in ((["start"], tree), (["done"], tree), (["approve", task], work), (["merge", task], work)):
        res = gw(args, cwd)
        assert res.code == 0, (args, res)


def test_a_task_left_behind_conflicts_with_the_integration_branch_only(repo, gw):
    """The issue's scenario: `old` and `new` change line 10 of calc.py, `new` is merged; `fresh` (no commit) and
    `p1` (another file) are spawned from the new main. Only `old <-> integration` is true."""
    work = repo.work
    commit_file(work, "calc.py", CALC, "calc")
    old, new = spawn(gw, work, "old"), spawn(gw, work, "new")
    commit_file(old, "calc.py", line(CALC, 10, "    return x * 10  # old"), "old: line 10")
    commit_file(new, "calc.py", line(CALC, 10, "    return x - 10  # new"), "new: line 10")
    merged(gw, work, new, "new")
    spawn(gw, work, "fresh")
    p1 = spawn(gw, work, "p1")
    commit_file(p1, "other.txt", "other\n", "p1: other")

    assert conflicts(gw, work) == {("old", "@integration")}
    text = gw("conflicts", work).out
    assert "fresh" not in text and "p1" not in text, text
    # old is told of the conflict that exists, with its own line (by this recompute or the one merge started)
    assert wait_until(lambda: [r.content for r in radar_rounds(work, "old")][-1:] == [
        "your work conflicts with the integration branch (main): calc.py (your lines 10); see `git worker conflicts`"],
        30, fail=False), [r.content for r in radar_rounds(work, "old")]
    # nobody is told of a conflict that does not exist
    assert radar_rounds(work, "fresh") == [] and radar_rounds(work, "p1") == []
    notice = p1 / git(p1, "rev-parse", "--git-path", "nerve/radar-notice")
    assert not notice.exists()


def test_two_tasks_conflict_only_through_their_own_changes(repo, gw):
    """A task behind the integration branch and one spawned after it moved: the pair is their own lines, and each
    is told its own line numbers (the old task's file is 5 lines shorter than the new main's)."""
    work = repo.work
    commit_file(work, "calc.py", CALC, "calc")
    behind = spawn(gw, work, "a-behind")
    commit_file(work, "calc.py", "".join(f"# header {i}\n" for i in range(5)) + CALC, "main: a header")
    ahead = spawn(gw, work, "b-ahead")
    commit_file(behind, "calc.py", line(CALC, 12, "    return x * 12  # behind"), "behind: line 12")
    ahead_text = "".join(f"# header {i}\n" for i in range(5)) + line(CALC, 12, "    return x - 12  # ahead")
    commit_file(ahead, "calc.py", ahead_text, "ahead: line 12 (17 of the new main)")

    res = gw("conflicts --json --refresh", work)
    pairs = {(p["a"], p["b"]): p for p in json.loads(res.out)["pairs"]}
    assert pairs[("a-behind", "b-ahead")]["kind"] == "conflict"
    assert pairs[("a-behind", "b-ahead")]["conflicts"]["calc.py"] == [[12, 12]]  # in a-behind's own file
    assert ("b-ahead", "@integration") not in pairs  # its base is the integration tip: nothing landed since
    assert pairs[("a-behind", "@integration")]["kind"] == "overlap"  # the header merges cleanly with line 12
    said = {t: [r.content for r in radar_rounds(work, t)] for t in ("a-behind", "b-ahead")}
    assert said["a-behind"] == ["your work conflicts with task b-ahead: calc.py (your lines 12); see `git worker conflicts`"]
    assert said["b-ahead"] == ["your work conflicts with task a-behind: calc.py (your lines 17); see `git worker conflicts`"]


def test_a_conflict_gone_is_said_to_be_gone_and_a_finished_task_is_never_named(repo, gw, sh):
    work = repo.work
    commit_file(work, "calc.py", CALC, "calc")
    t1, t2, t3 = spawn(gw, work, "t1"), spawn(gw, work, "t2"), spawn(gw, work, "t3")
    commit_file(t1, "calc.py", line(CALC, 4, "    return 1"), "t1")
    commit_file(t2, "calc.py", line(CALC, 4, "    return 2"), "t2")
    commit_file(t3, "calc.py", line(CALC, 14, "    return 3"), "t3")
    write(t1, "calc.py", line(line(CALC, 4, "    return 1"), 14, "    return 1"))  # uncommitted: also t3's line
    assert conflicts(gw, work) == {("t1", "t2"), ("t1", "t3")}
    # t3 moves its change away; t2 is cancelled
    commit_file(t3, "calc.py", line(CALC, 18, "    return 3"), "t3: elsewhere")
    assert gw(["cancel", "t2"], work).code == 0
    assert conflicts(gw, work) == set()

    def resolved(task: str) -> set[str]:
        return {r.content for r in radar_rounds(work, task) if r.metadata.get("radar") == "resolved"}

    # told by this recompute, or by the one cancel started in the background
    assert wait_until(lambda: resolved("t1") == {"resolved: your work no longer conflicts with task t2 (now FAILED)",
                                                 "resolved: your work no longer conflicts with task t3"}, 30, fail=False)
    assert resolved("t3") == {"resolved: your work no longer conflicts with task t1"}
    assert radar_rounds(work, "t2")[-1].metadata["radar"] == "conflict"  # a finished task's thread is left alone
    # the next hook message of t1 names neither (their notices were withdrawn)
    res = sh(["git", "commit", "-qam", "t1: both"], t1)
    assert res.code == 0 and "git-nerve radar" not in res.err, res
    assert conflicts(gw, work, refresh=True) == set()
    assert [r.content for r in radar_rounds(work, "t1")][-1].startswith("resolved")  # nothing told twice


def test_a_verdict_is_not_reused_after_uncommitted_work_changed(repo, gw):
    """The ta/tb/tc race, deterministic: ta's commit is looked at before tb's uncommitted edit of the same line
    lands; the recompute that tc's commit asks for must find ta <-> tb."""
    from git_nerve.radar import background, scan
    from git_nerve.worker.lifecycle import open_repo

    work = repo.work
    commit_file(work, "app.py", APP, "app")
    ta, tb, tc = (spawn(gw, work, t) for t in ("ta", "tb", "tc"))
    commit_file(ta, "app.py", line(APP, 20, "value_20 = 'ta'"), "ta: line 20")
    with open_repo(work) as r:
        first = scan.recompute(r, changed=["ta"])  # tb's worktree is clean when it is looked at
    assert [(p.a, p.b) for p in first.pairs] == []
    write(tb, "app.py", line(APP, 20, "value_20 = 'tb'"))  # uncommitted
    commit_file(tc, "other.py", "x = 1\n", "tc: another file")
    assert background.main(["--cwd", str(tc), "--task", "tc"]) == 0  # what tc's post-commit hook starts
    assert conflicts(gw, work, refresh=False) == {("ta", "tb")}
    # and the other way: tb's edit undone, the next recompute (any task's) drops the pair
    git(tb, "checkout", "--", "app.py")
    commit_file(tc, "other.py", "x = 2\n", "tc: again")
    assert background.main(["--cwd", str(tc), "--task", "tc"]) == 0
    assert conflicts(gw, work, refresh=False) == set()
    assert [r.content for r in radar_rounds(work, "tb")][-1] == "resolved: your work no longer conflicts with task ta"


def test_the_race_through_real_commits(repo, gw, sh):
    work = repo.work
    commit_file(work, "app.py", APP, "app")
    ta, tb, tc = (spawn(gw, work, t) for t in ("ta", "tb", "tc"))
    write(ta, "app.py", line(APP, 20, "value_20 = 'ta'"))
    assert sh(["git", "commit", "-qam", "ta: line 20"], ta).code == 0  # through the hooks: a recompute starts
    write(tb, "app.py", line(APP, 20, "value_20 = 'tb'"))
    write(tc, "other.py", "x = 1\n")
    git(tc, "add", "other.py")
    assert sh(["git", "commit", "-qm", "tc: another file"], tc).code == 0

    found = wait_until(lambda: conflicts(gw, work, refresh=False) == {("ta", "tb")}, 60, interval=0.2, fail=False)
    assert found, (work / ".git" / "nerve" / "radar.log").read_text()


def test_the_radar_agrees_with_git_merge_tree(repo, monkeypatch):
    """bench/radar_truth.py, small: tasks in phases (left behind, merged, spawned after merges, uncommitted work),
    every verdict against `git merge-tree`."""
    import os
    import sys

    root = Path(__file__).resolve().parent.parent
    monkeypatch.syspath_prepend(str(root))
    from bench import radar_truth

    files = radar_truth.generated_files(seed=3, count=3, functions=6)
    work = radar_truth.repository(repo.work.parent / "truth", dict(os.environ), files, None)
    counts = radar_truth.measure(work, dict(os.environ), sorted(files), tasks=6, phases=3, seed=3)
    assert counts.pairs >= 30 and counts.tp > 0 and counts.tn > 0, counts
    assert (counts.fp, counts.fn) == (0, 0), counts.wrong
    assert sys.modules["bench.radar_truth"] is radar_truth


def test_a_finished_rebase_recomputes_the_marks(repo, gw, sh):
    """t1's conflicting commit is dropped by a rebase in its worktree (no commit follows): the radar hears of it
    from the post-rewrite hook, the mark goes and both threads hear it is resolved."""
    work = repo.work
    commit_file(work, "calc.py", CALC, "calc")
    t1, t2 = spawn(gw, work, "t1"), spawn(gw, work, "t2")
    commit_file(t1, "calc.py", line(CALC, 6, "    return 'one'"), "t1: line 6")
    commit_file(t1, "notes.txt", "notes\n", "t1: notes")
    commit_file(t2, "calc.py", line(CALC, 6, "    return 'two'"), "t2: line 6")
    assert conflicts(gw, work) == {("t1", "t2")}
    res = sh(["git", "rebase", "-q", "--onto", "HEAD~2", "HEAD~1"], t1)  # drops "t1: line 6", through the hooks
    assert res.code == 0, res

    gone = wait_until(lambda: conflicts(gw, work, refresh=False) == set(), 60, interval=0.2, fail=False)
    assert gone, (work / ".git" / "nerve" / "radar.log").read_text()
    assert wait_until(lambda: [r.content for r in radar_rounds(work, "t2")][-1:] == [
        "resolved: your work no longer conflicts with task t1"], 30, fail=False), radar_rounds(work, "t2")


def test_a_hook_message_never_names_a_finished_task(repo, gw, sh):
    """The notice a conflict left for t1's next commit names t2; t2 is merged: the very next commit of t1 (before
    any recompute could run) does not print it."""
    work = repo.work
    commit_file(work, "calc.py", CALC, "calc")
    t1, t2 = spawn(gw, work, "t1"), spawn(gw, work, "t2")
    commit_file(t1, "calc.py", line(CALC, 8, "    return 'one'"), "t1: line 8")
    commit_file(t2, "calc.py", line(CALC, 8, "    return 'two'"), "t2: line 8")
    commit_file(work, "other.txt", "main\n", "main moved on")  # another file: t1 is not in conflict with main
    assert conflicts(gw, work) == {("t1", "t2")}
    notice = t1 / git(t1, "rev-parse", "--git-path", "nerve/radar-notice")
    assert "conflicts with task t2:" in notice.read_text()
    merged(gw, work, t2, "t2")
    write(t1, "more.txt", "more\n")
    git(t1, "add", "more.txt")
    res = sh(["git", "commit", "-qm", "t1: more"], t1)
    assert res.code == 0 and "task t2" not in res.err, res


def test_a_quick_pass_does_not_resolve_a_conflict_of_uncommitted_work(repo, gw):
    """t1's uncommitted edit conflicts with t3; t1 commits something else: the quick pass (committed work only)
    must not say "resolved", nor the look at t1's worktree then say the conflict anew."""
    from git_nerve.radar import background

    work = repo.work
    commit_file(work, "calc.py", CALC, "calc")
    t1, t3 = spawn(gw, work, "t1"), spawn(gw, work, "t3")
    commit_file(t3, "calc.py", line(CALC, 14, "    return 3"), "t3: line 14")
    write(t1, "calc.py", line(CALC, 14, "    return 1"))  # uncommitted
    assert conflicts(gw, work) == {("t1", "t3")}
    told = [r.content for r in radar_rounds(work, "t3")]
    assert len(told) == 1
    commit_file(t1, "notes.txt", "notes\n", "t1: notes")  # the conflicting edit stays uncommitted
    assert background.main(["--cwd", str(t1), "--task", "t1"]) == 0  # what t1's post-commit hook starts
    assert conflicts(gw, work, refresh=False) == {("t1", "t3")}
    assert [r.content for r in radar_rounds(work, "t3")] == told


def test_a_line_of_the_replayed_file_is_numbered_in_the_tasks_own_file():
    import pygit2

    from git_nerve.git.overlap import map_line

    old = "".join(f"{i}\n" for i in range(1, 11))
    new = "x\ny\n" + old.replace("5\n", "five\nFIVE\n")
    patch = pygit2.Patch.create_from(old.encode(), new.encode(), context_lines=0)
    assert [map_line(patch.hunks, n) for n in (1, 4, 5, 6, 10)] == [3, 6, 7, 9, 13]


def test_a_notice_line_names_its_other_task():
    from git_nerve.radar.notice import other_task

    assert other_task("git-nerve radar: your work conflicts with task t2: src/app.py (your lines 2)") == "t2"
    assert other_task("git-nerve radar: your work conflicts with task b (on machine one): a.py (conflict)") == "b"
    assert other_task("git-nerve radar: your work conflicts with the integration branch (main): a.py") is None
