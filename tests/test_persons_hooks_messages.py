"""Issue 21 (5f, 6a-c): hooks never go into a hooks directory other repositories may share; done names the
pre-push guard's reason and the way forward; a remote's own refusal is the remote's; merge --all's held lock
is exit 4 naming its holder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.build import commit_file, git
from git_nerve.hooks import install as hooks


def common_dir(work: Path) -> Path:
    return Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))


# -- 5f: a shared hooks directory -------------------------------------------------------------------


def test_a_global_hooks_path_is_refused_by_install_init_and_left_alone_by_spawn(tmp_path, gn, gw):
    shared = tmp_path / "shared-hooks"
    shared.mkdir()
    (shared / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    one = build.simple(tmp_path / "one").work
    git(one, "config", "--global", "core.hooksPath", str(shared))

    res = gn("hooks install", one)

    assert res.code == 2, res
    assert len(res.err.strip().splitlines()) == 1
    assert f"core.hooksPath={shared} (set in your global git config)" in res.err
    assert "git config --local core.hooksPath" in res.err
    assert sorted(p.name for p in shared.iterdir()) == ["pre-commit"]

    init = gn("init", one)
    assert init.code == 2, init
    assert init.err.startswith("error: nothing was set up:") and len(init.err.strip().splitlines()) == 1
    assert not (common_dir(one) / "nerve").exists()  # no bus, no pinned branch, no nerve.toml
    assert git_ok(one, "config", "nerve.integration") is False and not (one / "nerve.toml").exists()

    spawned = gw("spawn t1", one)  # a spawn never fails for hooks: it says so, and writes nothing there
    assert spawned.code == 0, spawned
    assert "could not install git hooks: not installed: core.hooksPath=" in spawned.err
    assert sorted(p.name for p in shared.iterdir()) == ["pre-commit"]

    # the way forward the message gives works
    git(one, "config", "--local", "core.hooksPath", str(common_dir(one) / "hooks"))
    assert gn("hooks install", one).code == 0
    assert hooks.is_ours(common_dir(one) / "hooks" / "post-commit")
    assert gn("init", one).code == 0


def git_ok(cwd: Path, *args: str) -> bool:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True).returncode == 0


def test_a_local_absolute_hooks_path_outside_the_repository_is_refused_inside_it_is_fine(tmp_path, gn):
    work = build.simple(tmp_path / "one").work
    outside = tmp_path / "elsewhere-hooks"
    git(work, "config", "--local", "core.hooksPath", str(outside))

    res = gn("hooks install", work)

    assert res.code == 2 and "(set in the local git config)" in res.err, res
    assert not outside.exists()

    inside = common_dir(work) / "my-hooks"
    git(work, "config", "--local", "core.hooksPath", str(inside))
    assert gn("hooks install", work).code == 0
    assert hooks.is_ours(inside / "pre-push")


def test_a_worktree_hooks_path_outside_the_repository_is_refused(repo, gn, tmp_path):
    work = repo.work
    wt = wk.spawn(work, "t1")
    outside = tmp_path / "wt-hooks"
    git(work, "config", "--local", "extensions.worktreeConfig", "true")
    git(wt, "config", "--worktree", "core.hooksPath", str(outside))

    res = gn("hooks install", wt)

    assert res.code == 2 and "(set in the worktree git config)" in res.err, res
    assert not outside.exists()


# -- 6a: done and the pre-push guard ----------------------------------------------------------------------


def test_done_names_the_guards_reason_for_a_conflict_block_in_the_history_and_its_advice_works(remote_repo, gw):
    work = remote_repo.work
    wt = wk.spawn(work, "t1")
    assert gw("start", wt).code == 0
    marked = commit_file(wt, "src/app.py", "<<<<<<< HEAD\nold = 1\n=======\nnew = 2\n>>>>>>> theirs\n", "half-resolved")
    commit_file(wt, "src/app.py", "new = 2\n", "fix the conflict block")  # a fix on top does not help

    res = gw("done", wt)

    assert res.code == 4, res
    assert "the pre-push hook refused the push of feat/t1 to origin; nothing was pushed (t1 is still WORKING" in res.err
    assert f"src/app.py holds a conflict block in commit {marked[:12]}, before the tip" in res.err
    assert "a fixing commit on top does not help" in res.err
    assert "git reset --soft $(git merge-base HEAD origin/main)" in res.err
    assert wk.state(work, "t1") == "WORKING"

    base = git(wt, "merge-base", "HEAD", "origin/main")
    git(wt, "reset", "-q", "--soft", base)
    git(wt, "commit", "-q", "-m", "t1: the work, in one commit")
    again = gw("done", wt)
    assert again.code == 0, again
    assert wk.state(work, "t1") == "IN_REVIEW"


# -- 6b: the remote's own refusal ----------------------------------------------------------------------


def pre_receive(origin: Path, refuse: str) -> None:
    hook = origin / "hooks" / "pre-receive"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(
        "#!/bin/sh\n"
        f"if grep -q ' {refuse}$'; then\n"
        "  echo 'policy: this branch is protected, open a pull request' >&2\n"
        "  exit 1\n"
        "fi\n"
        "exit 0\n"
    )
    hook.chmod(0o755)


def test_a_remote_pre_receive_refusal_is_the_remotes_in_done_and_merge(remote_repo, gw):
    work, origin = remote_repo.work, remote_repo.origin
    pre_receive(origin, "refs/heads/feat/t1")
    wt = wk.spawn(work, "t1")
    assert gw("start", wt).code == 0
    commit_file(wt, "t1.txt", "work\n", "t1: work")

    res = gw("done", wt)

    assert res.code == 4, res
    assert "origin refused the push of feat/t1: its own hook (pre-receive or update) declined it" in res.err
    assert "remote: policy: this branch is protected, open a pull request" in res.err
    assert "pre-push" not in res.err

    pre_receive(origin, "refs/heads/main")
    assert gw("done", wt).code == 0
    assert gw("approve t1", work).code == 0
    before = git(origin, "rev-parse", "main")

    merged = gw("merge t1", work)

    assert merged.code == 4, merged  # not 7: no pre-push gate of ours refused it
    assert "origin refused the push of main" in merged.err and "nothing was merged (t1 is still APPROVED)" in merged.err
    assert "remote: policy: this branch is protected" in merged.err and "pre-push" not in merged.err
    assert git(origin, "rev-parse", "main") == before and wk.state(work, "t1") == "APPROVED"


# -- 6c: merge --all's lock -----------------------------------------------------------------------------


def test_a_second_merge_all_exits_4_naming_the_holder(repo, sh):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    lock = common_dir(work) / "nerve" / "locks" / "merge-all.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom git_nerve.locks import hold\n"
         f"with hold({str(lock)!r}):\n    print('held', flush=True)\n    sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = sh(["git", "worker", "merge", "--all"], work)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()

    assert res.code == 4, res
    assert len(res.err.strip().splitlines()) == 1
    assert f"another `git worker merge --all` (pid {holder.pid}) is running" in res.err
    assert wk.state(work, "t1") == "APPROVED"
    assert sh(["git", "worker", "merge", "--all"], work).code == 0
