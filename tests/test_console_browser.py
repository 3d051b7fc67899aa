"""The console in a real browser: Debian's headless Chromium driven by Playwright (installed at a
pinned version by tests/realtools.py; the browser is never downloaded), on a real repository with a
live worker (`git worker run` heartbeating around a scripted agent that commits, reads a note and
finishes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos.build import commit_file
from console_support import Browser, Console, artifacts, worktree_of

NOTE = "please also write NOTES.md"


# The agent `git worker run` supervises: it commits when the test says so, then takes the notes a person
# sent through the door mid-run delivery uses (git_nerve.steer.delivery), acts on them with a second
# commit, and exits 0 (so `--done` asks for review).
AGENT = textwrap.dedent('''
    import os, subprocess, sys, time
    from pathlib import Path
    from git_nerve.bus.connection import Bus
    from git_nerve.paths import discover
    from git_nerve.steer import delivery

    go = Path(sys.argv[1])
    deadline = time.time() + 120
    while not go.exists():
        assert time.time() < deadline, "never told to commit"
        time.sleep(0.1)
    Path("feature.txt").write_text("the feature\\n")
    subprocess.run(["git", "add", "feature.txt"], check=True)
    subprocess.run(["git", "commit", "-q", "-m", "agent: add the feature"], check=True)
    bus = Bus(discover().bus_path)
    while True:
        notes = delivery.deliver(bus, "t1", reader="scripted agent", via="hook", pid=os.getpid())
        if notes:
            break
        assert time.time() < deadline, "no note came"
        time.sleep(0.2)
    Path("NOTES.md").write_text("".join(m.text + "\\n" for m in notes))
    subprocess.run(["git", "add", "NOTES.md"], check=True)
    subprocess.run(["git", "commit", "-q", "-m", "agent: act on the note"], check=True)
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    delivery.acted(bus, "t1", how=f"commit {sha}")
    bus.close()
''')


@pytest.mark.real
def test_the_console_in_chromium_follows_a_live_worker_and_reviews_and_merges_it(remote_repo, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    git(work, "config", "nerve.heartbeatInterval", "1")
    for task, desc in (("t1", "add the feature"), ("t2", "write the docs")):
        subprocess.run(["git", "worker", "spawn", task, "-d", desc], cwd=work, check=True, capture_output=True)
    wt = Path(json.loads(subprocess.run(["git", "worker", "status", "--json"], cwd=work, check=True,
                                        capture_output=True, text=True).stdout)[0]["worktree"])
    (tmp_path / "agent.py").write_text(AGENT)
    go = tmp_path / "go"
    console = Console(work)
    agent = subprocess.Popen(["git", "worker", "run", "--done", "--", sys.executable, str(tmp_path / "agent.py"), str(go)],
                             cwd=wt, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    browser = Browser.start()
    shot = artifacts(tmp_path) / "console-live-worker.png"
    try:
        assert browser("goto", url=console.url) == 200
        browser("wait_text", selector="#conn", text="live")
        browser("wait_text", selector="tr.worker[data-task=t2]", text="write the docs")
        # the live worker: `git worker run` started it and heartbeats every second
        browser("wait", selector="tr.worker[data-task=t1][data-state=WORKING]", timeout=30_000)
        browser("wait_text", selector="tr.worker[data-task=t1] [data-testid=heartbeat]", text="ago", timeout=30_000)
        browser("eval", js="window.__sameLoad = 'yes'")  # gone if the page reloads
        browser("click", selector="tr.worker[data-task=t1]")
        assert browser("url").endswith("#/task/t1/diff")
        browser("click", selector="[data-testid=tab-thread]")

        # a commit made in the worker appears, without a reload
        go.write_text("go")
        browser("wait_text", selector="tr.worker[data-task=t1] [data-testid=last-commit]", text="agent: add the feature",
                timeout=30_000)
        browser("wait_text", selector="#history li", text="agent: add the feature")

        # a note sent from the page reaches the agent, which acknowledges it (outbox) and acts on it
        browser("fill", selector="#tell-text", value=NOTE)
        browser("click", selector="[data-testid=tell-send]")
        browser("wait_text", selector="#result", text="queued #1: note for t1")
        browser("wait_text", selector="#thread .round.human", text=NOTE)
        browser("wait_text", selector="#outbox li", text="note delivered to scripted agent", timeout=30_000)
        browser("wait_text", selector="#told li", text="acted on", timeout=30_000)
        assert agent.wait(timeout=120) == 0, agent.stdout.read()
        assert (wt / "NOTES.md").read_text() == NOTE + "\n"

        # `--done`: rebased, pushed, IN_REVIEW; approve with a comment, then merge, from the page
        browser("wait", selector="tr.worker[data-task=t1][data-state=IN_REVIEW]", timeout=30_000)
        browser("fill", selector="#review-text", value="looks right")
        browser("click", selector="#act-approve")
        browser("click", selector="[data-testid=confirm-ok]")
        browser("wait_text", selector="#result", text="approved: t1 is APPROVED")
        browser("wait", selector="tr.worker[data-task=t1][data-state=APPROVED]")
        browser("wait_text", selector="#queue li", text="t1")
        browser("wait_text", selector="#thread .round.reviewer", text="looks right")
        browser("click", selector="#act-merge")
        browser("click", selector="[data-testid=confirm-check]")  # this repository has no check command
        browser("click", selector="[data-testid=confirm-ok]")
        browser("wait_text", selector="#result", text="merged t1 into main", timeout=60_000)
        browser("wait", selector="tr.worker[data-task=t1][data-state=COMPLETED]")
        assert browser("eval", js="window.__sameLoad") == "yes"
        browser("screenshot", path=str(shot))
        assert browser("problems") == []  # no script error, no refused request so far

        # a request without the token is refused, from the page's own origin too
        assert browser("fetch", url="/api/state")[0] == 403
        assert browser("fetch", url="/api/tell", init={"method": "POST", "headers": {"Content-Type": "application/json"},
                                                        "body": json.dumps({"task": "t2", "text": "x"})})[0] == 403
        assert browser("goto", url=console.url.split("?")[0]) == 403
    finally:
        browser.close()
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        assert console.stop() == 0
    assert shot.stat().st_size > 10_000

    # git is the ground truth: origin's main has the merge of t1 with both of the agent's commits
    log = git(origin, "log", "--format=%s", "main")
    assert log.splitlines()[0] == "Merge feat/t1 (t1)"
    assert "agent: add the feature" in log and "agent: act on the note" in log
    assert git(origin, "show", "main:NOTES.md") == NOTE
    rows = {r["task_id"]: r for r in json.loads(subprocess.run(["git", "worker", "status", "--json"], cwd=work,
                                                               check=True, capture_output=True, text=True).stdout)}
    assert rows["t1"]["state"] == "COMPLETED" and rows["t2"]["state"] == "ASSIGNED"
    # the note: told on the bus, delivered to the agent's process, acted on
    shown = json.loads(subprocess.run(["git", "worker", "show", "t1", "--json"], cwd=work, check=True,
                                      capture_output=True, text=True).stdout)
    assert shown["inbox"][0]["delivery"]["state"] == "acted on"


COMMENT = "name the constant"
# console errors a test expects: the commit view asks the server for each of the task's files in one commit, and
# the server refuses the files that commit does not change (400), which Chromium logs as a failed load
PROBED = ("Failed to load resource", "status of 400", "&commit=")


def _states(work: Path) -> dict[str, str]:
    rows = json.loads(subprocess.run(["git", "worker", "status", "--json"], cwd=work, check=True, capture_output=True,
                                     text=True).stdout)
    return {r["task_id"]: r["state"] for r in rows}


def _review_setup(work: Path, gw, gn) -> tuple[Path, Path]:
    """t1 (IN_REVIEW): a new file, a changed line t2 also changes (the radar flags it), a binary file; t2 WORKING."""
    commit_file(work, "nerve.toml", '[run]\ntest_command = "test -f feature.txt"\n', "nerve.toml: the merge check")
    git(work, "push", "-q", "origin", "main")
    for task, desc in (("t1", "add the feature"), ("t2", "change the greeting")):
        assert gw(["spawn", task, "-d", desc], work).code == 0
    wt1, wt2 = worktree_of(work, "t1"), worktree_of(work, "t2")
    for wt in (wt1, wt2):
        assert gw("start", wt).code == 0
    commit_file(wt1, "feature.txt", "def feature():\n    return 42\n", "t1: add the feature")
    commit_file(wt1, "src/app.py", "def greet(name):\n    return f'hey {name}'\n", "t1: greet with hey")
    (wt1 / "logo.bin").write_bytes(bytes(range(256)) * 4)
    git(wt1, "add", "logo.bin")
    git(wt1, "commit", "-q", "-m", "t1: a logo")
    commit_file(wt2, "src/app.py", "def greet(name):\n    return f'yo {name}'\n", "t2: greet with yo")
    assert gw("done", wt1).code == 0
    assert gw("conflicts --refresh", work).code in (0, 1)
    return wt1, wt2


@pytest.mark.real
def test_a_persons_whole_review_from_a_link_to_the_merge(remote_repo, tmp_path, gw, gn):
    from git_nerve.paths import discover
    from git_nerve.workflow import runlog

    work, origin = remote_repo.work, remote_repo.origin
    wt1, _ = _review_setup(work, gw, gn)
    shots = artifacts(tmp_path)
    console = Console(work)
    b = Browser.start()
    try:
        # a link to one file of the task's diff opens it
        assert b("goto", url=console.url + "#/task/t1/diff/feature.txt") == 200
        b("wait_text", selector="[data-testid=diff-path]", text="feature.txt")
        b("wait_text", selector="#diff tr.line.add", text="return 42")
        b("wait", selector="tr.worker[data-task=t1][data-state=IN_REVIEW]")
        files = b("texts", selector="#files li")
        assert len(files) == 3 and any("feature.txt" in f and "+2" in f and "−0" in f for f in files), files
        # the line t2 also changes is flagged, naming t2; side by side shows the same
        b("click", selector="#files li[data-path='src/app.py'] a")
        b("wait_text", selector="#diff tr.line.flagged [data-testid=line-flag]", text="t2")
        assert b("url").endswith("#/task/t1/diff/src/app.py")
        assert "t2 (1 line)" in b("text", selector="#files li[data-path='src/app.py']")
        b("click", selector="[data-testid=mode-split]")
        b("wait_text", selector="table.diff.split tr.line.flagged", text="hey")
        b("screenshot", path=str(shots / "diff-side-by-side.png"))
        b("click", selector="[data-testid=mode-unified]")
        b("click", selector="#files li[data-path='logo.bin'] a")
        b("wait_text", selector="[data-testid=diff-summary]", text="Binary file logo.bin")
        # a comment on a line joins the task's pending review
        b("click", selector="#files li[data-path='feature.txt'] a")
        b("click", selector="#diff tr.line[data-new='2'] td.code")
        b("fill", selector="[data-testid=line-comment-text]", value=COMMENT)
        b("click", selector="[data-testid=line-comment-add]")
        b("wait_text", selector="#diff tr.comment", text=COMMENT)
        b("wait_text", selector="[data-testid=review-comment]", text="feature.txt:2")
        b("fill", selector="#review-text", value="close; one thing")
        b("screenshot", path=str(shots / "diff-review.png"))
        # the commits, each opening its own diff
        b("click", selector="[data-testid=tab-commits]")
        b("click", selector="#commits li:has-text('t1: greet with hey') a")
        b("wait_text", selector="#commit-diff [data-testid=diff-path]", text="src/app.py")
        b("wait_text", selector="#commit-diff tr.line.del", text="hello")
        assert b("count", selector="#commit-files li") == 1
        b("screenshot", path=str(shots / "commits.png"))
        # request changes: the comment reaches the thread the agent reads; approve is no longer offered
        b("click", selector="#act-request_changes")
        b("wait_text", selector="#result", text="changes requested: t1 is WORKING (1 line comment sent)")
        b("wait", selector="#act-approve", state="detached")
        thread = gn("thread t1", work).out
        assert f"feature.txt:2: {COMMENT}" in thread and "close; one thing" in thread, thread
        assert b("count", selector="[data-testid=review-comment]") == 0 and b("value", selector="#review-text") == ""

        # the agent's next round: its output grows live, it commits, posts to the thread and asks for review again
        common = discover(work).common_dir
        first = runlog.open_tee(common, "t1", 1, "implementer", "scripted-agent", {})
        first.write("stdout", b"round one's output\n")
        first.close()
        tee = runlog.open_tee(common, "t1", 2, "implementer", "scripted-agent", {})
        try:
            tee.write("stdout", b"reading the review\n")
            b("click", selector="[data-testid=tab-output]")
            b("wait_text", selector="#output-head", text="round 2 · role implementer · adapter scripted-agent · running")
            b("wait_text", selector="#output", text="reading the review")
            tee.write("stdout", b"naming the constant ANSWER\n")
            b("wait_text", selector="#output", text="naming the constant ANSWER")
            commit_file(wt1, "feature.txt", "ANSWER = 42\n\n\ndef feature():\n    return ANSWER\n", "t1: name the constant")
            assert gn(["post", "--role", "implementer", "named the constant ANSWER"], wt1).code == 0
        finally:
            tee.close()
        b("wait_text", selector="#output-head", text="finished")
        assert b("text", selector="#output") == "reading the review\nnaming the constant ANSWER\n"
        b("screenshot", path=str(shots / "output.png"))
        b("click", selector="#rounds a[data-round='1']")  # a finished round stays readable
        b("wait_text", selector="#output-head", text="round 1 · role implementer · adapter scripted-agent · finished")
        b("wait_text", selector="#output", text="round one's output")
        assert b("url").endswith("#/task/t1/output/1")
        assert gw("done", wt1).code == 0
        b("wait", selector="tr.worker[data-task=t1][data-state=IN_REVIEW]", timeout=20_000)
        b("click", selector="[data-testid=tab-thread]")
        b("wait_text", selector="#thread .round", text="named the constant ANSWER")
        b("click", selector="[data-testid=tab-diff]")
        b("click", selector="#files li[data-path='feature.txt'] a")
        b("wait_text", selector="#diff tr.line.add", text="return ANSWER")

        # approve from the keyboard, through the confirmation
        b("eval", js="document.activeElement && document.activeElement.blur()")
        b("press", key="a")
        b("wait_text", selector="#confirm-title", text="Approve t1?")
        b("click", selector="[data-testid=confirm-ok]")
        b("wait_text", selector="#result", text="approved: t1 is APPROVED")
        # merge with the check: cancelling the dialog moves nothing, confirming merges and pushes
        before = git(origin, "rev-parse", "main")
        b("click", selector="#act-merge")
        b("wait_text", selector="#confirm-title", text="Merge t1 into main?")
        assert b("eval", js="document.querySelector('[data-testid=confirm-check]').checked") is True
        b("screenshot", path=str(shots / "confirm-merge.png"))
        b("click", selector="[data-testid=confirm-cancel]")
        b("wait", selector="#confirm", state="hidden")
        time.sleep(1.0)
        assert git(origin, "rev-parse", "main") == before and _states(work)["t1"] == "APPROVED"
        b("click", selector="#act-merge")
        b("click", selector="[data-testid=confirm-ok]")
        b("wait_text", selector="#result", text="merged t1 into main", timeout=60_000)
        b("wait", selector="tr.worker[data-task=t1][data-state=COMPLETED]")
        assert b("count", selector="#actions button") == 0
        b("screenshot", path=str(shots / "merged.png"))
        assert b.problems(PROBED) == []
    finally:
        b.close()
        assert console.stop() == 0
    assert git(origin, "rev-parse", "main") != before
    assert git(origin, "log", "-1", "--format=%s", "main") == "Merge feat/t1 (t1)"
    assert "return ANSWER" in git(origin, "show", "main:feature.txt")


#: the task actions each state offers (worker/states.py's table, as `git worker` enforces it)
OFFERED = {"a1": {"cancel"}, "w1": {"cancel"}, "r1": {"approve", "request_changes", "cancel"},
           "p1": {"request_changes", "merge", "cancel"}, "c1": set(), "f1": {"retry"}}


def _open_task(b: Browser, task: str, view: str = "thread") -> set[str]:
    """Go to a task by its URL; the action buttons it offers."""
    b("eval", js=f"location.hash = '#/task/{task}/{view}'")
    b("wait_fn", js=f"document.querySelector('#task-id').textContent === '{task}' && "
                    f"document.querySelector('tr.worker[data-task=\"{task}\"]') !== null")
    b("wait_text", selector="[data-testid=task-state]", text=_states_cache[task] if task in _states_cache else "")
    return set(b("eval", js="[...document.querySelectorAll('#actions button')].map(x => x.dataset.testid.slice(4))"))


_states_cache: dict[str, str] = {}


def _visible_rows(b: Browser) -> set[str]:
    return set(b("eval", js="[...document.querySelectorAll('tr.worker')].map(r => r.dataset.task)"))


@pytest.mark.real
def test_actions_only_where_the_state_allows_them_confirmed_and_filters_that_stay(repo, tmp_path, gw):
    from fixtures.repos import worker as wk

    work = repo.work
    for task, state in (("a1", "ASSIGNED"), ("r1", "IN_REVIEW"), ("p1", "APPROVED"), ("c1", "COMPLETED"), ("f1", "FAILED")):
        wk.drive(work, task, state, file="shared.txt" if task == "r1" else None)
    commit_file(wk.drive(work, "w1", "WORKING"), "shared.txt", "the other version\n", "w1: shared.txt")
    assert gw("conflicts --refresh", work).code in (0, 1)
    _states_cache.clear()
    _states_cache.update(_states(work))
    shots = artifacts(tmp_path)
    console = Console(work)
    b = Browser.start()
    try:
        assert b("goto", url=console.url) == 200
        b("wait", selector="tr.worker[data-task=f1]")
        for task, offered in OFFERED.items():
            assert _open_task(b, task) == offered, task
        # filters: finished tasks hidden, kept over a reload; only review; only conflicts
        b("click", selector="#filter-done")
        b("wait", selector="tr.worker[data-task=c1]", state="detached")
        assert _visible_rows(b) == {"a1", "w1", "r1", "p1"}
        b("wait_text", selector="#hidden-count", text="2 hidden by the filters")
        assert b("reload") == 200
        b("wait", selector="tr.worker[data-task=r1]")
        assert _visible_rows(b) == {"a1", "w1", "r1", "p1"} and b("eval", js="document.querySelector('#filter-done').checked")
        b("click", selector="#filter-review")
        b("wait", selector="tr.worker[data-task=a1]", state="detached")
        assert _visible_rows(b) == {"r1"}
        b("click", selector="#filter-review")
        b("click", selector="#filter-conflicts")
        b("wait", selector="tr.worker[data-task=a1]", state="detached")
        assert _visible_rows(b) == {"w1", "r1"}
        b("screenshot", path=str(shots / "filters.png"))
        b("click", selector="#filter-conflicts")
        b("click", selector="#filter-done")
        b("wait", selector="tr.worker[data-task=c1]")

        # retry and cancel ask first; "cancel" in the dialog changes nothing
        _open_task(b, "f1")
        b("click", selector="#act-retry")
        b("wait_text", selector="#confirm-title", text="Retry f1?")
        b("click", selector="[data-testid=confirm-cancel]")
        b("wait", selector="#confirm", state="hidden")
        assert _states(work)["f1"] == "FAILED"
        b("click", selector="#act-retry")
        b("click", selector="[data-testid=confirm-ok]")
        b("wait_text", selector="#result", text="retried: f1 is ASSIGNED")
        b("wait", selector="#act-cancel")  # what ASSIGNED offers, without a reload
        assert b("count", selector="#act-retry") == 0
        _open_task(b, "a1")
        b("click", selector="#act-cancel")
        b("fill", selector="[data-testid=confirm-reason]", value="not needed")
        b("click", selector="[data-testid=confirm-ok]")
        b("wait_text", selector="#result", text="cancelled: a1 is FAILED")
        b("wait", selector="#act-retry")
        assert _states(work)["a1"] == "FAILED"

        # a refusal is shown as the CLI words it: merge --all with a check but no check command
        b("click", selector="#merge-all")
        b("wait_text", selector="#confirm-title", text="Merge every APPROVED task?")
        b("click", selector="[data-testid=confirm-ok]")
        b("wait", selector="#queue-result [data-testid=error]")
        shown = b("text", selector="#queue-result [data-testid=error]")
        assert shown.startswith("no check command: set [run] test_command in nerve.toml")
        assert _states(work)["p1"] == "APPROVED"
        cli = gw(["spawn", "bad name!"], work)
        b("fill", selector="#spawn-name", value="bad name!")
        b("click", selector="#spawn")
        b("wait", selector="#spawn-result [data-testid=error]")
        assert cli.code != 0 and b("text", selector="#spawn-result [data-testid=error]") in cli.err
        # spawn from the page opens the new task; a state moved from a terminal takes its buttons away at once
        b("fill", selector="#spawn-name", value="n1")
        b("fill", selector="#spawn-desc", value="a new task from the page")
        b("click", selector="#spawn")
        b("wait_text", selector="#spawn-result", text="spawned n1")
        b("wait_text", selector="#task-id", text="n1")
        assert _states(work)["n1"] == "ASSIGNED"
        _open_task(b, "p1")
        assert gw("request-changes p1", work).code == 0
        b("wait", selector="#act-merge", state="detached")
        assert b.problems(("Failed to load resource", "status of 400", "/api/merge_all"),
                          ("Failed to load resource", "status of 400", "/api/spawn")) == []
    finally:
        b.close()
        assert console.stop() == 0


EVIL = "<img src=x onerror=\"window.__evil=1\"><b id=evil>bold</b>"


@pytest.mark.real
def test_drafts_belong_to_their_task_and_urls_keys_and_a_phone_width_work(repo, tmp_path):
    from fixtures.repos import worker as wk

    work = repo.work
    for task in ("t1", "t2"):
        wk.drive(work, task, "IN_REVIEW")
    commit_file(wk.drive(work, "t3", "WORKING"), "page.html", EVIL + "\n", EVIL)
    shots = artifacts(tmp_path)
    console = Console(work)
    b = Browser.start()
    try:
        assert b("goto", url=console.url + "#/task/t1/diff") == 200
        b("wait_text", selector="[data-testid=diff-path]", text="t1.txt")
        b("fill", selector="#review-text", value="draft of t1")
        b("click", selector="#diff tr.line[data-new='1'] td.code")
        b("fill", selector="[data-testid=line-comment-text]", value="comment of t1")
        b("click", selector="[data-testid=line-comment-add]")
        b("click", selector="#diff tr.line[data-new='1'] td.code")
        b("fill", selector="[data-testid=line-comment-text]", value="half typed")
        # j: the next task, with none of t1's draft
        b("eval", js="document.activeElement.blur()")
        b("press", key="j")
        b("wait_text", selector="[data-testid=diff-path]", text="t2.txt")
        assert b("url").endswith("#/task/t2/diff")
        assert b("value", selector="#review-text") == ""
        assert [b("count", selector=s) for s in ("[data-testid=review-comment]", "tr.comment", "tr.comment-box")] == [0, 0, 0]
        b("fill", selector="#review-text", value="draft of t2")
        # back and forward land on each task's view with its own draft; so does a reload
        b("back")
        b("wait_text", selector="[data-testid=diff-path]", text="t1.txt")
        assert b("url").endswith("#/task/t1/diff") and b("value", selector="#review-text") == "draft of t1"
        b("wait_text", selector="tr.comment", text="comment of t1")
        assert b("value", selector="[data-testid=line-comment-text]") == "half typed"
        b("forward")
        b("wait_text", selector="[data-testid=diff-path]", text="t2.txt")
        assert b("value", selector="#review-text") == "draft of t2"
        assert b("reload") == 200
        b("wait_text", selector="[data-testid=diff-path]", text="t2.txt")
        assert b("value", selector="#review-text") == "draft of t2" and b("count", selector="tr.comment") == 0
        # keys: k back to t1, d opens the diff from another view, ? the help
        b("wait", selector="tr.worker[data-task=t1]")
        b("eval", js="document.activeElement.blur()")
        b("press", key="k")
        b("wait_text", selector="#task-id", text="t1")
        b("click", selector="[data-testid=tab-thread]")
        assert b("url").endswith("#/task/t1/thread")
        b("press", key="d")
        b("wait_text", selector="[data-testid=diff-path]", text="t1.txt")
        assert b("url").endswith("#/task/t1/diff")
        b("press", key="?")
        b("wait", selector="#help[open]")
        b("press", key="Escape")
        b("wait", selector="#help", state="hidden")
        assert "null" not in b("text", selector="#task-head")
        # a link in the list opens a task; what its agent wrote is shown as text, never run as HTML
        b("click", selector="tr.worker[data-task=t3] [data-testid=task-link]")
        b("wait_text", selector="#task-id", text="t3")
        assert b("url").endswith("#/task/t3/diff") and b("value", selector="#review-text") == ""
        b("wait_text", selector="#diff tr.line.add", text=EVIL)
        b("wait_text", selector="tr.worker[data-task=t3] [data-testid=last-commit]", text=EVIL)
        assert b("eval", js="document.querySelectorAll('img, b#evil').length + (window.__evil ? 1 : 0)") == 0
        # a phone's width: the columns stack and nothing is cut off, in every view
        b("eval", js="location.hash = '#/task/t1/diff'")
        b("wait_text", selector="[data-testid=diff-path]", text="t1.txt")
        for width in (420, 360):
            b("viewport", width=width, height=900)
            for view in ("diff", "split", "thread", "output"):
                if view == "split":
                    b("click", selector="[data-testid=mode-split]")
                else:
                    b("click", selector=f"[data-testid=tab-{view}]")
                b("wait", selector=f"#view-{'diff' if view == 'split' else view}")
                assert b.overflow() == {"page": 0, "body": 0, "right": 0} or max(b.overflow().values()) <= 0, (width, view, b.overflow())
                if width == 420:
                    b("screenshot", path=str(shots / f"narrow-{view}.png"))
            b("click", selector="[data-testid=tab-diff]")
            b("click", selector="[data-testid=mode-unified]")
        b("viewport", width=1500, height=1000)
        assert b.problems() == []
    finally:
        b.close()
        assert console.stop() == 0
