"""pre-push from a worker's worktree: each refusal, the push that passes, and the conflict warning."""

from __future__ import annotations

import os

import pytest

from fixtures.repos import worker as wfx
from fixtures.repos.build import commit_file, git
from fixtures.repos.hooks import (
    LOGGING_HOOK,
    commit,
    git_run,
    heartbeats,
    hooks_dir,
    working_worker,
    write_hook,
)
from git_nerve.errors import ConflictError
from git_nerve.hooks import install as hooks
from git_nerve.worker import lifecycle

REFUSED = "git-nerve: push refused: "


def refusals(stderr: str) -> list[str]:
    return [ln[len(REFUSED):] for ln in stderr.splitlines() if ln.startswith(REFUSED)]


def on_origin(origin, ref: str) -> str | None:
    proc = git_run(origin, "rev-parse", "-q", "--verify", ref)
    return proc.stdout.strip() or None


def test_a_clean_push_passes_and_records_a_heartbeat(remote_repo):
    work, origin = remote_repo.work, remote_repo.origin
    wt = working_worker(work)
    commit(wt, "a.txt", "a\n", "add a")

    proc = git_run(wt, "push", "-q", "origin", "feat/t1")

    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert on_origin(origin, "refs/heads/feat/t1") == git(wt, "rev-parse", "HEAD")
    assert heartbeats(work, "t1", "pre-push") == 1


def test_a_pushed_commit_that_still_holds_a_conflict_block_is_refused(remote_repo):
    work, origin = remote_repo.work, remote_repo.origin
    wt = working_worker(work)
    commit(wt, "docs/title.rst", "Title\n=======\n\nA lone ======= underline is no conflict.\n", "rst heading")
    commit(wt, "src/app.py", "<<<<<<< HEAD\nold = 1\n=======\nnew = 2\n>>>>>>> theirs\n", "half-resolved merge")
    marked = git(wt, "rev-parse", "HEAD")

    proc = git_run(wt, "push", "-q", "origin", "feat/t1")

    assert proc.returncode != 0
    assert refusals(proc.stderr) == [
        f"src/app.py still holds a conflict block (commit {marked[:12]}, the tip); remove it, then `git commit --amend`"
    ]
    assert on_origin(origin, "refs/heads/feat/t1") is None

    (wt / "src" / "app.py").write_text("new = 2\n")
    git(wt, "commit", "-q", "-a", "--amend", "--no-edit")
    again = git_run(wt, "push", "-q", "origin", "feat/t1")
    assert again.returncode == 0, again.stderr


def test_a_push_to_the_integration_branch_from_a_worker_is_refused(remote_repo):
    work, origin = remote_repo.work, remote_repo.origin
    wt = working_worker(work)
    commit(wt, "a.txt", "a\n", "add a")
    before = on_origin(origin, "refs/heads/main")

    proc = git_run(wt, "push", "-q", "origin", "HEAD:main")

    assert proc.returncode != 0
    assert refusals(proc.stderr) == [
        "this push updates main, the integration branch; only `git worker merge` does that (push feat/t1 instead)"
    ]
    assert on_origin(origin, "refs/heads/main") == before


def test_a_conflicted_worker_cannot_push_until_done_pushes_for_it(remote_repo):
    work, origin = remote_repo.work, remote_repo.origin
    wt = working_worker(work)
    commit(wt, "a.txt", "a\n", "add a")
    wfx.set_columns(work, "t1", state="CONFLICTED")

    proc = git_run(wt, "push", "-q", "origin", "feat/t1")

    assert proc.returncode != 0
    assert refusals(proc.stderr) == [
        "task t1 is CONFLICTED; resolve the rebase, then run `git worker done --skip-rebase` (it pushes)"
    ]
    internal = git_run(wt, "push", "-q", "origin", "feat/t1", env={**os.environ, "NERVE_INTERNAL_PUSH": "done"})
    assert internal.returncode == 0, internal.stderr
    assert on_origin(origin, "refs/heads/feat/t1") == git(wt, "rev-parse", "HEAD")


def _diverge(work, wt) -> None:
    """main and the worker change the same line of src/app.py."""
    commit(wt, wfx.APP, wfx.app_text("worker says hi"), "worker greeting")
    commit_file(work, wfx.APP, wfx.app_text("main says hello"), "main greeting")


