"""The console in a real browser: Debian's headless Chromium driven by Playwright (installed at a
pinned version by tests/realtools.py; the browser is never downloaded), on a real repository with a
live worker (`git worker run` heartbeating around a scripted agent that commits, reads a note and
finishes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import console_walks as walks
from conftest import git
from console_support import Browser, Console, artifacts, review_setup
from waiting import wait_until
from fixtures.repos.build import commit_file

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
        # this repository has no check command: the dialog does not tick "run the check" (issue 38)
        assert browser("eval", js="document.querySelector('[data-testid=confirm-check]').checked") is False
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


@pytest.mark.real
def test_a_persons_whole_review_from_a_link_to_the_merge(remote_repo, tmp_path, gw, gn):
    work, origin = remote_repo.work, remote_repo.origin
    wt1 = review_setup(work, gw)
    shots = artifacts(tmp_path)
    console = Console(work)
    b = Browser.start()
    try:
        # a link to one file of the task's diff opens it
        assert b("goto", url=console.url + "#/task/t1/diff/feature.txt") == 200
        walks.read_the_diff(b, shots)
        walks.comment_and_request_changes(b, gn, work, shots)
        walks.the_next_round(b, gw, gn, work, wt1, shots)
        before = walks.approve_and_merge(b, work, origin, shots)
        assert b.problems() == []  # no script error, no refused request
    finally:
        b.close()
        assert console.stop() == 0
    assert git(origin, "rev-parse", "main") != before
    assert git(origin, "log", "-1", "--format=%s", "main") == "Merge feat/t1 (t1)"
    assert "return ANSWER" in git(origin, "show", "main:feature.txt")


#: the task actions each state offers (worker/states.py's table, as `git worker` enforces it)
OFFERED = {"a1": {"cancel"}, "w1": {"cancel"}, "r1": {"approve", "request_changes", "cancel"},
           "p1": {"request_changes", "merge", "cancel"}, "c1": set(), "f1": {"retry"}}


@pytest.mark.real
def test_actions_only_where_the_state_allows_them_confirmed_and_filters_that_stay(repo, tmp_path, gw):
    from fixtures.repos import worker as wk

    work = repo.work
    for task, state in (("a1", "ASSIGNED"), ("r1", "IN_REVIEW"), ("p1", "APPROVED"), ("c1", "COMPLETED"), ("f1", "FAILED")):
        wk.drive(work, task, state, file="shared.txt" if task == "r1" else None)
    commit_file(wk.drive(work, "w1", "WORKING"), "shared.txt", "the other version\n", "w1: shared.txt")
    assert gw("conflicts --refresh", work).code in (0, 1)
    shots = artifacts(tmp_path)
    console = Console(work)
    b = Browser.start()
    try:
        assert b("goto", url=console.url) == 200
        b("wait", selector="tr.worker[data-task=f1]")
        for task, offered in OFFERED.items():
            assert b.open_task(task) == offered, task
        walks.filters(b, shots)
        walks.retry_and_cancel(b, work)
        walks.refusals_spawn_and_live_buttons(b, gw, work)
        assert b.problems(("Failed to load resource", "status of 400", "/api/merge_all"),
                          ("Failed to load resource", "status of 400", "/api/spawn")) == []
    finally:
        b.close()
        assert console.stop() == 0


@pytest.mark.real
def test_drafts_belong_to_their_task_and_urls_keys_and_a_phone_width_work(repo, tmp_path):
    from fixtures.repos import worker as wk

    work = repo.work
    for task in ("t1", "t2"):
        wk.drive(work, task, "IN_REVIEW")
    commit_file(wk.drive(work, "t3", "WORKING"), "page.html", walks.EVIL + "\n", walks.EVIL)
    shutil.rmtree(wk.drive(work, "t4", "WORKING"))  # removed by hand: the console says so
    shots = artifacts(tmp_path)
    console = Console(work)
    b = Browser.start()
    try:
        assert b("goto", url=console.url + "#/task/t1/diff") == 200
        walks.empty_output_and_missing_worktree(b)
        b("eval", js="location.hash = '#/task/t1/diff'")
        walks.drafts_and_history(b)
        walks.keys_and_links(b)
        walks.phone_widths(b, shots)
        assert b.problems() == []
    finally:
        b.close()
        assert console.stop() == 0


@pytest.mark.real
def test_in_shared_mode_each_task_names_its_machine_and_another_machines_task_is_read_only(tmp_path):
    from tests import shared_support as ss

    one, two = ss.team(tmp_path, str(ss.origin(tmp_path)), ["one", "two"])
    ss.ok(["worker", "spawn", "t", "-d", "the feature"], one)
    ss.ok(["worker", "spawn", "mine"], two)
    for w in (one, two):
        ss.ok(["nerve", "sync"], w)
    console = Console(two)
    b = Browser.start()
    try:
        assert b("goto", url=console.url) == 200
        b("wait_text", selector="tr.worker[data-task=t] [data-testid=machine]", text="one (read-only)")
        assert b("eval", js="document.querySelector('tr.worker[data-task=mine] [data-testid=machine]').textContent") == "two"
        assert b("eval", js="document.querySelector('[data-testid=shared-view]').textContent").startswith(
            "machine two · synced ")
        assert b.open_task("t", "thread") == set()
        b("wait_text", selector="[data-testid=held-elsewhere]", text="held by machine one: its review and merge run from here")
        assert b.open_task("mine", "thread") == {"cancel"}
        assert b.problems() == []
    finally:
        b.close()
        assert console.stop() == 0


@pytest.mark.real
def test_the_board_reads_at_a_glance_on_every_width_and_the_merge_dialogs_default_to_what_is_configured(repo, tmp_path,
                                                                                                        gw, gn):
    """Issue 38: no "null", no column shift, ids and descriptions on one line, disk sizes as `status` prints them,
    the selected task's panel in view at 1400, 900 and 420 px; "run the check" ticked only when configured."""
    from fixtures.repos import worker as wk
    from git_nerve.worktree_prep.disk import human

    work = repo.work
    for task, (state, desc) in walks.BOARD.items():
        wk.drive(work, task, state, description=desc)
    console = Console(work)
    b = Browser.start()
    shots = artifacts(tmp_path)
    try:
        assert b("goto", url=console.url) == 200
        b("wait", selector="tr.worker")
        # every worktree measured (a few per summary: a budget), then `status` reads the same sizes
        wait_until(lambda: all(r["disk_bytes"] is not None for r in json.loads(console.request("GET", "/api/state")[1])["workers"]
                               if r["state"] != "COMPLETED"), what="every worktree measured", timeout=60)
        rows = json.loads(subprocess.run(["git", "worker", "status", "--json"], cwd=work, check=True,
                                         capture_output=True, text=True).stdout)
        disks = {r["task_id"]: human(r["disk_bytes"]) for r in rows}
        assert any(d.endswith("KB") for d in disks.values()), disks
        walks.board_groups(b)
        ports = {r["task_id"]: r.get("port") for r in rows}
        assert any(ports.values()), ports
        walks.board_at_a_glance(b, disks, shots, ports)
        walks.merge_dialog_defaults(b, console, work, gn)
        assert b.problems() == []
    finally:
        b.close()
        assert console.stop() == 0


