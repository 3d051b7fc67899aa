"""Git is the ground truth of a workflow run: the branch and the worktree decide, not the agent's report."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from fixtures.agents import install
from fixtures.repos.build import commit_file, git
from git_nerve.bus import messages, rounds, workers
from git_nerve.bus.connection import Bus


def block(obj: dict) -> str:
    return f"Done.\n```json\n{json.dumps(obj)}\n```\n"


@pytest.fixture
def task(repo, gw):
    assert gw(["spawn", "t1", "-d", "Add greet_all(names) to src/app.py"], repo.work).code == 0
    bus_path = repo.work / ".git" / "nerve" / "bus.db"
    with Bus(bus_path) as bus:
        w = workers.get(bus.conn, "t1")
    return types.SimpleNamespace(work=repo.work, worktree=Path(w.worktree), bus_path=bus_path)


def bus_view(task):
    with Bus(task.bus_path) as bus:
        got = rounds.load(bus.conn, "t1", list(range(1, rounds.last_round(bus.conn, "t1") + 1)))
        commits = messages.for_task(bus.conn, "t1", kinds=("commit",))
        w = workers.get(bus.conn, "t1")
    return got, commits, w


def test_a_coder_that_claims_work_but_commits_nothing_fails_the_run(task, gn, monkeypatch, tmp_path):
    fakes = install(monkeypatch, tmp_path / "fakes")
    fakes.script([{"expect_role": "coder", "stdout": block({"summary": "added greet_all", "files_changed": ["src/app.py"]})}])
    res = gn("run develop --task t1 --json", task.work)
    data = json.loads(res.out)
    assert res.code == 1 and data["outcome"] == "failed"
    assert data["rounds"][0]["status"] == "git_error"
    assert "no new commit on feat/t1" in data["rounds"][0]["detail"] and "files_changed=['src/app.py']" in data["rounds"][0]["detail"]
    got, _, w = bus_view(task)
    assert got[0].metadata["git_error"] == "no new commit on feat/t1" and got[0].metadata["commits"] == []
    # the last heartbeat says what really happened, not "develop: coder running"
    assert w.heartbeat_status.startswith("develop: failed") and "no new commit" in w.heartbeat_status


def test_uncommitted_changes_fail_the_round_and_are_named(task, gn, monkeypatch, tmp_path):
    fakes = install(monkeypatch, tmp_path / "fakes")
    fakes.script([{"expect_role": "coder", "write": {"src/app.py": "x = 1\n"},
                   "stdout": block({"summary": "edited", "files_changed": ["src/app.py"]})}])
    res = gn("run develop --task t1 --json", task.work)
    data = json.loads(res.out)
    assert res.code == 1 and data["outcome"] == "failed"
    got, _, _ = bus_view(task)
    assert "no new commit" in got[0].metadata["git_error"]


def script_flow(monkeypatch, tmp_path, body: str, name: str) -> str:
    """A one-role workflow (the role must commit) whose agent is the shell script ``body``."""
    import sys

    from pydantic import BaseModel

    from git_nerve.workflow import END, Role, Workflow
    from git_nerve.workflow.adapters import create_exec

    class Step(BaseModel):
        done: bool

    script = tmp_path / f"{name}.sh"
    script.write_text("#!/bin/sh\ncat >/dev/null\n" + body + "printf 'Done.\\n```json\\n{\"done\": true}\\n```\\n'\n")
    script.chmod(0o755)
    wf = Workflow(name=name, roles={"worker": Role(create_exec([str(script)]), "go", Step, commits=True)},
                  moderator=lambda thread: END if thread.last("worker") else "worker")
    module = types.ModuleType(f"nerve_{name}_flow")
    module.workflow = wf
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return f"{module.__name__}:workflow"


def test_a_commit_with_a_stray_file_left_behind_still_fails_and_names_it(task, gn, monkeypatch, tmp_path):
    ref = script_flow(monkeypatch, tmp_path, "echo x >> src/app.py\ngit commit -qam edit\necho scratch > notes.tmp\n", "stray")
    res = gn(["run", ref, "--task", "t1", "--json"], task.work)
    data = json.loads(res.out)
    assert res.code == 1 and data["outcome"] == "failed", res
    assert data["rounds"][0]["status"] == "git_error" and "notes.tmp" in data["rounds"][0]["detail"]
    got, commits, _ = bus_view(task)
    assert len(got[0].metadata["commits"]) == 1  # the commit is still seen and recorded
    assert got[0].metadata["commits"][0] in {c.payload["sha"] for c in commits}


def test_commits_that_bypass_the_hooks_are_recorded_by_the_runner(task, gn, monkeypatch, tmp_path):
    """Gemini's shell empties core.hooksPath: the runner still records every commit it sees on the branch."""
    ref = script_flow(monkeypatch, tmp_path, "echo 'def greet_all(names): pass' >> src/app.py\n"
                      "git -c core.hooksPath=/dev/null commit -qam 'greet_all (hooks bypassed)'\n", "bypass")
    res = gn(["run", ref, "--task", "t1", "--json"], task.work)
    assert res.code == 0, res
    tip = git(task.worktree, "rev-parse", "HEAD")
    _, commits, w = bus_view(task)
    recorded = {c.payload["sha"]: c.payload for c in commits}
    assert recorded[tip]["subject"] == "greet_all (hooks bypassed)" and recorded[tip]["source"] == "workflow"
    assert w.heartbeat_status == "bypass: completed"


