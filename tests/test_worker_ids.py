"""Task ids: what is accepted, and that a bad one is one error line, exit 2, nothing created."""

from __future__ import annotations

import pytest

from conftest import git
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.errors import UsageError
from git_nerve.worker.ids import MAX_LEN, validate

GOOD = ["t1", "T1", "a", "fix-auth_bug.2", "x" * MAX_LEN, "1.2.3", "a-", "a_b", "lock", "a.locks"]
BAD = [
    "", "a/b", "..", "a..b", "has space", " lead", "-x", ".hidden", "x.lock", "ends.", "ünïcode", "täsk", "日本",
    "x" * (MAX_LEN + 1), "a\tb", "a\nb", "a:b", "a~1", "a^b", "a?b", "a*b", "a[b", "a\\b", "@", "a@{b", "a\x00b",
]


@pytest.mark.parametrize("task_id", GOOD)
def test_valid_ids_are_accepted_and_are_valid_ref_components(task_id, tmp_path):
    assert validate(task_id) == task_id
    assert git(tmp_path, "check-ref-format", f"refs/heads/feat/{task_id}", check=False) == ""


@pytest.mark.parametrize("task_id", BAD)
def test_invalid_ids_are_refused(task_id):
    with pytest.raises(UsageError, match="invalid task id"):
        validate(task_id)


def test_error_shows_control_characters_escaped_and_long_ids_shortened():
    with pytest.raises(UsageError) as exc:
        validate("a\nb")
    assert "\n" not in exc.value.message and "a\\\\nb" in exc.value.message
    with pytest.raises(UsageError) as exc:
        validate("y" * 500)
    assert len(exc.value.message) < 200


@pytest.mark.parametrize("task_id", ["a/b", "..", "has space", "x.lock", "ünïcode", "z" * 65, ".dot", "a..b"])
def test_spawn_with_a_bad_id_exits_2_and_creates_nothing(repo, gw, task_id):
    before_refs = git(repo.work, "for-each-ref")
    res = gw(["spawn", "--", task_id], repo.work)
    assert res.code == 2, res
    assert res.err.startswith("error: invalid task id") and len(res.err.strip().splitlines()) == 1
    assert git(repo.work, "for-each-ref") == before_refs
    assert len(wk.worktree_paths(repo.work)) == 1
    assert not (repo.work.parent / "project.worktrees").exists()
    assert not (repo.work / ".git" / "nerve" / "bus.db").exists()


def test_spawn_with_a_leading_dash_is_a_usage_error_either_way(repo, gw):
    assert gw(["spawn", "-x"], repo.work).code == 2  # click: no such option
    res = gw(["spawn", "--", "-x"], repo.work)
    assert res.code == 2 and "must not start with '-'" in res.err
    assert wk.branches(repo.work) == {"refs/heads/main"}


def test_ids_differing_only_in_case_collide(repo, gw):
    assert gw("spawn Task-1", repo.work).code == 0
    res = gw("spawn task-1", repo.work)
    assert res.code == 2, res
    assert "collides with existing task 'Task-1'" in res.err
    assert wk.branches(repo.work) == {"refs/heads/main", "refs/heads/feat/Task-1"}
    assert not (repo.work.parent / "project.worktrees" / "task-1").exists()
    assert wk.row(repo.work, "task-1") is None


def test_agent_commands_with_a_bad_task_option_exit_2(repo, gw):
    wk.spawn(repo.work, "t1")
    res = gw("start --task nope", repo.work)
    assert res.code == 2 and "unknown task 'nope'" in res.err
    assert wk.state(repo.work, "t1") == "ASSIGNED"
