"""`git nerve thread` / `git nerve post` end to end, inside real worktrees."""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import git

HINT = re.compile(r"^\.\.\. (\d+) messages omitted \(use --before (\d+) to load\) \.\.\.$", re.MULTILINE)
HEADER = re.compile(r"^\[#(\d+) (\S+)\] \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", re.MULTILINE)


@pytest.fixture
def worktree(repo, gw) -> Path:
    """Task t1, spawned with `git worker spawn`; its worktree."""
    res = gw("spawn t1 --no-fetch --json", repo.work)
    assert res.code == 0, res
    return Path(json.loads(res.out)["worktree"])


def rounds_of(out: str) -> str:
    """A default page without the briefing it opens with (the task of these tests has no description: one
    paragraph), asserted on by the tests of the briefing below."""
    assert out.startswith("[task t1] "), out
    return out.split("\n\n", 1)[1] if "\n\n" in out else ""


def post(gn, cwd: Path, args: str, **kw):
    res = gn(f"post {args}", cwd, **kw)
    assert res.code == 0, res
    return int(res.out.strip())


def one_error_line(res, code: int = 2) -> str:
    assert res.code == code, res
    assert res.out == ""
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.err
    return lines[0]


def test_post_and_read_back_inside_the_worktree(worktree, gn):
    assert post(gn, worktree, "--role analyzer --meta exit_code=0 --meta files_changed=3 'Analysis complete.'") == 1
    assert post(gn, worktree, "--role tester --meta passed=true --meta ratio=0.5 --meta note='fix #12' 'All good.'") == 2
    res = gn("thread", worktree)
    assert res.code == 0, res
    rounds = HEADER.findall(res.out)
    assert rounds == [("1", "analyzer"), ("2", "tester")]
    body = re.sub(HEADER, "H", rounds_of(res.out))
    assert body == (
        "H\n---\nexit_code: 0\nfiles_changed: 3\n---\nAnalysis complete.\n\n"
        "H\n---\npassed: true\nratio: 0.5\nnote: 'fix #12'\n---\nAll good.\n"
    )


def test_review_comments_reach_the_agent_through_its_thread(repo, worktree, gw, gn):
    assert gw("start", worktree).code == 0
    post(gn, worktree, "--role coder 'first attempt'")
    (worktree / "src" / "app.py").write_text("def greet(name):\n    return name\n", encoding="utf-8")
    git(worktree, "commit", "-qam", "attempt")
    assert gw("done", worktree).code == 0
    res = gw(["request-changes", "t1", "--by", "alice", "--comment", "Handle empty names.\nAnd add a test."], repo.work)
    assert res.code == 0, res
    out = gn("thread", worktree).out
    assert re.sub(HEADER, "H", out).endswith("H\n---\nverdict: changes_requested\nby: alice\n---\nHandle empty names.\nAnd add a test.\n")
    assert HEADER.findall(out)[-1] == ("2", "reviewer")


def test_thread_works_from_a_subdirectory_and_by_id_from_the_main_checkout(repo, worktree, gn):
    post(gn, worktree, "--role coder hello")
    sub = worktree / "src"
    assert sub.is_dir()
    assert "[#1 coder]" in gn("thread", sub).out
    from_main = gn("thread t1", repo.work)
    assert from_main.code == 0 and "[#1 coder]" in from_main.out
    assert post(gn, repo.work, "--task t1 --role lead 'from the main checkout'") == 2
    assert "from the main checkout" in gn("thread", worktree).out


def test_post_reads_standard_input(worktree, gn):
    text = "línea 1\n\n---\nline 4 🌍\n"
    assert post(gn, worktree, "--role tester -", input=text) == 1
    assert post(gn, worktree, "--role tester", input="piped without a dash\n") == 2
    data = json.loads(gn("thread --json", worktree).out)
    assert [r["content"] for r in data["rounds"]] == [text, "piped without a dash\n"]
    out = gn("thread", worktree).out
    assert "línea 1\n\n---\nline 4 🌍\n\n[#2 tester]" in out