def test_a_commit_the_hooks_recorded_is_not_recorded_twice(task, gn, monkeypatch, tmp_path):
    fakes = install(monkeypatch, tmp_path / "fakes")
    fakes.script([
        {"expect_role": "coder", "write": {"src/app.py": "def greet_all(n):\n    return n\n"}, "commit": "add greet_all",
         "stdout": block({"summary": "added", "files_changed": ["src/app.py"]})},
        {"expect_role": "tester", "stdout": block({"passed": True})},
        {"expect_role": "reviewer", "stdout": block({"approved": True})},
    ])
    res = gn("run develop --task t1", task.work)
    assert res.code == 0, res
    tip = git(task.worktree, "rev-parse", "HEAD")
    got, commits, w = bus_view(task)
    assert [c.payload["sha"] for c in commits].count(tip) == 1
    assert got[0].metadata["commits"] == [tip]
    assert w.heartbeat_status == "develop: completed"


def test_a_run_in_a_worktree_reads_the_main_checkouts_uncommitted_nerve_toml(task, gn, monkeypatch, tmp_path):
    """`git nerve init` leaves nerve.toml untracked; a run started inside the task's worktree must still use it."""
    fakes = install(monkeypatch, tmp_path / "fakes")
    (task.work / "nerve.toml").write_text('[adapters.claude]\nextra_args = ["--max-turns", "77"]\n')
    assert gn("trust", task.work).code == 0  # the person's own arguments (issue 35)
    assert not (task.worktree / "nerve.toml").exists()
    fakes.script([{"expect_role": "coder", "stdout": block({"summary": "x"})}])
    res = gn("run develop", task.worktree)
    assert fakes.calls(), res
    (call,) = fakes.calls()
    assert "77" in call["argv"]
    # a committed, different copy on the branch is not read, and the user is told
    commit_file(task.worktree, "nerve.toml", "[adapters.claude]\ntimeout = 5\n", "branch config")
    fakes.script([{"expect_role": "coder", "stdout": block({"summary": "x"})}])
    from conftest import run
    res = run(["git", "nerve", "run", "develop"], task.worktree)
    assert "this worktree's nerve.toml differs and is not read" in res.err
    assert "77" in fakes.calls()[-1]["argv"]


def test_init_says_to_commit_nerve_toml(repo, gn):
    res = gn("init", repo.work)
    assert res.code == 0 and "git add nerve.toml && git commit" in res.out
    git(repo.work, "add", "nerve.toml")
    git(repo.work, "commit", "-qm", "config")
    assert "git add nerve.toml" not in gn("init", repo.work).out
