"""Shared mode (issue 24): `git nerve thread` and `git nerve post` of a task another machine holds, through a real
bare remote (file://): the holder's rounds reach every machine's view in the same order, budget and pages; a
post made elsewhere becomes a round of the holder's thread at its sync, once."""

from __future__ import annotations

import json

from tests import shared_support as ss


def _thread(work, *args: str) -> dict:
    return json.loads(ss.ok(["nerve", "thread", "t", "--json", *args], work).stdout)


def _rounds(view: dict) -> list[tuple]:
    return [(r["round"], r["role"], r["content"]) for r in view["rounds"]]


def test_a_thread_held_elsewhere_shows_the_holders_rounds_within_the_budget(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t", "--description", "make the parser strict"], one)
    for i in range(1, 9):  # rounds 1 to 8 (a spawn writes none)
        ss.ok(["nerve", "post", "--task", "t", "--role", "tester" if i % 2 else "reviewer", "--meta", f"n={i}",
               f"round {i}: " + "x" * 300], one)
    ss.ok(["nerve", "sync"], one)
    proc = ss.run(["nerve", "thread", "t"], two)  # not synced yet: nothing known of t here
    assert proc.returncode != 0 and "unknown thread 't'" in proc.stderr
    ss.ok(["nerve", "sync"], two)
    # the default page opens with the task's briefing (its holder's, from what its spawn published), paid first
    briefing = ss.ok(["nerve", "thread", "t"], two).stdout.split("\n\n[#1 ")[0]
    assert briefing.startswith("[task t] ASSIGNED\n") and briefing.endswith("---\nmake the parser strict")
    budget = str(700 + len(briefing))
    for args in ((), ("--budget", budget), ("--before", "5", "--budget", "400"), ("--before", "2")):
        mine, theirs = _thread(one, *args), _thread(two, *args)
        assert theirs == mine, args
    small = _thread(two, "--budget", budget)
    assert [r[0] for r in _rounds(small)] == [1, 7, 8] and small["omitted"] == [
        {"from": 2, "to": 6, "count": 5, "before": 7}]
    assert small["rounds"][2]["metadata"] == {"n": 8} and small["task"]["description"] == "make the parser strict"
    assert ss.ok(["nerve", "thread", "t", "--budget", budget], two).stdout == \
        ss.ok(["nerve", "thread", "t", "--budget", budget], one).stdout
    assert "... 5 messages omitted (use --before 7 to load) ..." in ss.ok(["nerve", "thread", "t", "--budget", budget],
                                                                          two).stdout


def test_a_post_made_elsewhere_becomes_one_round_of_the_holders_thread(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t", "--description", "make the parser strict"], one)
    ss.ok(["nerve", "post", "--task", "t", "--role", "tester", "all green"], one)
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)
    before = _rounds(_thread(one))
    posted = json.loads(ss.ok(["nerve", "post", "--task", "t", "--role", "reviewer", "--meta", "verdict=more",
                               "--json", "please cover the empty input"], two).stdout)
    assert posted == {"thread": "t", "round": None, "machine": "one", "pending": True}
    assert "held by machine one" in ss.ok(["nerve", "post", "--task", "t", "--role", "reviewer", "and the unicode"],
                                          two).stdout
    assert _rounds(_thread(one)) == before  # not there before the holder syncs
    ss.ok(["nerve", "sync"], two)
    ss.ok(["nerve", "sync"], one)  # ingests the posts: the holder numbers them, in order
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync", "--rebuild"], one)  # never twice, not even after the cache is rebuilt
    view = _thread(one)
    n = len(before)
    assert _rounds(view) == before + [(n + 1, "reviewer", "please cover the empty input"),
                                      (n + 2, "reviewer", "and the unicode")]
    assert view["rounds"][n]["metadata"] == {"verdict": "more", "from_machine": "two"}
    ss.ok(["nerve", "sync"], two)
    assert _thread(two) == view  # the holder's rounds reached the machine that posted
    proc = ss.run(["nerve", "post", "--task", "nope", "--role", "reviewer", "hello"], two)
    assert proc.returncode != 0 and "unknown thread 'nope'" in proc.stderr