def test_post_with_nested_json_metadata_and_json_output(worktree, gn):
    res = gn(["post", "--role", "ci", "--meta-json", '{"checks": {"lint": [1, 2]}, "ok": false}', "--meta", "ok=true",
              "--json", "done"], worktree)
    assert res.code == 0, res
    assert json.loads(res.out) == {"thread": "t1", "round": 1}
    data = json.loads(gn("thread --json", worktree).out)
    (r,) = data["rounds"]
    assert r["metadata"] == {"checks": {"lint": [1, 2]}, "ok": True}
    assert r["role"] == "ci" and r["content"] == "done" and r["round"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["ts"])
    assert "---\nchecks:\n  lint:\n  - 1\n  - 2\nok: true\n---\ndone" in gn("thread", worktree).out


def briefing_size(gn, worktree: Path) -> int:
    """What the default page's briefing costs of the budget (its worktree's path is part of it)."""
    return len(gn("thread", worktree).out.rstrip("\n"))


def test_following_every_hint_through_the_cli_reads_each_round_once(worktree, gn):
    brief = briefing_size(gn, worktree)
    for i in range(1, 13):
        post(gn, worktree, f"--role r{i} {'x' * 95}{i:05d}")
    out = gn(f"thread --budget {brief + 300}", worktree).out
    first = [int(n) for n, _ in HEADER.findall(out)]
    assert first == [1, 11, 12]  # 100 characters each: the briefing, round 1 + rounds 12 and 11 reach the budget
    hints = HINT.findall(out)
    assert hints == [("9", "11")]
    seen = first[1:]
    page = out
    while HINT.search(page):
        before = HINT.search(page).group(2)
        page = gn(f"thread --budget 300 --before {before}", worktree).out
        numbers = [int(n) for n, _ in HEADER.findall(page)]
        assert numbers and numbers[-1] == int(before) - 1
        assert page.rstrip("\n").endswith("...") == (numbers[0] > 1)  # the hint for older rounds ends the page
        seen += numbers
    assert sorted(seen) == list(range(1, 13))
    assert len(seen) == len(set(seen))


def test_json_view_carries_the_omitted_ranges(worktree, gn):
    brief = briefing_size(gn, worktree)
    for i in range(6):
        post(gn, worktree, f"--role coder {'y' * 50}")
    data = json.loads(gn(f"thread --budget {brief + 120} --json", worktree).out)
    assert data["thread"] == "t1"
    assert [r["round"] for r in data["rounds"]] == [1, 5, 6]
    assert data["omitted"] == [{"from": 2, "to": 4, "count": 3, "before": 5}]
    page = json.loads(gn("thread --before 5 --budget 120 --json", worktree).out)
    assert [r["round"] for r in page["rounds"]] == [2, 3, 4]
    assert page["omitted"] == [{"from": 1, "to": 1, "count": 1, "before": 2}]


def test_empty_thread_and_before_one(worktree, gn):
    res = gn("thread", worktree)  # a new task's thread is its briefing (tests below), not "no rounds yet"
    assert res.code == 0 and res.out.startswith("[task t1] ASSIGNED\n") and res.err == ""
    data = json.loads(gn("thread --json", worktree).out)
    assert data["rounds"] == [] and data["omitted"] == [] and data["task"]["id"] == "t1"
    post(gn, worktree, "--role a x")
    res = gn("thread --before 1", worktree)
    assert res.code == 0 and res.out == ""
    assert "[#1 a]" in gn("thread --before 99", worktree).out


