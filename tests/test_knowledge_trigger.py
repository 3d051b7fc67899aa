"""The post-commit trigger: detached background syncs, their lock and queue, and the real hook."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from fixtures.repos import knowledge as kfix
from fixtures.repos.build import commit_file, write
from git_nerve import locks
from git_nerve.knowledge import background, trigger
from git_nerve.knowledge import query as kquery
from git_nerve.knowledge import status as kstatus
from git_nerve.knowledge import sync as ksync
from git_nerve.paths import discover
from tests.conftest import git
from waiting import wait_until


def wait_for(predicate, timeout: float = 30.0) -> bool:
    return bool(wait_until(predicate, timeout, fail=False) or predicate())


def idle(paths) -> bool:
    return not trigger.queued(paths.git_dir) and kstatus._running(paths.git_dir) is None


def finds(work, text: str, path: str) -> bool:
    try:
        return any(h.path == path for h in kquery.search(discover(work), text, 5).hits)
    except Exception:  # noqa: BLE001 - the index may not exist yet
        return False


def test_no_knowledge_yaml_means_no_trigger(tmp_path):
    work = kfix.project(tmp_path, knowledge_yaml=None).work
    paths = discover(work)
    assert trigger.schedule(work, paths.git_dir, paths.common_dir, ["src/billing/invoice.py"]) is False
    assert not (paths.git_dir / "nerve").exists()


def test_schedule_returns_at_once_and_the_index_catches_up(tmp_path, monkeypatch):
    work = kfix.project(tmp_path).work
    decoy = kfix.project(tmp_path / "decoy", knowledge_yaml=None).work
    paths = discover(work)
    commit_file(work, "src/zoo/lemur.py", "def lemur_leap_distance():\n    return 3\n")
    # a hook runs with GIT_DIR set; the background sync must not follow it to another repository
    monkeypatch.setenv("GIT_DIR", str(decoy / ".git"))
    assert trigger.schedule(work, paths.git_dir, paths.common_dir, ["src/zoo/lemur.py"]) is True
    monkeypatch.delenv("GIT_DIR")
    assert wait_for(lambda: finds(work, "lemur leap", "src/zoo/lemur.py"))
    assert wait_for(lambda: idle(paths))
    assert not (decoy / ".git" / "nerve" / "knowledge.db").exists()
    last = kstatus.status(paths)["background"]["last"]
    assert last["ok"] is True and last["message"].startswith("whole-tree sync: ")  # no index yet: the whole tree
    log = trigger.log_path(paths.git_dir).read_text()
    assert log.count("\n") == 1 and " whole-tree sync: " in log

    # next commit: only the committed files are read
    commit_file(work, "src/zoo/lemur.py", "def lemur_nap_duration():\n    return 8\n")
    assert trigger.schedule(work, paths.git_dir, paths.common_dir, ["src/zoo/lemur.py"]) is True
    assert wait_for(lambda: finds(work, "lemur nap", "src/zoo/lemur.py") and idle(paths))
    assert not finds(work, "leap", "src/zoo/lemur.py")
    assert kstatus.status(paths)["background"]["last"]["message"].startswith("committed files sync: 0 added, 1 changed")


def test_lists_queued_while_a_sync_runs_are_taken_by_it(tmp_path):
    work = kfix.project(tmp_path).work
    paths = discover(work)
    ksync.sync(paths)
    commit_file(work, "src/a_aardvark.py", "def aardvark():\n    return 1\n")
    commit_file(work, "src/b_badger.py", "def badger():\n    return 2\n")
    with locks.hold(trigger.lock_path(paths.git_dir)):  # a sync is running
        procs = []
        for name in ("src/a_aardvark.py", "src/b_badger.py"):
            trigger.add_pending(paths.git_dir, [name])
            procs.append(trigger.spawn(work, paths.git_dir, paths.common_dir))
        assert [p.wait(30) for p in procs] == [0, 0]  # neither waited for the lock
        assert len(trigger.queued(paths.git_dir)) == 2
        assert not finds(work, "aardvark", "src/a_aardvark.py")
    # what the holder does once its own sync is done
    assert background.run(paths) == 0
    assert finds(work, "aardvark", "src/a_aardvark.py") and finds(work, "badger", "src/b_badger.py")
    assert trigger.queued(paths.git_dir) == []


def test_a_manual_sync_waits_for_a_running_one_and_covers_its_queue(tmp_path):
    work = kfix.project(tmp_path).work
    paths = discover(work)
    ksync.sync(paths)
    commit_file(work, "src/c_cheetah.py", "def cheetah():\n    return 3\n")
    trigger.add_pending(paths.git_dir, ["src/c_cheetah.py"])
    holder = locks.hold(trigger.lock_path(paths.git_dir))
    holder.__enter__()
    release = threading.Timer(0.3, holder.__exit__, args=(None, None, None))
    release.start()
    waited: list[bool] = []
    report = ksync.sync(paths, on_wait=lambda: waited.append(True))
    release.join()
    assert waited == [True] and report.added == 1
    assert trigger.queued(paths.git_dir) == []  # the whole-tree walk covered the queued list


def test_a_failed_background_sync_is_recorded_and_dropped(tmp_path, gn):
    work = kfix.project(tmp_path).work
    paths = discover(work)
    commit_file(work, "knowledge.yaml", "include: [src/**\n")
    assert trigger.schedule(work, paths.git_dir, paths.common_dir, ["knowledge.yaml"]) is True
    assert wait_for(lambda: idle(paths) and kstatus.background_state_path(paths.git_dir).exists())
    res = gn("knowledge status", work)
    assert res.code == 2 and "knowledge.yaml line 2" in res.err  # the config itself is reported
    state = json.loads(kstatus.background_state_path(paths.git_dir).read_text())
    assert state["ok"] is False and state["message"].startswith("knowledge.yaml line 2: invalid YAML")
    assert "failed: knowledge.yaml line 2" in trigger.log_path(paths.git_dir).read_text()


def test_post_commit_hook_refreshes_the_index(tmp_path, gn):
    work = kfix.project(tmp_path).work
    paths = discover(work)
    res = gn("hooks install", work)
    assert res.code == 0, res
    write(work, "src/zoo/okapi.py", "def okapi_stripes():\n    return 'zebra legs'\n")
    git(work, "add", "-A")
    proc = subprocess.run(["git", "commit", "-qm", "okapi"], check=False, cwd=work, capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert wait_for(lambda: finds(work, "okapi stripes", "src/zoo/okapi.py") and idle(paths))
    git(work, "mv", "src/zoo/okapi.py", "src/zoo/giraffe.py")
    git(work, "commit", "-qm", "rename")
    assert wait_for(lambda: finds(work, "okapi stripes", "src/zoo/giraffe.py") and idle(paths))
    assert not finds(work, "okapi stripes", "src/zoo/okapi.py")


def test_fresh_by_default_with_the_settings_init_writes(tmp_path, sh):
    """No knowledge.yaml (issue 37): spawn makes the new worktree's view, so an agent's first query there answers; a
    function committed in the worktree is found by a query there within 2 s; a query whose view missed a commit
    says so (`--json` warnings, a line on stderr)."""
    work = kfix.project(tmp_path, knowledge_yaml=None).work
    git(work, "config", "nerve.knowledge", "true")  # the default (the test suite's global config turns it off)
    assert sh(["git", "nerve", "init"], work).code == 0
    res = sh(["git", "worker", "spawn", "t1", "--no-fetch", "--json"], work)
    assert res.code == 0, res
    wt = Path(json.loads(res.out)["worktree"])
    first = sh(["git", "nerve", "knowledge", "query", "invoice total", "--json"], wt)  # waits for the view spawn started
    assert first.code == 0, first
    assert any(r["path"] == "src/billing/invoice.py" for r in json.loads(first.out)["results"])

    write(wt, "src/zoo/quokka.py", "def quokka_smile_width():\n    return 7\n")
    git(wt, "add", "-A")
    git(wt, "commit", "-qm", "quokka")
    wt_paths = discover(wt)
    wait_until(lambda: finds(wt, "quokka smile", "src/zoo/quokka.py"), 2.0, what="the committed function in the index")
    wait_until(lambda: idle(wt_paths), 30, what="the background sync's end")

    git(wt, "-c", "core.hooksPath=/nonexistent", "commit", "-qm", "no hook ran", "--allow-empty")  # the index missed it
    res = sh(["git", "nerve", "knowledge", "query", "quokka smile", "--json"], wt)
    assert res.code == 0, res
    assert any("HEAD moved since this worktree's index was last synced" in w for w in json.loads(res.out)["warnings"])
    res = sh(["git", "nerve", "knowledge", "query", "quokka smile"], wt)
    assert res.code == 0 and "src/zoo/quokka.py" in res.out
    assert [ln for ln in res.err.splitlines() if ln.startswith("warning: ")] == [
        "warning: HEAD moved since this worktree's index was last synced: results may be stale; "
        "run `git nerve knowledge sync`"]
    sh(["git", "nerve", "knowledge", "sync"], wt)
    assert json.loads(sh(["git", "nerve", "knowledge", "query", "quokka smile", "--json"], wt).out)["warnings"] == []


def test_a_first_query_waits_for_a_view_whose_sync_has_not_made_the_index_yet(tmp_path, sh):
    """A new task's first query can come before its background sync has even created the index file (a loaded
    machine starts Python slowly): while that sync is queued it waits, then answers (CI, stop 44: it said "no
    knowledge index" at once)."""
    work = kfix.project(tmp_path, knowledge_yaml=None).work
    paths = discover(work)
    assert not (paths.common_dir / "nerve" / "knowledge.db").exists()
    trigger.add_pending(paths.git_dir, [])  # what spawn queues before it starts the sync
    late = threading.Timer(1.5, background.run, args=(paths,))
    late.start()
    try:
        res = sh(["git", "nerve", "knowledge", "query", "invoice total", "--json"], work)
    finally:
        late.join()
    assert res.code == 0, res
    assert any(r["path"] == "src/billing/invoice.py" for r in json.loads(res.out)["results"])


def test_the_background_sync_is_not_turned_away_by_a_querys_probe(tmp_path, monkeypatch):
    """A query probes the lock for an instant (``locks.is_held``); a sync starting at that instant retries instead
    of leaving its queued list to a holder that takes nothing."""
    work = kfix.project(tmp_path, knowledge_yaml=None).work
    paths = discover(work)
    trigger.add_pending(paths.git_dir, [])
    real, calls = locks.try_hold, []

    def probed_once(path):  # the first try meets a probe
        calls.append(path)
        return None if len(calls) == 1 else real(path)

    monkeypatch.setattr(locks, "try_hold", probed_once)
    assert background.run(paths) == 0
    assert not trigger.queued(paths.git_dir)
    assert finds(work, "invoice total", "src/billing/invoice.py")


def test_spawn_makes_no_view_when_turned_off(tmp_path, sh):
    """`git config nerve.knowledge false`: a spawn starts no sync, and commits start no Python for the index."""
    work = kfix.project(tmp_path, knowledge_yaml=None).work
    assert sh(["git", "nerve", "init"], work).code == 0
    assert sh(["git", "worker", "spawn", "t1", "--no-fetch"], work).code == 0
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    assert not (discover(wt).git_dir / "nerve" / trigger.PENDING_DIR).exists()
    assert not (work / ".git" / "nerve" / "knowledge.db").exists()


def test_a_rebase_refreshes_an_index_made_without_knowledge_yaml(tmp_path, sh):
    """post-rewrite's refresh runs in the background where the repository has an index (its list of rewritten
    commits reaches it on standard input)."""
    work = kfix.project(tmp_path, knowledge_yaml=None).work
    assert sh(["git", "nerve", "init"], work).code == 0
    git(work, "checkout", "-qb", "feature")
    commit_file(work, "src/zoo/ibis.py", "def ibis_beak_curve():\n    return 2\n")
    git(work, "checkout", "-q", "main")
    commit_file(work, "src/zoo/tapir.py", "def tapir_snout_length():\n    return 5\n")
    git(work, "checkout", "-q", "feature")
    assert sh(["git", "nerve", "knowledge", "sync"], work).code == 0
    paths = discover(work)
    assert not finds(work, "tapir snout", "src/zoo/tapir.py")
    proc = subprocess.run(["git", "rebase", "-q", "main"], cwd=work, capture_output=True, text=True)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    wait_until(lambda: finds(work, "tapir snout", "src/zoo/tapir.py") and idle(paths), 30,
               what="the rebased-in function in the index")
