"""`git nerve thread` ends with where to look: the files `git nerve knowledge query` ranks first for the task."""

from __future__ import annotations

import json
import re

import pytest

from fixtures.repos import knowledge as kfix

LOOK = re.compile(r"^\.\.\. where to look: (.+) \(git nerve knowledge query on the task's description\) \.\.\.$", re.MULTILINE)
TASK = "add up the line items of an invoice with sales tax"


@pytest.fixture
def shop_task(tmp_path, gw, gn):
    """The known-layout repository with task t1 spawned for TASK and its worktree's index synced."""
    work = kfix.project(tmp_path).work
    res = gw(["spawn", "t1", "--no-fetch", "--json", "--description", TASK], work)
    assert res.code == 0, res
    worktree = json.loads(res.out)["worktree"]
    assert gn("knowledge sync", worktree).code == 0
    return work, worktree


def files_named(out: str) -> list[str]:
    (line,) = LOOK.findall(out)
    return [where.rsplit(":", 1)[0] for where in line.split(", ")]


def test_thread_names_the_file_knowledge_query_ranks_first(shop_task, gn):
    work, worktree = shop_task
    first = json.loads(gn(["knowledge", "query", "--json", TASK], worktree).out)["results"][0]
    assert first["path"] == "src/billing/invoice.py"  # the implementing source, not its docs or tests
    assert gn("post --role coder 'looking into it'", worktree).code == 0

    for cwd, args in ((worktree, ["thread"]), (work, ["thread", "t1"])):
        res = gn(args, cwd)
        assert res.code == 0, res
        assert res.out.startswith("[task t1] ") and f"---\n{TASK}\n\n[#1 coder]" in res.out  # the briefing first
        named = files_named(res.out)
        assert named[0] == first["path"] and len(named) == len(set(named)) <= 3
        assert res.out.rstrip("\n").splitlines()[-1].startswith("... where to look: ")

    data = json.loads(gn("thread --json", worktree).out)
    assert data["hints"][0]["path"] == first["path"]
    assert (data["hints"][0]["start_line"], data["hints"][0]["end_line"]) == (first["start_line"], first["end_line"])
    assert not LOOK.search(gn("thread --before 2", worktree).out)  # paging back: the rounds only


def test_the_mcp_thread_tool_gives_the_same_hint(shop_task, gn):
    from git_nerve.mcptools import tools

    _, worktree = shop_task
    text = tools.thread(tools.bind(worktree))
    assert text.startswith("[task t1] ")  # no rounds yet: the briefing, then the hint
    cli_out = gn("thread", worktree).out
    assert LOOK.findall(text) == LOOK.findall(cli_out) and files_named(text)[0] == "src/billing/invoice.py"


def test_no_index_no_hint(tmp_path, gw, gn):
    work = kfix.project(tmp_path).work
    res = gw(["spawn", "t1", "--no-fetch", "--json", "--description", TASK], work)
    worktree = json.loads(res.out)["worktree"]
    assert gn("post --role coder hi", worktree).code == 0
    out = gn("thread", worktree).out
    assert not LOOK.search(out) and json.loads(gn("thread --json", worktree).out).get("hints") is None


def test_a_damaged_index_costs_the_hint_not_the_thread(shop_task, gn):
    from pathlib import Path

    work, worktree = shop_task
    assert gn("post --role coder hi", worktree).code == 0
    (Path(work) / ".git" / "nerve" / "knowledge.db").write_bytes(b"not a database" * 100)
    res = gn("thread", worktree)
    assert res.code == 0 and "\n\n[#1 coder]" in res.out and not LOOK.search(res.out), res
