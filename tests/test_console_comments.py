"""Issue 38, what was left: a reviewer's line comments stay on their lines after the agent's next round (marked
outdated when the line moved or changed, at the file's top when it is gone), and a task in conflict says with what,
where and how to resolve it, with a note to its agent one click away. The real server on real repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console_support import Console, flagged_pair, post_action, worktree_of
from fixtures.repos.build import commit_file
from git_nerve.git.diffs import follow_line


def _get(c: Console, path: str):
    status, text = c.request("GET", path)
    return status, json.loads(text)


@pytest.mark.parametrize("line, spans, where", [
    (3, [], (3, "same")),
    (3, [(5, 1, 5, 2)], (3, "same")),            # a change below it
    (3, [(0, 0, 1, 2)], (5, "moved")),           # two lines inserted at the top
    (3, [(1, 0, 2, 1)], (4, "moved")),           # one inserted after line 1
    (3, [(3, 0, 4, 1)], (3, "same")),            # one inserted after it
    (3, [(2, 2, 2, 1)], (2, "changed")),         # lines 2-3 rewritten as one line: the last of what replaced them
    (3, [(3, 1, 3, 0)], (None, "gone")),         # deleted, nothing in its place
    (6, [(1, 2, 1, 0), (4, 1, 2, 3)], (6, "same")),  # two lines gone above, two more added: back where it was
    (7, [(1, 2, 1, 0), (4, 1, 2, 4)], (8, "moved")),
])
def test_a_line_follows_gits_hunks(line, spans, where):
    assert follow_line(line, spans) == where


A = "one\ntwo\nthree\nfour\nfive\nsix\n"
A2 = "one\ntwo\nTHREE\nfour\ninserted\nfive\nsix\n"  # line 3 changed, line 5 moved to 6


@pytest.fixture
def reviewed(repo, gw):
    """t1 IN_REVIEW (a.txt, g.txt), changes requested from the console with line comments, then its next round
    (a.txt: line 3 rewritten, a line inserted above line 5; g.txt: line 2 deleted; k.txt untouched) and done."""
    work = repo.work
    assert gw("spawn t1", work).code == 0
    wt = worktree_of(work, "t1", gw)
    assert gw("start", wt).code == 0
    commit_file(wt, "a.txt", A, "t1: a")
    commit_file(wt, "g.txt", "x\ny\nz\n", "t1: g")
    commit_file(wt, "k.txt", "keep\n", "t1: k")
    assert gw("done", wt).code == 0
    c = Console(work)
    first = _get(c, "/api/task/t1/diff?path=a.txt")[1]
    comments = [{"path": "a.txt", "line": n, "text": f"about line {n}", "side": "new", "at": first["head"]}
                for n in (1, 3, 5)]
    comments += [{"path": "g.txt", "line": 2, "text": "y is wrong", "at": first["head"]},
                 {"path": "k.txt", "line": 1, "text": "fine"}]  # no `at`: the tip request-changes recorded
    status, body = post_action(c, "request_changes", {"task": "t1", "comment": "see the lines", "comments": comments})
    assert status == 200, body
    commit_file(wt, "a.txt", A2, "t1: the review")
    commit_file(wt, "g.txt", "x\nz\n", "t1: no y")
    assert gw("done", wt).code == 0
    yield c, work, first["head"]
    assert c.stop() == 0


def _earlier(c, path: str, since: bool = False):
    status, fd = _get(c, f"/api/task/t1/diff?path={path}" + ("&since=review" if since else ""))
    assert status == 200, fd
    return {e["made_on"]: e for e in fd["earlier"]}


def test_line_comments_stay_on_their_lines_after_the_next_round_outdated_when_moved_or_changed(reviewed, gn):
    c, work, reviewed_tip = reviewed
    for since in (False, True):  # the whole change and "since your last review" alike
        e = _earlier(c, "a.txt", since)
        assert (e[1]["line"], e[1]["outdated"], e[1]["why"]) == (1, False, None), e
        assert (e[3]["line"], e[3]["outdated"], e[3]["why"]) == (3, True, "the line changed since"), e
        assert (e[5]["line"], e[5]["outdated"], e[5]["why"]) == (6, True, "the line moved (it was line 5)"), e
        assert e[5]["text"] == "about line 5" and e[5]["review_tip"] == reviewed_tip
        g = _earlier(c, "g.txt", since)
        assert (g[2]["line"], g[2]["outdated"]) == (None, True) and g[2]["why"] == "its line is gone (it was line 2)"
    # a file unchanged since: its comment on its line (in the whole change; "since" does not show the file)
    k = _earlier(c, "k.txt")
    assert (k[1]["line"], k[1]["outdated"], k[1]["text"]) == (1, False, "fine")
    assert _get(c, "/api/task/t1/files?since=review")[1]["files"] and \
        "k.txt" not in {f["path"] for f in _get(c, "/api/task/t1/files?since=review")[1]["files"]}
    # the agent read them as `path:line: text` lines; a commit's own diff carries none
    assert "a.txt:5: about line 5" in gn("thread t1", work).out
    commit = next(x["sha"] for x in _get(c, "/api/task/t1/commits")[1] if x["subject"] == "t1: the review")
    assert _get(c, f"/api/task/t1/diff?path=a.txt&commit={commit}")[1]["earlier"] == []


def test_a_line_comment_with_a_bad_side_or_commit_is_refused_and_nothing_moves(repo, gw):
    work = repo.work
    assert gw("spawn t1", work).code == 0
    wt = worktree_of(work, "t1", gw)
    assert gw("start", wt).code == 0
    commit_file(wt, "a.txt", A, "t1: a")
    assert gw("done", wt).code == 0
    c = Console(work)
    try:
        for bad, said in (({"side": "left"}, "'side' must be 'new' or 'old'"), ({"at": "HEAD~1"}, "'at' must be a commit id")):
            status, body = post_action(c, "request_changes", {"task": "t1", "comments": [
                {"path": "a.txt", "line": 1, "text": "x", **bad}]})
            assert status == 400 and body["error"] == f"comments[0]: {said}" and body["exit_code"] == 2, body
        assert json.loads(gw("status --json", work).out)[0]["state"] == "IN_REVIEW"
    finally:
        assert c.stop() == 0


def test_a_conflicted_task_says_what_conflicts_where_the_clis_recipe_and_a_rebase_note_reaches_its_thread(repo, gw, gn):
    from fixtures.repos import worker as wk

    work = repo.work
    wt = wk.drive(work, "c1", "CONFLICTED", greeting="hey")
    assert gw("conflicts --refresh", work).code in (0, 1)
    cli = gw("done", wt)  # what the CLI prints for it
    assert cli.code == 6, cli.err
    c = Console(work)
    try:
        status, d = _get(c, "/api/task/c1")
        assert status == 200, d
        b = d["conflict"]
        assert b["what"] == "rebase conflict with main; c1 is CONFLICTED" and b["files"] == ["src/app.py"], b
        assert b["recipe"][0] == f"Worktree: {wt}" and b["recipe"][1:] and all(s in cli.err for s in b["recipe"][1:]), \
            (b["recipe"], cli.err)
        # the radar's lines of c1's own version (its greeting) that conflict with main
        assert [(f["with"], f["path"]) for f in b["flagged"]] == [("main", "src/app.py")], b
        assert b["flagged"][0]["lines"].startswith("2"), b
        assert b["note"].startswith("Your branch conflicts with main in src/app.py: rebase onto main")
        status, told = post_action(c, "tell", {"task": "c1", "kind": "note", "text": b["note"]})
        assert status == 200 and told["describe"].startswith("queued #"), told
        shown = _get(c, "/api/task/c1")[1]
        assert shown["told"][-1]["text"] == b["note"]
        assert "rebase onto main and resolve the conflicts" in gn("thread c1", work).out
        # a task in no conflict has no banner
        wk.drive(work, "w1", "WORKING")
        assert _get(c, "/api/task/w1")[1]["conflict"] is None
    finally:
        assert c.stop() == 0


def test_a_merge_that_conflicted_gives_the_merge_recipe(repo, gw):
    from fixtures.repos import worker as wk

    work = repo.work
    wk.drive(work, "m1", "APPROVED", greeting="hey")
    commit_file(work, "src/app.py", wk.app_text("main says yo"), "main: greeting")
    cli = gw("merge m1", work)
    assert cli.code == 6, cli.err
    c = Console(work)
    try:
        b = _get(c, "/api/task/m1")[1]["conflict"]
        assert b["what"] == "merging m1 into main conflicts; the task is back to WORKING" and b["files"] == ["src/app.py"]
        assert b["recipe"] and all(s in cli.err for s in b["recipe"]), (b["recipe"], cli.err)
        assert b["note"].startswith("Your branch conflicts with main in src/app.py")
    finally:
        assert c.stop() == 0


def test_two_tasks_on_the_same_lines_get_a_banner_naming_each_other_and_no_rebase_note(repo, gw):
    """A radar conflict between two tasks: each one's banner names the other and the lines; a rebase would not
    resolve it, so no note is offered."""
    flagged_pair(repo.work, gw)
    c = Console(repo.work)
    try:
        for me, other in (("a1", "b2"), ("b2", "a1")):
            b = _get(c, f"/api/task/{me}")[1]["conflict"]
            assert b["what"] == f"the conflict radar flags lines of {me} that {other} also change", b
            assert b["flagged"] == [{"with": other, "path": "src/app.py", "lines": "2"}] and b["recipe"] == [], b
            assert b["note"] is None and b["files"] == []
    finally:
        assert c.stop() == 0