@pytest.mark.real
def test_line_comments_stay_on_their_lines_and_a_conflicted_task_says_what_conflicts(remote_repo, tmp_path, gw):
    """Issue 38: after request changes and the agent's next round, the reviewer's line comments are on their lines
    (outdated when moved or changed) in all files and "since your last review"; a CONFLICTED task's banner says
    what conflicts where, the CLI's recipe, and its "tell the agent to rebase" note reaches the thread."""
    import console_walks_rounds as rounds
    from console_support import worktree_of

    work = remote_repo.work
    wt1 = review_setup(work, gw)
    wt2 = worktree_of(work, "t2")
    shots = artifacts(tmp_path)
    console = Console(work)
    b = Browser.start()
    try:
        assert b("goto", url=console.url + "#/task/t1/diff/feature.txt") == 200
        rounds.comment_then_next_round(b, gw, work, wt1)
        rounds.comments_stay_on_their_lines(b, shots)
        rounds.conflict_banner(b, gw, work, wt2, shots)
        assert b.problems() == []
    finally:
        b.close()
        assert console.stop() == 0


@pytest.mark.real
def test_the_page_benchmark_runs_with_fewer_than_eight_workers(tmp_path):
    """bench/console_page.py reviews the first 8 tasks' files: with fewer workers it reviews those there are (it
    crashed on `--workers 4` with an IndexError), its figures printed as with 64."""
    from realtools import CACHE

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, str(root / "bench" / "console_page.py"), "--workers", "3", "--duration",
                           "3", "--interval", "1", "--diff-files", "2"], cwd=root, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "GIT_NERVE_TOOL_CACHE": str(CACHE)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "3 workers heartbeating every 1s for 3s, the page open in Chromium" in out
    for name in ("heartbeat -> page", "commit -> page", "diff in the page", "  of which /diff"):
        assert any(ln.startswith(name) and " p50 " in ln for ln in out.splitlines()), out
    diffs = next(ln for ln in out.splitlines() if ln.startswith("diff in the page"))
    assert not diffs.endswith("(0/0)"), out  # the three tasks' diffs were drawn
