"""The traps of daily use (issue 22): each gets the behaviour a careful user expects, on real repositories."""

from __future__ import annotations

from pathlib import Path

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from waiting import wait_until


# -- a relative origin URL --------------------------------------------------------------


def _relative_origin(tmp_path: Path) -> build.Repos:
    repos = build.simple(tmp_path)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(repos.work, "remote", "add", "origin", "../origin.git")
    git(repos.work, "push", "-q", "-u", "origin", "main")
    git(repos.work, "remote", "set-head", "origin", "main")
    return build.Repos(work=repos.work, origin=origin)


def test_relative_origin_url_works_from_worktrees_without_touching_config(tmp_path, gw, gn):
    repos = _relative_origin(tmp_path)
    work = repos.work
    config_before = git(work, "config", "--list", "--local")

    init = gn("init", work)
    assert init.code == 0, init
    assert "'../origin.git' is relative" in init.err and f"git remote set-url origin {repos.origin}" in init.err

    spawned = gw("spawn t1", work)
    assert spawned.code == 0, spawned
    assert spawned.err.count("is relative") == 1  # one line
    wt = wk.worktree(work, "t1")
    assert wt.parent.parent != work  # the worktree lives elsewhere: ../origin.git means nothing there

    assert gw("start", wt).code == 0
    build.commit_file(wt, "t1.txt", "t1\n", "t1: add t1.txt")
    tip = git(wt, "rev-parse", "HEAD")
    done = gw("done", wt)
    assert done.code == 0, done
    assert "Pushed" in done.out
    assert git(repos.origin, "rev-parse", "refs/heads/feat/t1") == tip
    assert git(work, "rev-parse", "refs/remotes/origin/feat/t1") == tip  # the remote-tracking ref is kept

    assert gw("approve t1", work).code == 0
    merged = gw("merge t1", wt)  # from inside the task's worktree: fetch and push find the remote too
    assert merged.code == 0, merged
    assert git(repos.origin, "merge-base", "--is-ancestor", tip, "main", check=False) == ""
    assert wk.state(work, "t1") == "COMPLETED"

    # the user's configuration is not rewritten: the URL stays relative, no url.*.insteadOf was added
    assert git(work, "config", "remote.origin.url") == "../origin.git"
    added = set(git(work, "config", "--list", "--local").splitlines()) - set(config_before.splitlines())
    assert not [line for line in added if line.startswith(("url.", "remote."))], added


# -- a task with no commits ----------------------------------------------------------------


def test_empty_task_is_refused_at_done_and_allowed_empty_merges_as_nothing(remote_repo, gw):
    work, origin = remote_repo.work, remote_repo.origin
    wk.drive(work, "t0", "COMPLETED")  # an earlier merge, whose sha an empty task's merge once reported
    previous = git(origin, "rev-parse", "main")
    wt = wk.drive(work, "t1", "WORKING")

    refused = gw("done", wt)
    assert refused.code == 3, refused
    assert refused.err.count("\n") == 1 and "nothing to review: t1 has no commits" in refused.err
    assert "--allow-empty" in refused.err
    assert wk.state(work, "t1") == "WORKING"

    allowed = gw("done --allow-empty", wt)
    assert allowed.code == 0, allowed
    assert wk.state(work, "t1") == "IN_REVIEW"
    assert gw("approve t1", work).code == 0
    merged = gw("merge t1", work)
    assert merged.code == 0, merged
    assert "Nothing to merge: t1 has no commits of its own; main did not move (COMPLETED)" in merged.out
    assert previous[:12] not in merged.out and "pushed" not in merged.out
    assert git(origin, "rev-parse", "main") == previous
    assert wk.state(work, "t1") == "COMPLETED"
    with wk.opened(work) as repo:
        from git_nerve.bus import messages

        record = messages.for_task(repo.bus.conn, "t1", kinds=("merged",))[-1].payload
    assert record["commit"] is None and record["nothing"] == "empty"


def test_merge_of_a_task_already_on_the_integration_branch_reports_no_merge_commit(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "APPROVED")
    tip = git(wt, "rev-parse", "HEAD")
    git(work, "merge", "-q", "--ff-only", "feat/t1")  # a person fast-forwarded main by hand
    res = gw("merge t1 --json", work)
    assert res.code == 0, res
    import json

    out = json.loads(res.out)
    assert out["merge_commit"] is None and out["nothing_merged"] == "on-integration"
    assert git(work, "rev-parse", "main") == tip
    plain_wt = wk.drive(work, "t2", "APPROVED")
    git(work, "merge", "-q", "--ff-only", "feat/t2")
    said = gw("merge t2", work)
    assert said.code == 0 and "the commits of t2 are already on main; no merge commit made" in said.out, said
    assert not plain_wt.exists()