def test_no_push_while_a_rebase_or_a_merge_is_in_progress(remote_repo):
    work = remote_repo.work
    wt = working_worker(work)
    _diverge(work, wt)

    assert git_run(wt, "rebase", "main").returncode != 0  # stops on the conflict
    during_rebase = git_run(wt, "push", "-q", "origin", "HEAD:refs/heads/feat/t1")
    git(wt, "rebase", "--abort")
    assert git_run(wt, "merge", "main").returncode != 0
    during_merge = git_run(wt, "push", "-q", "origin", "feat/t1")

    assert refusals(during_rebase.stderr) == [
        "a rebase is in progress in this worktree; finish it (git rebase --continue) or abort it (git rebase --abort)"
    ]
    assert refusals(during_merge.stderr) == [
        "a merge is in progress in this worktree; finish it (git merge --continue) or abort it (git merge --abort)"
    ]
    assert during_rebase.returncode != 0 and during_merge.returncode != 0


def test_a_branch_that_would_conflict_with_the_integration_branch_gets_a_warning_not_a_refusal(remote_repo):
    work, origin = remote_repo.work, remote_repo.origin
    wt = working_worker(work)
    _diverge(work, wt)
    git(work, "push", "-q", "origin", "main")  # also moves refs/remotes/origin/main

    proc = git_run(wt, "push", "-q", "origin", "HEAD:refs/heads/feat/t1")

    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        (
            "warning: git-nerve pre-push: feat/t1 would conflict with main (refs/remotes/origin/main) in src/app.py; "
            "`git worker done` rebases onto it"
        )
    ]
    assert on_origin(origin, "refs/heads/feat/t1") == git(wt, "rev-parse", "HEAD")


def test_a_kept_pre_push_hook_gets_the_same_input_and_its_refusal_stands(remote_repo):
    work, origin = remote_repo.work, remote_repo.origin
    write_hook(hooks_dir(work), "pre-push", LOGGING_HOOK)  # before spawn installs ours beside it
    wt = working_worker(work)
    commit(wt, "a.txt", "a\n", "add a")
    head = git(wt, "rev-parse", "HEAD")

    proc = git_run(wt, "push", "-q", "origin", "HEAD:main")

    assert proc.returncode != 0
    assert "user hook pre-push ran: origin" in proc.stdout + proc.stderr
    assert len(refusals(proc.stderr)) == 1  # ours read the same input: it saw the push to main
    log = (work / ".git" / "worktrees" / "t1" / "user-hook.log").read_text()
    assert f"HEAD {head} refs/heads/main {on_origin(origin, 'refs/heads/main')}" in log
    assert heartbeats(work, "t1", "pre-push") == 1


def test_a_conflicted_rebase_resolved_by_hand_is_finished_by_done_through_the_hook(remote_repo):
    work, origin = remote_repo.work, remote_repo.origin
    wt = working_worker(work)
    _diverge(work, wt)
    git(work, "push", "-q", "origin", "main")
    with wfx.opened(work) as repo, pytest.raises(ConflictError):
        lifecycle.done(repo, "t1")
    assert wfx.state(work, "t1") == "CONFLICTED"
    (wt / wfx.APP).write_text(wfx.app_text("both say hi"))
    git(wt, "add", wfx.APP)

    finished = git_run(wt, "rebase", "--continue", env={**os.environ, "GIT_EDITOR": "true"})
    early = git_run(wt, "push", "-q", "origin", "feat/t1")
    with wfx.opened(work) as repo:
        result = lifecycle.done(repo, "t1", skip_rebase=True)

    assert "next: git worker done --skip-rebase" in finished.stderr
    assert early.returncode != 0 and refusals(early.stderr)[0].startswith("task t1 is CONFLICTED")
    assert result.pushed and wfx.state(work, "t1") == "IN_REVIEW"
    assert on_origin(origin, "refs/heads/feat/t1") == git(wt, "rev-parse", "HEAD")


def test_a_pre_push_hook_that_cannot_start_python_lets_the_push_through(remote_repo, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    wt = working_worker(work)
    commit(wt, "a.txt", "a\n", "add a")
    broken = write_hook(tmp_path, "python", "#!/bin/sh\necho 'Fatal Python error: failed to get the Python codec' >&2\nexit 1\n")
    (hooks_dir(work) / "pre-push").write_bytes(hooks.render(str(broken), hooks.package_root()))

    proc = git_run(wt, "push", "-q", "origin", "feat/t1")

    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1] == "warning: git-nerve pre-push: the hook failed (exit 1); the push goes ahead"
    assert on_origin(origin, "refs/heads/feat/t1") == git(wt, "rev-parse", "HEAD")
