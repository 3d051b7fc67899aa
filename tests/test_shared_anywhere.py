"""Review and merge from any machine over the git remote (issue 36, point 7): clones of one bare remote served by
`git daemon` on 127.0.0.1, each its own machine. approve, request-changes and merge of a task another machine
holds run here as they do on PostgreSQL (tests/test_shared_postgres_merge.py): the claim moved by compare-and-set
on the remote, the merge pushed with the claim in one atomic push; the holder's row, thread and worktree follow
at its next sync. And `git worker status` shows other machines' heartbeats and descriptions."""

from __future__ import annotations

import json
from pathlib import Path

from fixtures.repos import build
from tests import shared_support as ss
from tests.shared_support import daemon  # noqa: F401  (the fixture)

_row = ss.row


def _team(tmp_path, daemon, names):  # noqa: F811
    return ss.team(tmp_path, daemon.url("project.git"), names)


def _ready(work: Path, task: str, *, approve: bool = False) -> str:
    return ss.ready(work, task, approve=approve, sync=True)


def _chain(bare: Path, task: str) -> list[dict]:
    tip = build.git(bare, "for-each-ref", "--format=%(objectname)", f"refs/nerve/claims/{task}")
    return [json.loads(build.git(bare, "cat-file", "blob", f"{s}:record.json"))
            for s in build.git(bare, "rev-list", "--reverse", tip).split()]


def test_approve_from_another_machine_reaches_the_holders_row_and_its_agents_thread(tmp_path, daemon):  # noqa: F811
    one, two = _team(tmp_path, daemon, ["one", "two"])
    bare = daemon.base / "project.git"
    _ready(one, "t")
    ss.ok(["nerve", "sync"], two)
    proc = ss.ok(["worker", "approve", "t", "--comment", "looks good from two"], two)
    assert "Approved: t (IN_REVIEW -> APPROVED)" in proc.stdout and "Held by machine one" in proc.stdout, proc.stdout
    last = _chain(bare, "t")[-1]
    assert (last["state"], last["verb"], last["machine"], last["owner"]) == ("APPROVED", "approve", "two", "one")
    assert _row(two, "t") is None and _row(one, "t").state == "IN_REVIEW"
    ss.ok(["nerve", "sync"], two)  # two's comment published (the background sync's job)
    synced = ss.ok(["nerve", "sync"], one)
    assert "t is APPROVED here: moved by machine two" in synced.stdout, synced.stdout
    assert _row(one, "t").state == "APPROVED"
    assert ("reviewer", "looks good from two", "two") in ss.rounds_of(one, "t")  # the agent reads its thread


def test_request_changes_from_another_machine_sends_the_comment_to_the_holders_agent(tmp_path, daemon):  # noqa: F811
    one, two = _team(tmp_path, daemon, ["one", "two"])
    _ready(one, "t")
    ss.ok(["nerve", "sync"], two)
    proc = ss.ok(["worker", "request-changes", "t", "--comment", "rename the helper"], two)
    assert "Changes requested: t (IN_REVIEW -> WORKING)" in proc.stdout, proc.stdout
    refused = ss.run(["worker", "approve", "t"], two)  # the claim moved: nothing to approve
    assert refused.returncode == 3 and "cannot approve t: it is WORKING on machine one" in refused.stderr, refused
    ss.ok(["nerve", "sync"], two)
    ss.ok(["nerve", "sync"], one)
    assert _row(one, "t").state == "WORKING" and _row(one, "t").approved_at is None
    assert ("reviewer", "rename the helper", "two") in ss.rounds_of(one, "t")
    assert "rename the helper" in ss.ok(["worker", "show", "t"], one).stdout
    ss.ok(["worker", "done", "--task", "t"], one)  # the holder goes on as after a local request-changes
    assert _row(one, "t").state == "IN_REVIEW"


def test_merge_from_another_machine_pushes_once_and_the_holder_cleans_up_at_its_sync(tmp_path, daemon):  # noqa: F811
    one, two = _team(tmp_path, daemon, ["one", "two"])
    bare = daemon.base / "project.git"
    tip = _ready(one, "t")
    ss.ok(["nerve", "sync"], two)
    ss.ok(["worker", "approve", "t"], two)
    proc = ss.ok(["worker", "merge", "t"], two)
    assert "Merged: t into main" in proc.stdout and "(pushed)" in proc.stdout, proc.stdout
    made = ss.merges_of(bare, tip)
    assert len(made) == 1 and build.git(bare, "rev-parse", "main").strip() == made[0]
    last = _chain(bare, "t")[-1]
    assert (last["state"], last["verb"], last["machine"], last["owner"]) == ("COMPLETED", "merge", "two", "one")
    worktree = Path(_row(one, "t").worktree)
    assert _row(one, "t").state == "IN_REVIEW" and worktree.is_dir()  # one learns at its next sync
    ss.ok(["nerve", "sync"], two)
    synced = ss.ok(["nerve", "sync"], one)
    assert "t was merged by machine two: COMPLETED here" in synced.stdout, synced.stdout
    assert "t was merged by machine two: its worktree removed (archived under refs/nerve/archive/t)" in synced.stdout
    assert _row(one, "t").state == "COMPLETED" and not worktree.exists()
    assert build.git(one, "rev-parse", "refs/nerve/archive/t").strip() == tip  # archived first
    assert build.git(one, "rev-parse", f"refs/heads/{_row(one, 't').branch}").strip() == tip  # the branch is kept
    again = ss.ok(["worker", "merge", "t"], two)  # a rerun changes nothing
    assert len(ss.merges_of(bare, tip)) == 1, again.stdout