# -- a stop with nothing running ------------------------------------------------------------------


def _inbox(work: Path) -> list:
    import json

    from conftest import cli

    return json.loads(cli(["outbox", "--json"], work, prog="nerve").out)


def test_stop_with_nothing_running_is_refused_and_does_not_wait_for_the_next_merge_queue(repo, gn, gw):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    for args in (["tell", "stop"], ["tell", "--all", "stop"], ["tell", "--task", "t1", "stop"]):
        res = gn(args, work)
        assert res.code == 3, (args, res)
        assert res.err.startswith("error: nothing to stop: no ") and res.err.count("\n") == 1, res
        assert "nothing was queued" in res.err and res.out == ""
    assert "merge --all" in gn(["tell", "stop"], work).err
    assert "git nerve run` or `git worker run` of t1" in gn(["tell", "--task", "t1", "stop"], work).err
    import json

    assert json.loads(gw("show t1 --json", work).out)["inbox"] == []  # nothing lies in wait
    merged = gw("merge --all", work)
    assert merged.code == 0 and "Merged: t1" in merged.out, merged
    assert wk.state(work, "t1") == "COMPLETED"


def test_stop_reaches_a_running_git_worker_run_and_tell_says_one_sentence(repo, gn):
    import subprocess
    import time

    from conftest import BIN
    from git_nerve.locks import is_held
    from git_nerve.steer.hook import worker_run_lock

    work = repo.work
    wt = wk.spawn(work, "t1")
    git(work, "config", "nerve.heartbeatInterval", "0.3")
    note = gn(["tell", "--task", "t1", "use the v2 API"], work)
    assert note.code == 0 and note.out.startswith("queued #1: note for t1"), note  # no bare id line
    proc = subprocess.Popen([str(BIN / "git-worker"), "run", "--", "sleep", "60"], cwd=wt, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = worker_run_lock(wk.bus_path(work).parent / "locks", "t1")
        wait_until(lambda: is_held(lock), 20, what="the run lock to be taken", alive=proc)
        told = gn(["tell", "stop"], wt)  # inside the worktree: its task, which runs
        assert told.code == 0 and told.out.startswith("queued #2: stop for t1"), told
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + 15
    assert not is_held(lock)
    assert gn(["tell", "stop"], wt).code == 3  # the run is over: nothing to stop again


# -- input on idempotent commands is applied or refused, never dropped ---------------------------------


def test_request_changes_on_a_working_task_adds_the_comment_and_a_rerun_adds_it_once(repo, gw, gn):
    import json

    work = repo.work
    wk.drive(work, "t1", "IN_REVIEW")
    assert gw(["request-changes", "t1", "--comment", "rename it"], work).code == 0
    again = gw(["request-changes", "t1", "--comment", "and add a test"], work)  # already WORKING
    assert again.code == 0 and "already WORKING; the comment is in its thread" in again.out, again
    assert gw(["request-changes", "t1", "--comment", "and add a test"], work).code == 0  # a rerun: not twice
    thread = json.loads(gn(["thread", "t1", "--json"], work).out)
    said = [r["content"] for r in thread["rounds"] if r["role"] == "reviewer"]
    assert said == ["rename it", "and add a test"]
    shown = gw("show t1", work).out
    assert "comment=rename it" in shown and "comment=and add a test" in shown


def test_spawn_again_with_other_input_or_of_a_finished_task_is_refused(repo, gw):
    work = repo.work
    assert gw(["spawn", "t1", "-d", "fix the login"], work).code == 0
    assert gw(["spawn", "t1", "-d", "fix the login"], work).code == 0  # same input: idempotent
    assert gw(["spawn", "t1"], work).code == 0
    other = gw(["spawn", "t1", "-d", "something else"], work)
    assert other.code == 2 and other.err.count("\n") == 1, other
    assert "already exists with another description ('fix the login'); nothing changed" in other.err
    assert wk.row(work, "t1").description == "fix the login"

    wk.drive(work, "t2", "COMPLETED")
    finished = gw(["spawn", "t2"], work)
    assert finished.code == 3 and "t2 is COMPLETED" in finished.err and "choose another task id" in finished.err
    assert finished.out == ""  # no worktree path that no longer exists
    wk.drive(work, "t3", "FAILED")
    failed = gw(["spawn", "t3"], work)
    assert failed.code == 3 and "git worker retry t3" in failed.err, failed


# -- a bare repository ----------------------------------------------------------------------------------


def test_init_and_spawn_in_a_bare_repository_are_refused_and_leave_nothing(remote_repo, gn, gw):
    origin = remote_repo.origin
    before = sorted(p.name for p in origin.iterdir())
    for res in (gn("init", origin), gw("spawn t1", origin)):
        assert res.code == 2, res
        assert res.err.startswith("error: this is a bare repository (a remote); ") and res.err.count("\n") == 1, res
        assert "in a clone of it" in res.err
    assert sorted(p.name for p in origin.iterdir()) == before  # no nerve/ bus inside the remote
    assert not (origin / "hooks").exists()  # no hooks installed inside the remote
    assert git(origin, "config", "--get", "nerve.integration", check=False) == ""


# -- status shows the state; staleness and radar marks are their own --------------------------------------


def test_status_shows_the_state_with_staleness_apart_and_no_marks_on_finished_tasks(repo, gw):
    import json
    import time

    from git_nerve.radar import cache

    work = repo.work
    wk.drive(work, "t1", "FAILED")
    assert gw("retry t1", work).code == 0
    wk.set_columns(work, "t1", assigned_at=time.time() - 3600)  # retried, no heartbeat since: stale
    wk.drive(work, "t2", "COMPLETED")
    wt3 = wk.drive(work, "t3", "WORKING")
    time.sleep(0.05)  # makes time pass on purpose: t3's commit must be newer than what the radar looked at
    build.commit_file(wt3, "t3.txt", "more\n", "t3: more")  # t3 committed after the radar looked
    common = work / ".git"
    from git_nerve.locks import hold

    with hold(cache.lock(common), timeout=120):  # no background recompute (a commit starts one) replaces it meanwhile
        # the radar's last result (computed while t2 was live, before t3's commit): t2-t3 conflict, t1-t3 overlap
        cache.save(common, {"at": time.time() - 60, "integration": "main", "sides": {}, "pairs": {
            cache.key("t2", "t3"): {"kind": "conflict", "files": ["src/app.py"], "conflicts": {}},
            cache.key("t1", "t3"): {"kind": "overlap", "files": ["src/app.py"], "conflicts": {}}}})
        table = gw("status", work).out
        rows = {r["task_id"]: r for r in json.loads(gw("status --json", work).out)}
    lines = {ln.split()[0]: ln for ln in table.splitlines()[1:] if ln and not ln.startswith(" ")}
    assert lines["t1"].split()[1] == "ASSIGNED" and "STALE" in lines["t1"]
    assert lines["t2"].split()[1] == "COMPLETED"
    assert "! conflict: t2" not in table  # a finished task collides with nothing
    assert "! overlap: t1 (stale: computed before its last commit" in table
    assert (rows["t1"]["state"], rows["t1"]["stale"]) == ("ASSIGNED", True)
    assert rows["t2"]["radar"] == [] and rows["t3"]["radar"] == ["overlap: t1"] and rows["t3"]["radar_stale"] is True
    assert rows["t1"]["radar"] == ["overlap: t3"] and rows["t1"]["radar_stale"] is False


def test_show_prints_short_shas_in_human_words(repo, gw):
    work = repo.work
    wk.drive(work, "t1", "IN_REVIEW")
    base = git(work, "rev-parse", "main")
    shown = gw("show t1", work).out
    assert f"branch feat/t1 from main at {base[:10]}, worktree " in shown
    assert base not in shown and "base_sha=" not in shown
    import re

    assert not re.search(r"\b[0-9a-f]{40}\b", shown), shown


# -- demo --console keeps serving until Ctrl-C ------------------------------------------------------------


def test_demo_console_keeps_serving_after_the_demo_until_ctrl_c(tmp_path):
    import os
    import re
    import signal
    import subprocess
    import time
    import urllib.request

    import pytest

    from conftest import BIN

    pytest.importorskip("uvicorn")
    root = tmp_path / "demo"
    proc = subprocess.Popen([str(BIN / "git-nerve"), "demo", "--console", "--dir", str(root)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    seen = []
    try:
        deadline = time.monotonic() + 400
        url = None
        for line in proc.stdout:  # type: ignore[union-attr]
            seen.append(line)
            if "keeps serving" in line:
                url = re.search(r"https?://\S+", line).group(0)  # type: ignore[union-attr]
                break
            assert time.monotonic() < deadline
        assert url and seen[-1].rstrip().endswith(" until you press Ctrl-C"), "".join(seen[-40:])
        time.sleep(3)  # makes time pass on purpose: the demo's work is long done, the page still answers
        assert proc.poll() is None
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, "".join(seen[-20:]) + rest
    assert "console stopped" in rest
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)
