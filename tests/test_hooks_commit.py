"""post-commit and post-rewrite in real repositories: what agents' commits, amends and rebases leave on the bus."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from fixtures.repos import worker as wfx
from fixtures.repos.build import commit_file, git
from fixtures.repos.hooks import commit, git_run, heartbeats, messages, working_worker
from git_nerve.hooks import install as hooks
from git_nerve.hooks import kicks, post_commit, post_rewrite
from git_nerve.hooks.common import locate
from git_nerve.paths import discover


def test_each_commit_in_a_worker_records_a_heartbeat_and_a_commit_message(repo):
    work = repo.work
    wt = working_worker(work)

    commit(wt, "a.txt", "a\n", "add a")
    commit(wt, "b.txt", "b\n", "add b\n\nwith a body")

    found = messages(work, "t1", "commit")
    assert [m.payload for m in found] == [
        {"sha": git(wt, "rev-parse", "HEAD~1"), "subject": "add a"},
        {"sha": git(wt, "rev-parse", "HEAD"), "subject": "add b"},
    ]
    assert heartbeats(work, "t1", "post-commit") == 2
    assert wfx.row(work, "t1").last_heartbeat >= found[-1].ts - 1


def test_commits_outside_a_worker_record_nothing(repo):
    work = repo.work
    working_worker(work)
    before = messages(work, "t1")

    proc = commit(work, "main.txt", "m\n", "on main")

    assert messages(work, "t1") == before
    assert proc.stderr == ""


def test_amend_records_a_rewrite(repo):
    work = repo.work
    wt = working_worker(work)
    commit(wt, "a.txt", "a\n", "add a")
    old = git(wt, "rev-parse", "HEAD")

    proc = git_run(wt, "commit", "-q", "--amend", "-m", "add a, amended")

    assert proc.returncode == 0, proc.stderr
    rewrites = messages(work, "t1", "rewrite")
    assert [m.payload for m in rewrites] == [{"source": "amend", "pairs": [[old, git(wt, "rev-parse", "HEAD")]]}]
    assert heartbeats(work, "t1", "post-rewrite") == 1
    # git runs post-commit for the amended commit too: it is a commit that was made
    assert [m.payload["subject"] for m in messages(work, "t1", "commit")] == ["add a", "add a, amended"]


def test_a_twenty_commit_rebase_records_one_summary_and_no_commits(repo):
    work = repo.work
    wt = working_worker(work)
    quiet = {**os.environ, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "/dev/null"}
    for i in range(20):
        commit(wt, f"f{i}.txt", f"{i}\n", f"step {i}", env=quiet)
    old = git(wt, "rev-list", "--reverse", "main..HEAD").split()
    commit_file(work, "upstream.txt", "u\n", "main moves on")
    before = len(messages(work, "t1"))

    proc = git_run(wt, "rebase", "-q", "main")

    assert proc.returncode == 0, proc.stderr
    new = git(wt, "rev-list", "--reverse", "main..HEAD").split()
    added = messages(work, "t1")[before:]
    assert [m.kind for m in added] == ["heartbeat", "rewrite"]
    assert added[1].payload == {"source": "rebase", "pairs": [list(p) for p in zip(old, new)]}


def test_a_conflicted_worker_whose_rebase_is_finished_is_told_what_is_next(repo):
    work = repo.work
    wt = wfx.drive(work, "t1", "CONFLICTED", greeting="hi")
    assert wfx.rebase_in_progress(wt)
    (wt / wfx.APP).write_text(wfx.app_text("hi, resolved"))
    git(wt, "add", wfx.APP)
    before = len(messages(work, "t1"))

    proc = git_run(wt, "rebase", "--continue", env={**os.environ, "GIT_EDITOR": "true"})

    assert proc.returncode == 0, proc.stderr
    assert "next: git worker done --skip-rebase" in proc.stderr
    added = messages(work, "t1")[before:]
    assert [m.kind for m in added] == ["heartbeat", "rewrite"]
    assert added[1].payload["source"] == "rebase"


def test_a_corrupt_bus_does_not_block_a_commit_and_the_commit_waits_in_the_spool(repo):
    work = repo.work
    wt = working_worker(work)
    bus = wfx.bus_path(work)
    saved = bus.read_bytes()
    for suffix in ("-wal", "-shm"):
        bus.with_name(bus.name + suffix).unlink(missing_ok=True)
    bus.write_bytes(b"this is not a database" * 100)

    proc = commit(wt, "a.txt", "a\n", "add a")

    assert proc.stderr == ""
    assert git(wt, "log", "-1", "--format=%s") == "add a"
    bus.write_bytes(saved)  # repaired: the next reader takes the commit in
    assert [m.payload["subject"] for m in messages(work, "t1", "commit")] == ["add a"]


def test_a_locked_bus_does_not_delay_a_commit(repo):
    work = repo.work
    wt = working_worker(work)
    holder = sqlite3.connect(wfx.bus_path(work), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        proc = commit(wt, "a.txt", "a\n", "add a")
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    assert proc.stderr == ""
    assert git(wt, "log", "-1", "--format=%s") == "add a"
    assert [m.payload["subject"] for m in messages(work, "t1", "commit")] == ["add a"]
    assert heartbeats(work, "t1", "post-commit") == 1


def test_cherry_picks_reverts_and_merges_in_a_worker_are_recorded(repo):
    work = repo.work
    git(work, "checkout", "-q", "-b", "elsewhere")
    picks = [commit_file(work, f"p{i}.txt", f"{i}\n", f"pick {i}") for i in range(2)]
    side = commit_file(work, "side.txt", "s\n", "side work")
    git(work, "checkout", "-q", "main")
    wt = working_worker(work)

    assert git_run(wt, "cherry-pick", *picks).returncode == 0
    assert git_run(wt, "revert", "--no-edit", "HEAD").returncode == 0
    commit(wt, "own.txt", "o\n", "own work")
    proc = git_run(wt, "merge", "--no-edit", "-m", "merge side work", side)
    assert proc.returncode == 0, proc.stderr

    subjects = [m.payload["subject"] for m in messages(work, "t1", "commit")]
    assert subjects == ["pick 0", "pick 1", 'Revert "pick 1"', "own work", "merge side work"]
    shas = [m.payload["sha"] for m in messages(work, "t1", "commit")]
    assert shas[-1] == git(wt, "rev-parse", "HEAD")
    assert heartbeats(work, "t1", "post-merge") == 1
    assert messages(work, "t1", "commit")[-1].payload["source"] == "merge"


def test_a_fast_forward_merge_in_a_worker_is_recorded(repo):
    work = repo.work
    wt = working_worker(work)
    git(work, "checkout", "-q", "-b", "ahead", "feat/t1")
    ahead = commit_file(work, "ahead.txt", "a\n", "ahead")
    git(work, "checkout", "-q", "main")

    assert git_run(wt, "merge", "-q", "--ff-only", "ahead").returncode == 0

    assert [(m.payload["sha"], m.payload["source"]) for m in messages(work, "t1", "commit")] == [(ahead, "merge")]


def test_a_commit_where_knowledge_yaml_exists_starts_the_index_sync_without_waiting(repo):
    work = repo.work
    (work / "knowledge.yaml").write_text('include:\n  - "docs/**/*.md"\n')
    hooks.install(discover(work))

    proc = commit(work, "docs/guide.md", "# Guide\n\nnew words\n", "docs")

    assert proc.stderr == ""
    assert (work / ".git" / "nerve" / "knowledge-sync.log").is_file()  # the detached sync's log


class FakeTrigger:
    def __init__(self, fail: bool = False):
        self.calls: list[tuple] = []
        self.fail = fail

    def schedule(self, toplevel, git_dir, common_dir, files):
        if self.fail:
            raise RuntimeError("index is broken")
        self.calls.append((toplevel, git_dir, common_dir, list(files)))


@pytest.fixture
def trigger(monkeypatch):
    fake = FakeTrigger()
    monkeypatch.setattr(kicks, "_import_trigger", lambda: fake)
    return fake


def test_post_commit_schedules_the_knowledge_index_for_the_changed_files_in_any_worktree(repo, trigger, monkeypatch):
    work = repo.work
    git(work, "config", "core.hooksPath", "/dev/null")  # run the hook by hand, in process
    (work / "knowledge.yaml").write_text("sources: [docs]\n")
    commit(work, "docs/guide.md", "# Guide\n\nnew\n", "docs")
    monkeypatch.chdir(work)

    assert post_commit.post_commit(locate()) == 0

    assert trigger.calls == [(work, work / ".git", work / ".git", ["docs/guide.md"])]


def test_post_rewrite_schedules_what_changed_between_the_old_and_new_tip(repo, trigger, monkeypatch):
    work = repo.work
    git(work, "config", "core.hooksPath", "/dev/null")
    (work / "knowledge.yaml").write_text("sources: [docs]\n")
    old = commit_file(work, "docs/a.md", "a\n", "a")
    commit_file(work, "docs/b.md", "b\n", "b")
    monkeypatch.chdir(work)

    assert post_rewrite.post_rewrite(locate(), "amend", f"{old} {git(work, 'rev-parse', 'HEAD')}\n") == 0

    assert trigger.calls[0][3] == ["docs/b.md"]


def test_a_failing_knowledge_trigger_is_one_warning(repo, monkeypatch, capsys):
    work = repo.work
    monkeypatch.setattr(kicks, "_import_trigger", lambda: FakeTrigger(fail=True))
    git(work, "config", "core.hooksPath", "/dev/null")
    (work / "knowledge.yaml").write_text("sources: [docs]\n")
    commit(work, "docs/guide.md", "# Guide\n", "docs")
    monkeypatch.chdir(work)

    assert post_commit.post_commit(locate()) == 0

    assert capsys.readouterr().err == "warning: git-nerve post-commit: knowledge index not scheduled: RuntimeError: index is broken\n"


def test_the_commit_path_loads_none_of_the_heavy_packages():
    """Every agent commit pays for what the hook imports: click, pygit2, pydantic,
    yaml and asyncio (filelock) each cost tens of milliseconds, so the modules a
    commit and `git worker heartbeat` load must not pull them in."""
    from startup_support import loaded_after

    hot = ["git_nerve.hooks.run", "git_nerve.hooks.runtime", "git_nerve.hooks.post_commit",
           "git_nerve.hooks.post_rewrite", "git_nerve.hooks.pre_push", "git_nerve.knowledge.trigger",
           "git_nerve.cli.entry", "git_nerve.worker.heartbeat"]
    heavy = ("click", "pygit2", "pydantic", "yaml", "asyncio", "filelock", "dataclasses", "typing",
             "git_nerve.console", "uvicorn", "mcp", "anyio", "starlette", "git_nerve.mcptools")
    assert loaded_after(hot, heavy) == []