def test_two_machines_merging_one_task_at_once_make_one_merge_and_the_loser_names_the_winner(
        tmp_path, daemon):  # noqa: F811
    one, two, three = _team(tmp_path, daemon, ["one", "two", "three"])
    bare = daemon.base / "project.git"
    tip = _ready(one, "t", approve=True)
    for w in (two, three):
        ss.ok(["nerve", "sync"], w)
    won, loser = ss.merge_at_once("t", {"two": two, "three": three})
    assert loser.returncode == 8 and len(loser.stderr.splitlines()) == 1, loser
    assert f"task t was merged by machine {won} (held by machine one); nothing changed here" in loser.stderr
    assert len(ss.merges_of(bare, tip)) == 1
    last = _chain(bare, "t")[-1]
    assert (last["state"], last["machine"], last["seq"]) == ("COMPLETED", won, 5)


def test_status_shows_other_machines_heartbeat_and_description(tmp_path, daemon):  # noqa: F811
    one, two = _team(tmp_path, daemon, ["one", "two"])
    ss.ok(["worker", "spawn", "t", "-d", "the\nforged row\x1b[31m task"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    ss.ok(["worker", "heartbeat", "--task", "t", "--status", "busy"], one)
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)
    rows = {r["task_id"]: r for r in json.loads(ss.ok(["worker", "status", "--json"], two).stdout)}
    assert rows["t"]["description"] == "the\nforged row\x1b[31m task" and rows["t"]["last_heartbeat"]
    shown = ss.ok(["worker", "status"], two).stdout
    line = next(ln for ln in shown.splitlines() if ln.startswith("t "))
    assert " ago " in line and "the" in line and "\x1b" not in line, shown
    assert "forged row" not in shown.replace(line, ""), shown  # the description's newline made no row


def test_a_holders_worktree_with_uncommitted_work_is_kept_when_another_machine_merged_its_task(
        tmp_path, daemon):  # noqa: F811
    one, two = _team(tmp_path, daemon, ["one", "two"])
    _ready(one, "t", approve=True)
    ss.ok(["nerve", "sync"], two)
    ss.ok(["worker", "merge", "t"], two)
    ss.ok(["nerve", "sync"], two)
    worktree = Path(_row(one, "t").worktree)
    (worktree / "notes.txt").write_text("not committed\n")
    synced = ss.ok(["nerve", "sync"], one)
    assert "its worktree" in synced.stdout and "has uncommitted changes (notes.txt): kept" in synced.stdout, synced
    assert _row(one, "t").state == "COMPLETED" and (worktree / "notes.txt").is_file()
    assert "merged by machine two; its worktree is kept here" in ss.ok(["worker", "status"], one).stdout
    ss.ok(["worker", "merge", "t", "--force"], one)  # archives it, then removes it
    assert not worktree.exists()
    assert "notes.txt" in build.git(one, "show", "--name-only", "--format=", "refs/nerve/archive/t")


def test_what_a_peer_published_of_its_task_is_taken_as_text_and_times_never_after_now():
    import sqlite3

    from git_nerve.bus import shared as cache

    conn = sqlite3.connect(":memory:")
    cache.ensure(conn)
    for task, owner in (("t", "one"), ("u", "one"), ("v", "one"), ("mine", "here")):
        cache.put_claim(conn, cache.Claim(task, owner, owner, "WORKING", "start", 2, "0" * 40, 1.0))
    events = [("one:m1", "one", 100.0, "t", "heartbeat", {}), ("one:m2", "one", 9e99, "u", "heartbeat", {}),
              ("one:m3", "one", -1e300, "v", "heartbeat", {}), ("two:m1", "two", 150.0, "t", "heartbeat", {}),
              ("one:m4", "one", 50.0, "t", "task_assign", {"description": "x" * 5000, "branch": ["not", "text"]}),
              ("here:m1", "here", 120.0, "mine", "heartbeat", {})]
    cache.add_events(conn, [{"id": i, "machine": m, "ts": ts, "task": t, "kind": k, "payload": p}
                            for i, m, ts, t, k, p in events])
    words = cache.holders_words(conn, "here", now=200.0)
    assert words["t"]["last_heartbeat"] == 100.0  # the holder's own beat; another machine's says nothing of it
    assert words["u"]["last_heartbeat"] == 200.0 and "last_heartbeat" not in words.get("v", {})
    assert len(words["t"]["description"]) == 2000 and words["t"]["branch"] is None
    assert "mine" not in words  # this machine's tasks are its rows


def test_a_merge_from_another_machine_whose_answer_was_lost_is_finished_by_running_it_again(tmp_path):
    """The remote takes the merge's atomic push (integration branch and claim) and the connection drops before it
    answers: the merge says it may have landed; its rerun reads the claim, finds this machine's merge and pushes
    nothing again."""
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    tip = _ready(one, "t", approve=True)
    ss.ok(["nerve", "sync"], two)
    hook = bare / "hooks" / "post-receive"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text("#!/bin/sh\ncat >/dev/null\nkill -9 $PPID\n")
    hook.chmod(0o755)
    proc = ss.run(["worker", "merge", "t"], two)
    assert proc.returncode == 4 and "may have landed; run `git worker merge t` again" in proc.stderr, proc
    assert _chain(bare, "t")[-1]["state"] == "COMPLETED" and len(ss.merges_of(bare, tip)) == 1
    hook.unlink()
    again = ss.ok(["worker", "merge", "t"], two)
    assert "t" in again.stdout and len(ss.merges_of(bare, tip)) == 1, again.stdout
    assert [r["state"] for r in _chain(bare, "t")].count("COMPLETED") == 1
    ss.ok(["nerve", "sync"], two)
    ss.ok(["nerve", "sync"], one)
    assert _row(one, "t").state == "COMPLETED"