@pytest.mark.parametrize("args, expected", [
    ("thread nope", "unknown thread 'nope'"),
    ("thread --before abc", "--before must be a round id"),
    ("thread --before 0", "--before must be a round id"),
    ("thread --before -3", "--before must be a round id"),
    ("thread --budget 0", "--budget must be a number of characters"),
    ("thread --budget -5", "--budget must be a number of characters"),
    ("thread --budget 1e3", "--budget must be a number of characters"),
    (f"thread --before {'9' * 5000}", "--before is too large"),
    ("post --task nope --role a x", "unknown thread 'nope'"),
    ("post --role a --meta novalue x", "--meta expects KEY=VALUE"),
    ("post --role a --meta role=b x", "reserved"),
    ("post --role a --meta-json '[1]' x", "--meta-json must be a JSON object"),
    ("post --role a --meta-json '{bad' x", "--meta-json is not valid JSON"),
    ("post --role '' x", "needs a role"),
    ("post --role a ''", "nothing to post"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(worktree, gn, args, expected):
    post(gn, worktree, "--role seed first")
    res = gn(args, worktree)
    assert expected in one_error_line(res)
    assert json.loads(gn("thread --json", worktree).out)["rounds"][-1]["round"] == 1


def test_standard_input_must_be_utf8(worktree, gn):
    assert "not valid UTF-8" in one_error_line(gn("post --role a -", worktree, input=b"ok \xff\xfe"))
    assert json.loads(gn("thread --json", worktree).out)["rounds"] == []


def test_post_on_a_terminal_without_content_asks_for_it(worktree):
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(["git", "nerve", "post", "--role", "a"], check=False, cwd=worktree, stdin=secondary,
                              capture_output=True, text=True, timeout=60)
    finally:
        os.close(primary)
        os.close(secondary)
    assert proc.returncode == 2, proc
    assert proc.stderr.strip() == "error: no content: pass CONTENT, or `-` to read it from standard input"


def test_outside_a_worktree_the_id_is_required(repo, gn):
    assert "pass THREAD_ID" in one_error_line(gn("thread", repo.work))
    assert "pass --task TASK" in one_error_line(gn("post --role a x", repo.work))


def test_a_repository_without_a_bus_is_left_untouched(repo, gn):
    assert "unknown thread 't1'" in one_error_line(gn("thread t1", repo.work))
    assert "unknown thread 't1'" in one_error_line(gn("post --task t1 --role a x", repo.work))
    assert not (repo.work / ".git" / "nerve" / "bus.db").exists()


def test_help(gn, repo):
    for command in ("thread", "post"):
        res = gn(f"{command} --help", repo.work)
        assert res.code == 0 and "--json" in res.out
    assert "--before N" in gn("thread -h", repo.work).out


def test_real_processes_pipe_content_and_read_the_thread(worktree, sh):
    res = sh(["git", "nerve", "post", "--role", "agent", "--meta", "step=1"], worktree, input="from a pipe\n")
    assert res.code == 0 and res.out == "1\n", res
    res = sh(["git", "nerve", "thread"], worktree)
    assert res.code == 0, res
    assert re.sub(HEADER, "H", rounds_of(res.out)) == "H\n---\nstep: 1\n---\nfrom a pipe\n"
    res = sh(shlex.split("git nerve thread --before x"), worktree)
    assert res.code == 2 and res.err.strip().startswith("error: --before") and len(res.err.strip().splitlines()) == 1


# -- the thread is the agent's whole briefing (issue 37) -------------------------------------------------------


@pytest.fixture
def briefed(repo, gw) -> Path:
    """Task `login`, spawned with a description (two paragraphs) from main; its worktree."""
    res = gw(["spawn", "login", "--no-fetch", "--json", "-d", "Fix the login redirect.\n\nKeep the old URL working."],
             repo.work)
    assert res.code == 0, res
    return Path(json.loads(res.out)["worktree"])


def test_a_new_tasks_thread_opens_with_what_spawn_was_given(briefed, sh):
    """The first thing an agent reads in its worktree: its task, not "no rounds yet" (the real, click-free path)."""
    res = sh(["git", "nerve", "thread"], briefed)
    assert res.code == 0 and res.err == "", res
    assert res.out == (
        "[task login] ASSIGNED\n"
        "branch: feat/login (from main; merges into main)\n"
        f"worktree: {briefed}\n"
        "---\n"
        "Fix the login redirect.\n\nKeep the old URL working.\n"
    )
    data = json.loads(sh(["git", "nerve", "thread", "--json"], briefed).out)
    assert data["task"] == {"id": "login", "state": "ASSIGNED", "description": "Fix the login redirect.\n\nKeep the old URL working.",
                            "branch": "feat/login", "base": "refs/heads/main", "integration": "main", "worktree": str(briefed),
                            "adopted": False}
    assert data["rounds"] == [] and data["omitted"] == []


def test_the_briefing_comes_before_the_rounds_and_rounds_give_way_to_it(briefed, gn):
    for i in range(1, 6):
        post(gn, briefed, f"--role r{i} {'x' * 95}{i:05d}")
    out = gn("thread --budget 300", briefed).out
    assert out.startswith("[task login] ASSIGNED\n") and out.index("Keep the old URL working.") < out.index("[#1 r1]")
    # the briefing (~140 characters) is paid first: round 1 and the newest round are all that fit after it
    assert [int(n) for n, _ in HEADER.findall(out)] == [1, 5]
    assert HINT.findall(out) == [("3", "5")]
    page = gn("thread --budget 300 --before 5", briefed).out  # paging back: rounds only
    assert "[task login]" not in page and [int(n) for n, _ in HEADER.findall(page)] == [2, 3, 4]


def test_a_description_longer_than_the_budget_is_cut_last_and_says_so(repo, gw, gn):
    long = "Rewrite the session store. " * 40  # 1080 characters
    res = gw(["spawn", "big", "--no-fetch", "--json", "-d", long], repo.work)
    worktree = Path(json.loads(res.out)["worktree"])
    post_ = gn("post --role coder 'on it'", worktree)
    assert post_.code == 0
    res = gn("thread --budget 400", worktree)
    assert res.code == 0, res
    briefing, _, rest = res.out.partition("\n\n[#1 coder]")
    assert rest, res.out  # round 1 (the newest too) is still shown
    assert len(briefing.split("\n... description cut at")[0]) == 400
    assert re.search(r"\.\.\. description cut at \d+ of 1080 characters \(git worker show big prints it whole\) \.\.\.$",
                     briefing)
    data = json.loads(gn("thread --budget 400 --json", worktree).out)
    assert data["task"]["description_cut"]["of"] == 1080 and long.startswith(data["task"]["description"])
    assert json.loads(gn("thread --json", worktree).out)["task"]["description"] == long  # the default budget: whole


def test_the_mcp_thread_tool_gives_the_same_briefing(briefed, gn):
    from git_nerve.mcptools import tools

    text = tools.thread(tools.bind(briefed))
    assert text == gn("thread", briefed).out.rstrip("\n")
    assert text.startswith("[task login] ASSIGNED\n") and "no rounds" not in text


@pytest.mark.parametrize("args, expected", [
    (["nope"], "unknown thread 'nope'"),
    (["--before", "abc"], "--before must be a round id"),
    (["--budget", "0"], "--budget must be a number of characters"),
    (["--budget=-5"], "--budget must be a number of characters"),
])
def test_the_click_free_path_reports_bad_input_as_click_does(briefed, sh, args, expected):
    res = sh(["git", "nerve", "thread", *args], briefed)
    assert res.code == 2 and res.out == "", res
    assert res.err.strip().splitlines() == [f"error: {res.err.strip()[7:]}"] and expected in res.err


def test_the_click_free_path_works_from_a_subdirectory_by_id_and_outside_a_worktree(repo, briefed, sh):
    assert sh(["git", "nerve", "thread"], briefed / "src").out.startswith("[task login] ")
    assert sh(["git", "nerve", "thread", "login"], repo.work).out.startswith("[task login] ")
    res = sh(["git", "nerve", "thread"], repo.work)
    assert res.code == 2 and "pass THREAD_ID" in res.err and len(res.err.strip().splitlines()) == 1
