"""Issue 21: every commit the bus recorded for a task, and every uncommitted change, stays reachable from
refs/nerve/archive/<task> after a cleanup, whatever happened to the branch (moved back, amended, commits
dropped, force-moved from another checkout or clone); submodule work no remote has is kept in the
submodule's own repository or the cleanup refuses; ignored files are named, never archived; two
archivers never overwrite each other's snapshot. Real repositories, then `git gc` with every reflog expired."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import pytest

from conftest import git
from fixtures.repos import build
from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)

ARCHIVE = "refs/nerve/archive/t1"


def recorded(work: Path, task_id: str = "t1") -> set[str]:
    """Every commit sha the bus recorded for the task (commits, both sides of every rewrite, tips)."""
    from git_nerve.bus import messages

    wk.ingest(work)
    shas: set[str] = set()
    with closing(sqlite3.connect(wk.bus_path(work))) as conn:
        for m in messages.for_task(conn, task_id):
            p = m.payload or {}
            for key in ("sha", "tip"):
                if isinstance(p.get(key), str):
                    shas.add(p[key])
            for pair in p.get("pairs") or []:
                shas.update(str(s) for s in pair)
    return shas


def forget_everything(cwd: Path) -> None:
    """What a person's housekeeping does: every reflog expired, every unreachable object pruned."""
    git(cwd, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
    git(cwd, "gc", "-q", "--prune=now")


def exists(cwd: Path, sha: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=cwd).returncode == 0


def assert_all_kept(work: Path, shas: set[str], ref: str = ARCHIVE) -> None:
    forget_everything(work)
    lost = [s for s in shas if not exists(work, s)]
    assert not lost, f"recorded commits lost after gc: {lost}"
    unreachable = [s for s in shas
                   if subprocess.run(["git", "merge-base", "--is-ancestor", s, ref], cwd=work).returncode != 0
                   and subprocess.run(["git", "merge-base", "--is-ancestor", s, "main"], cwd=work).returncode != 0]
    assert not unreachable, f"not reachable from {ref}: {unreachable}"


def _reset_hard(work: Path, wt: Path) -> str:
    gone = build.commit_file(wt, "start-over.txt", "first try\n", "t1: first try")
    git(wt, "reset", "-q", "--hard", "main")
    return gone


def _amend(work: Path, wt: Path) -> str:
    gone = build.commit_file(wt, "amended.txt", "first wording\n", "t1: first wording")
    build.write(wt, "amended.txt", "second wording\n")
    git(wt, "commit", "-q", "-a", "--amend", "-m", "t1: second wording")
    return gone


def _rebase_drop(work: Path, wt: Path) -> str:
    build.commit_file(wt, "a.txt", "a\n", "t1: a")
    dropped = build.commit_file(wt, "b.txt", "b\n", "t1: b (dropped)")
    build.commit_file(wt, "c.txt", "c\n", "t1: c")
    git(wt, "rebase", "-q", "--onto", f"{dropped}~1", dropped)
    return dropped


def _moved_from_the_main_checkout(work: Path, wt: Path) -> str:
    gone = build.commit_file(wt, "moved.txt", "moved away\n", "t1: moved away")
    git(work, "update-ref", "refs/heads/feat/t1", "main")  # (git branch -f refuses a checked-out branch)
    git(wt, "reset", "-q", "--hard", "HEAD")  # the worker's files follow the branch
    return gone


@pytest.mark.parametrize("rewind", [_reset_hard, _amend, _rebase_drop, _moved_from_the_main_checkout],
                         ids=["reset-hard", "amend", "rebase-drop", "force-moved"])
def test_cancel_cleanup_keeps_every_recorded_commit_through_gc(repo, gw, rewind):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    gone = rewind(work, wt)
    shas = recorded(work)
    assert gone in shas, "the hooks recorded the commit that was moved away from"
    assert git(work, "branch", "--contains", gone) == "" or "feat/t1" not in git(work, "branch", "--contains", gone)

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert not wt.exists() and "refs/heads/feat/t1" not in wk.branches(work)
    assert_all_kept(work, shas)
    # retry still brings back the branch as it was at the cancel
    tip_before = git(work, "rev-parse", f"{ARCHIVE}^{{commit}}")
    assert gw("retry t1", work).code == 0
    assert git(work, "merge-base", "--is-ancestor", "feat/t1", tip_before) == ""


def test_a_branch_force_moved_through_the_remote_keeps_the_pushed_commits(remote_repo, gw, tmp_path):
    work, origin = remote_repo.work, remote_repo.origin
    wt = wk.drive(work, "t1", "IN_REVIEW")  # done pushed feat/t1
    pushed = git(origin, "rev-parse", "refs/heads/feat/t1")
    other = wk.second_clone(origin, tmp_path / "other")
    git(other, "push", "-q", "--force", "origin", "main:refs/heads/feat/t1")  # another clone rewinds it
    git(wt, "fetch", "-q", "origin")
    git(wt, "reset", "-q", "--hard", "origin/feat/t1")  # the worker follows the remote
    shas = recorded(work)
    assert pushed in shas

    res = gw("cancel t1 --cleanup", work)

    assert res.code == 0, res
    assert_all_kept(work, shas)


def test_uncommitted_work_after_a_reset_is_archived_with_the_dropped_commits(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    gone = _reset_hard(work, wt)
    build.write(wt, "wip.txt", "half done\n")
    res = gw("cancel t1 --cleanup --force --json", work)
    assert res.code == 0, res
    assert json.loads(res.out)["archive_ref"] == ARCHIVE
    assert_all_kept(work, recorded(work) | {gone})
    assert git(work, "show", f"{ARCHIVE}:wip.txt") == "half done"


def test_a_second_cleanup_after_retry_keeps_the_first_archive(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    first_gone = _reset_hard(work, wt)
    assert gw("cancel t1 --cleanup", work).code == 0
    assert gw("retry t1", work).code == 0
    assert gw("start", wt).code == 0
    second_gone = build.commit_file(wt, "again.txt", "second try\n", "t1: second try")
    git(wt, "reset", "-q", "--hard", "main")
    assert gw("cancel t1 --cleanup", work).code == 0
    assert_all_kept(work, recorded(work) | {first_gone, second_gone})


def test_merge_keeps_commits_an_amend_replaced(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    gone = _amend(work, wt)
    tip = git(work, "rev-parse", "feat/t1")
    assert gw("done", wt).code == 0 and gw("approve t1", work).code == 0
    res = gw("merge t1 --delete-branch", work)
    assert res.code == 0, res
    assert_all_kept(work, recorded(work) | {gone, tip})


# -- 5e: two archivers at once --------------------------------------------------------------------


def test_two_concurrent_archivers_both_stay_reachable(repo, monkeypatch):
    """Both build their snapshot on the same old archive, then both publish: without a compare-and-set
    the second overwrites the first. With it the loser rebuilds on the winner's snapshot."""
    from git_nerve.worker import archive

    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    build.write(wt, "wip.txt", "uncommitted\n")
    real = archive._snapshot
    barrier = threading.Barrier(2, timeout=30)
    made: dict[str, list[str]] = {}

    def snapshot(wt_, parents, message):
        sha = real(wt_, parents, message)
        name = threading.current_thread().name
        made.setdefault(name, []).append(sha)
        if len(made[name]) == 1:
            barrier.wait()  # both have read the same old archive and built on it
        return sha

    monkeypatch.setattr(archive, "_snapshot", snapshot)
    results: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            results[name] = archive.keep_uncommitted(work, wt, "t1", f"stopped by {name}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            results[name] = exc

    threads = [threading.Thread(target=run, args=(n,), name=n) for n in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(isinstance(r, tuple) for r in results.values()), results
    kept = [r[1] for r in results.values()]  # the snapshot each archiver reports as kept
    assert len(set(kept)) == 2
    assert sum(len(v) for v in made.values()) == 3, made  # the loser built once more, on the winner's
    forget_everything(work)
    for sha in kept:
        assert git(work, "merge-base", "--is-ancestor", sha, ARCHIVE) == ""


def test_concurrent_cleanup_archives_in_processes_lose_nothing(repo):
    """Two processes archiving the same task at once (the lifecycle's own archive): the ref ends up
    reaching what both saw."""
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    gone = _reset_hard(work, wt)
    build.write(wt, "wip.txt", "uncommitted\n")
    code = (
        "import sys\n"
        "from git_nerve.worker import archive, lifecycle\n"
        "from fixtures.repos import worker as wk\n"
        "with wk.opened(sys.argv[1]) as repo:\n"
        "    w = lifecycle.get(repo.bus, 't1')\n"
        "    for _ in range(5):\n"
        "        archive.archive(repo, w, force=True)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(work)],
                              cwd=Path(__file__).parent.parent, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert_all_kept(work, recorded(work) | {gone})
    assert git(work, "show", f"{ARCHIVE}:wip.txt") == "uncommitted"


# -- 3: submodules and ignored files ------------------------------------------------------------


def _with_submodule(remote_repo, tmp_path) -> Path:
    """`lib` (its own origin) as a submodule of the project, pushed."""
    return build.with_submodule(remote_repo, tmp_path)


def test_force_cleanup_keeps_an_unpushed_submodule_commit_in_the_submodules_repository(remote_repo, tmp_path, gw):
    _with_submodule(remote_repo, tmp_path)
    work = remote_repo.work
    wt = wk.drive(work, "t1", "WORKING")
    git(wt, "submodule", "update", "--init", "-q")
    sub_commit = build.commit_file(wt / "lib", "local.txt", "only here\n", "a submodule commit on no remote")
    build.write(wt / "lib", "wip.txt", "uncommitted in the submodule\n")
    git(wt, "commit", "-q", "-am", "bump lib")

    res = gw("cancel t1 --cleanup --force --json", work)

    assert res.code == 0, res
    out = json.loads(res.out)
    assert not wt.exists()
    home = Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "modules" / "lib"
    kept = [k.split(": ", 1)[1] for k in out["submodule_archives"]]
    assert kept and all(k.startswith("refs/nerve/archive/t1/") for k in kept), out
    forget_everything(home)
    assert subprocess.run(["git", "--git-dir", str(home), "cat-file", "-e", sub_commit], cwd=home).returncode == 0
    files = set()
    for ref in kept:
        files |= set(git(home, "--git-dir", str(home), "ls-tree", "-r", "--name-only", ref).split())
    assert {"local.txt", "wip.txt"} <= files  # the uncommitted file too, as a snapshot
    # and the main checkout's submodule can check the archived gitlink out
    assert git(work / "lib", "cat-file", "-t", sub_commit) == "commit"


def test_force_cleanup_refuses_when_the_submodule_work_has_nowhere_to_go(remote_repo, tmp_path, gw):
    _with_submodule(remote_repo, tmp_path)
    work = remote_repo.work
    wt = wk.drive(work, "t1", "WORKING")
    git(wt, "submodule", "update", "--init", "-q")
    build.commit_file(wt / "lib", "local.txt", "only here\n", "a submodule commit on no remote")
    git(work, "submodule", "deinit", "-q", "-f", "lib")  # the main checkout never initialised it
    shutil.rmtree(Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "modules" / "lib")

    res = gw("cancel t1 --cleanup --force", work)

    assert res.code == 4, res
    lines = [ln for ln in res.err.strip().splitlines() if not ln.startswith("repaired:")]
    assert len(lines) == 1 and "submodule lib" in lines[0] and "git submodule update --init lib" in lines[0], res.err
    assert wt.is_dir() and (wt / "lib" / "local.txt").is_file()
    assert wk.state(work, "t1") == "WORKING"  # refused before the state changed


def test_cleanup_names_the_ignored_files_it_deletes_and_never_archives_them(repo, gw):
    work = repo.work
    build.commit_file(work, ".gitignore", ".env\nbuild/\n", "ignore")
    wt = wk.drive(work, "t1", "WORKING")
    build.write(wt, ".env", "TOKEN=secret-value\n")
    build.write(wt, "build/out/a.o", "x\n")
    build.write(wt, "wip.txt", "uncommitted\n")

    res = gw("cancel t1 --cleanup --force --json", work)

    assert res.code == 0, res
    out = json.loads(res.out)
    assert out["ignored_removed"] == [".env", "build/"]
    assert not wt.exists()
    names = git(work, "ls-tree", "-r", "--name-only", ARCHIVE).split()
    assert "wip.txt" in names and ".env" not in names and not any(n.startswith("build/") for n in names)
    objects = git(work, "rev-list", "--objects", ARCHIVE)
    blobs = [ln.split()[0] for ln in objects.splitlines()]
    contents = subprocess.run(["git", "cat-file", "--batch"], cwd=work, input=("\n".join(blobs) + "\n").encode(),
                              capture_output=True).stdout
    assert b"secret-value" not in contents


def test_cleanup_text_output_counts_the_ignored_files(repo, gw):
    work = repo.work
    build.commit_file(work, ".gitignore", ".env\nbuild/\n", "ignore")
    wt = wk.drive(work, "t1", "WORKING")
    build.write(wt, ".env", "TOKEN=x\n")
    build.write(wt, "build/a.o", "x\n")
    res = gw("cancel t1 --cleanup", work)
    assert res.code == 0, res
    assert "Deleted 2 ignored path(s), not archived: .env, build/" in res.out, res.out
