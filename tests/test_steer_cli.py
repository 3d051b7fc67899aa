"""`git nerve tell`, `git nerve outbox` and `git worker show`'s told messages, from the command line."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.repos import worker as wk

BIN = Path(sys.executable).parent


def test_tell_says_one_sentence_with_the_id_and_a_note_reaches_the_thread_from_anywhere(repo, gw, gn):
    wt = wk.spawn(repo.work, "t1")
    res = gn(["tell", "--task", "t1", "use tabs, not spaces"], repo.work / "src")
    assert res.code == 0, res
    assert res.out == "queued #1: note for t1; added to the thread (t1 #1)\n" and res.err == ""  # no bare id line
    res = gn(["tell", "the docs need a changelog entry"], wt)  # inside the worktree: its own task
    assert res.code == 0 and res.out.startswith("queued #2: note for t1")
    thread = gn(["thread", "t1", "--json"], wt)
    got = [(r["role"], r["content"]) for r in json.loads(thread.out)["rounds"]]
    assert got == [("human", "use tabs, not spaces"), ("human", "the docs need a changelog entry")]


def test_bad_input_is_one_line_exit_2_and_nothing_queued(repo, gw, gn):
    wk.spawn(repo.work, "t1")
    for args, message in [
        (["tell", ""], "error: empty message"),
        (["tell", "--task", "t9", "hi"], "error: unknown task 't9'"),
        (["tell", "--kind", "halt", "--task", "t1", "now"], "error: unknown kind 'halt': use one of stop, skip, add, note"),
        (["tell", "skip t9"], "error: unknown task 't9'; to send the text as a note, pass --kind note"),
        (["tell", "hello"], "error: a note needs a task"),
    ]:
        res = gn(args, repo.work)
        assert res.code == 2, (args, res)
        assert res.err.startswith(message) and res.err.count("\n") == 1, (args, res.err)
    assert json.loads(gn(["outbox", "--json"], repo.work).out) == []
    assert json.loads(gw(["show", "t1", "--json"], repo.work).out)["inbox"] == []


def running(work: Path, lock: str):
    """Hold the lock a run (or the merge queue) holds while it runs, as that process would."""
    from git_nerve.locks import hold

    return hold(wk.bus_path(work).parent / "locks" / f"{lock}.lock", timeout=5)


def test_tell_json_and_show_lists_what_was_told(repo, gw, gn):
    wk.spawn(repo.work, "t1")
    with running(repo.work, "run-t1"):  # a stop needs something running (a `git nerve run` of t1 holds this)
        res = gn(["tell", "--json", "--task", "t1", "--kind", "stop", "wrap it up"], repo.work)
    assert res.code == 0
    told = json.loads(res.out)
    assert (told["kind"], told["scope"], told["task"], told["text"]) == ("stop", "task", "t1", "wrap it up")
    gn(["tell", "skip t1"], repo.work)
    shown = gw(["show", "t1"], repo.work)
    assert "Told (git nerve tell):" in shown.out
    assert '#1    stop  "wrap it up"  (waiting for task:t1)' in shown.out
    assert '#2    skip  "skip t1"  (waiting for merge-all)' in shown.out
    inbox = json.loads(gw(["show", "t1", "--json"], repo.work).out)["inbox"]
    assert [(e["id"], e["scope"], e["status"]) for e in inbox] == [(1, "task", "waiting for task:t1"),
                                                                 (2, "queue", "waiting for merge-all")]


def test_outbox_lists_oldest_first_and_follow_prints_new_lines(repo, gw, gn):
    wk.drive(repo.work, "t1", "APPROVED")
    assert gn(["outbox"], repo.work).out == ""
    gn(["tell", "skip t1"], repo.work)
    assert gw(["merge", "--all"], repo.work).code == 0  # the skip is acted on: nothing merged
    lines = json.loads(gn(["outbox", "--json"], repo.work).out)
    assert [(x["consumer"], x["kind"], x["inbox_id"]) for x in lines] == [("merge-all", "skip", 1)]
    assert lines[0]["text"].startswith('skip t1: taken out of the merge queue; queued message: "skip t1" (queued at ')
    text = gn(["outbox"], repo.work).out
    assert text.endswith(f"merge-all        {lines[0]['text']}\n")

    proc = subprocess.Popen([str(BIN / "git-nerve"), "outbox", "--follow", "--json"], cwd=repo.work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["id"] == lines[0]["id"]
        with running(repo.work, "merge-all"):  # told while a `merge --all` runs (it holds this lock)
            assert gn(["tell", "stop"], repo.work).code == 0
        gw(["merge", "--all"], repo.work)
        second = json.loads(proc.stdout.readline())
        assert second["kind"] == "stop" and second["text"].startswith('stopped by queued message: "stop" (queued at ')
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_outbox_lists_a_note_as_queued_then_delivered_then_acknowledged(repo, gw, gn):
    """A note told while no agent runs is in the outbox at once as queued (before, nothing was listed until
    an agent read it); then delivered, then acknowledged; text and --json alike."""
    from git_nerve.bus.connection import Bus
    from git_nerve.steer import delivery

    wk.drive(repo.work, "t1", "WORKING")
    assert gn(["tell", "--task", "t1", "please rename foo"], repo.work).code == 0
    listed = json.loads(gn(["outbox", "--json"], repo.work).out)
    assert [(x["status"], x["inbox_id"], x["kind"]) for x in listed] == [("queued", 1, "note")]
    assert listed[0]["text"] == '#1 note to t1: "please rename foo" (queued: nobody has read it yet)'
    text = gn(["outbox"], repo.work).out.splitlines()
    assert len(text) == 1 and re.search(r"Z  queued +#1 note to t1: \"please rename foo\"", text[0]), text
    bus = Bus(repo.work / ".git" / "nerve" / "bus.db")
    try:
        delivery.deliver(bus, "t1", reader="claude", via="hook", pid=4242)
        assert [x["status"] for x in json.loads(gn(["outbox", "--json"], repo.work).out)] == ["delivered"]
        delivery.acted(bus, "t1", how="edited foo.py")
    finally:
        bus.close()
    listed = json.loads(gn(["outbox", "--json"], repo.work).out)
    assert [x["status"] for x in listed] == ["delivered", "acknowledged"]
    assert not re.search(r"Z  queued +#", gn(["outbox"], repo.work).out)


def test_help_names_the_patterns_and_merge_keeps_its_options(gn, gw, tmp_path):
    res = gn(["tell", "--help"], tmp_path)
    assert res.code == 0 and "skip TASK" in res.out and "--kind" in res.out and "--all" in res.out
    res = gw(["merge", "--help"], tmp_path)
    for option in ("--all", "--delete-branch", "--check", "--force", "--json"):
        assert option in res.out
    assert gn(["outbox", "--help"], tmp_path).code == 0


def test_merge_needs_a_task_or_all(repo, gw):
    wk.drive(repo.work, "t1", "APPROVED")
    for args in (["merge"], ["merge", "t1", "--all"]):
        res = gw(args, repo.work)
        assert res.code == 2 and res.err == "error: give a TASK_ID or --all (not both)\n"
    assert wk.state(repo.work, "t1") == "APPROVED"
    res = gw(["merge", "t1"], repo.work)  # the single-task merge is unchanged
    assert res.code == 0 and res.out.startswith("Merged: t1 into main as ")
    assert wk.state(repo.work, "t1") == "COMPLETED"


def test_tell_says_in_one_line_when_the_running_agent_cli_has_no_mid_run_hook(repo, gw, gn):
    """Issue 40: a note for a task whose running round is a CLI without a hook waits for the next round."""
    from git_nerve.locks import hold
    from git_nerve.workflow import runlog

    wk.spawn(repo.work, "t1")
    common = repo.work / ".git"
    tee = runlog.open_tee(common, "t1", 1, "coder", "aider", None)  # the round runs: its log is held
    try:
        res = gn(["tell", "--task", "t1", "keep it short"], repo.work)
        assert res.code == 0 and res.err == "", res
        first, second = res.out.splitlines()
        assert first.startswith("queued #1: note for t1")
        assert second == "aider has no mid-run hook: the note waits for its next round (or its `git nerve notes` / MCP call)"
        as_json = json.loads(gn(["tell", "--task", "t1", "again", "--json"], repo.work).out)
        assert as_json["waits"] == second
        with hold(common / "nerve" / "locks" / "run-t1.lock", timeout=5):  # as the running `git nerve run`
            stop = gn(["tell", "--task", "t1", "stop"], repo.work)
        assert stop.out.splitlines()[1] == "aider has no mid-run hook: the runner ends it at its next tick", stop
    finally:
        tee.close()
    tee = runlog.open_tee(common, "t1", 2, "coder", "qwen", None)  # a CLI with a hook: nothing more to say
    try:
        res = gn(["tell", "--task", "t1", "one more"], repo.work)
        assert len(res.out.splitlines()) == 1 and "waits" not in json.loads(
            gn(["tell", "--task", "t1", "and one", "--json"], repo.work).out), res
    finally:
        tee.close()
    done = gn(["tell", "--task", "t1", "after the round"], repo.work)  # nothing runs: the usual one line
    assert len(done.out.splitlines()) == 1, done
    for n, cli in enumerate(("opencode", "gemini"), start=3):  # its plugin / its hooks take notes and end it
        tee = runlog.open_tee(common, "t1", n, "coder", cli, None)
        try:
            with hold(common / "nerve" / "locks" / "run-t1.lock", timeout=5):
                for text in (f"a note for {cli}", "stop"):
                    assert len(gn(["tell", "--task", "t1", text], repo.work).out.splitlines()) == 1
        finally:
            tee.close()


@pytest.mark.parametrize("cli", ["codex"])
def test_tell_to_a_cli_whose_hook_takes_notes_but_only_refuses_tools_once_stopped(repo, gn, cli):
    """Issue 40: Codex's hooks take a note mid-run (nothing more said); a stop: its hook refuses, the runner ends it."""
    from git_nerve.locks import hold
    from git_nerve.workflow import runlog

    wk.spawn(repo.work, "t1")
    common = repo.work / ".git"
    tee = runlog.open_tee(common, "t1", 1, "coder", cli, None)
    try:
        res = gn(["tell", "--task", "t1", "keep it short"], repo.work)
        assert res.code == 0 and len(res.out.splitlines()) == 1, res
        with hold(common / "nerve" / "locks" / "run-t1.lock", timeout=5):
            stop = gn(["tell", "--task", "t1", "stop"], repo.work)
        assert stop.out.splitlines()[1] == (f"{cli} cannot end itself mid-run: its hook refuses its tool calls from "
                                            "the next one on, and the runner ends it at its next tick"), stop
    finally:
        tee.close()
