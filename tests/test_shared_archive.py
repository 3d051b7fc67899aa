"""Shared mode (issue 24): finished tasks' claim refs are archived (one archive ref per machine) and deleted on
the remote through the door; every machine's cache still knows them; a retry goes on from the archive."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fixtures.repos import build
from git_nerve.git import destroy
from tests import shared_support as ss


_row = ss.row

QUIET = "background = false\n"


def _refs(repo: Path, prefix: str) -> dict[str, str]:
    out = build.git(repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(ln.split() for ln in out.splitlines())


def _archived(bare: Path) -> dict[str, list[tuple[str, str]]]:
    """{machine: [(task, tip) archived by it]} from the remote's archive refs."""
    out = {}
    for ref, tip in _refs(bare, "refs/nerve/finished/").items():
        shas = build.git(bare, "rev-list", "--first-parent", "--reverse", tip).split()
        out[ref.rsplit("/", 1)[1]] = [(d["task"], d["tip"]) for s in shas
                                      for d in map(json.loads, build.git(bare, "show", f"{s}:finished.jsonl").splitlines())]
    return out


def _view(work: Path) -> list[tuple[str, str, str]]:
    return sorted((r["task_id"], r["state"], r["machine"]) for r in json.loads(ss.ok(["worker", "status", "--json"], work).stdout))


def _sync(work: Path, *more: str) -> dict:
    return json.loads(ss.ok(["nerve", "sync", "--json", *more], work).stdout)


def test_finished_claims_are_archived_and_every_machine_still_knows_them(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"], shared=QUIET)
    for task in ("a", "b", "c"):
        ss.ok(["worker", "spawn", task], one)
    ss.ok(["worker", "start", "--task", "a"], one)
    build.commit_file(Path(_row(one, "a").worktree), "a.txt", "work\n")
    for verb in (["worker", "done", "--task", "a"], ["worker", "approve", "a"], ["worker", "merge", "a"],
                 ["worker", "cancel", "b"]):
        ss.ok(verb, one)
    chain_a = build.git(bare, "rev-list", "refs/nerve/claims/a").split()
    tip_b = build.git(bare, "rev-parse", "refs/nerve/claims/b")
    _sync(two)  # two sees a COMPLETED and b FAILED while their claims are live
    before = _view(two)
    report = _sync(one)
    assert report["archived"] == 2
    assert sorted(_refs(bare, "refs/nerve/claims/")) == ["refs/nerve/claims/c"]  # deleted on the remote
    assert sorted(_archived(bare)["one"]) == sorted([("a", chain_a[0]), ("b", tip_b)])
    kept = build.git(bare, "rev-list", "refs/nerve/finished/one").split()
    assert set(chain_a) <= set(kept) and tip_b in kept  # every record stays reachable
    assert sorted(_refs(one, "refs/nerve/claims/")) == ["refs/nerve/claims/c"]  # the copies here went too
    expected = [("a", "COMPLETED", "one"), ("b", "FAILED", "one"), ("c", "ASSIGNED", "one")]
    assert before == expected and _view(one) == expected
    report = _sync(two)
    assert _view(two) == expected and sorted(_refs(two, "refs/nerve/claims/")) == ["refs/nerve/claims/c"]
    again = _sync(two)  # nothing changed: no fetch, nothing resurrected or forgotten
    assert (again["fetched"], again["claims"], again["ingested"]) == (False, 0, 0) and _view(two) == expected
    _sync(two, "--rebuild")
    assert _view(two) == expected  # rebuilt from the archive and the live claims
    three = ss.clone(tmp_path, str(bare), "three")  # a machine joining later learns them from the archive
    ss.ok(["nerve", "init"], three)
    _sync(three)
    assert _view(three) == expected
    proc = ss.run(["worker", "spawn", "a"], three)  # a finished task's id is not free again
    assert proc.returncode == 8 and "task a is held by machine one (COMPLETED" in proc.stderr, proc.stderr
    assert sorted(_refs(bare, "refs/nerve/claims/")) == ["refs/nerve/claims/c"]
    ss.ok(["worker", "retry", "b"], one)  # a FAILED task retried: its claim goes on from the archived tip
    chain_b = [json.loads(build.git(bare, "show", f"{s}:record.json"))
               for s in build.git(bare, "rev-list", "--reverse", "refs/nerve/claims/b").split()]
    assert [(r["state"], r["seq"]) for r in chain_b] == [("ASSIGNED", 1), ("FAILED", 2), ("ASSIGNED", 3)]
    assert build.git(bare, "rev-list", "--merges", "refs/nerve/claims/b") == ""
    _sync(two)
    assert ("b", "ASSIGNED", "one") in _view(two)


def test_two_machines_archiving_the_same_claim_one_wins_the_other_changes_nothing(tmp_path):
    """The finisher went silent: once its lease ran out two and three both archive its finished claims, at the
    same moment. Each claim lands in exactly one archive; a push that lost changes nothing, there or here."""
    bare = ss.origin(tmp_path)
    one, two, three = ss.team(tmp_path, str(bare), ["one", "two", "three"], lease=1, shared=QUIET)
    tasks = [f"t{i}" for i in range(4)]
    for task in tasks:
        ss.ok(["worker", "spawn", task], one)
    _sync(one)  # its log is on the remote: the others can judge its lease
    for task in tasks:
        ss.ok(["worker", "cancel", task], one)  # then one goes silent
    for w in (two, three):
        assert _sync(w)["archived"] == 0  # the lease holds
    time.sleep(1.3)
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(_sync, [two, three]))
    archived = _archived(bare)
    names = [t for entries in archived.values() for t, _ in entries]
    assert sorted(names) == tasks and _refs(bare, "refs/nerve/claims/") == {}  # each claim archived exactly once
    assert sum(r["archived"] for r in reports) == len(tasks)
    for m, w in (("two", two), ("three", three)):
        assert _refs(w, f"refs/nerve/finished/{m}") == _refs(bare, f"refs/nerve/finished/{m}")  # nothing more here
    for w in (two, three):
        _sync(w)
        assert _view(w) == [(t, "FAILED", "one") for t in tasks]


def test_a_machine_that_lost_the_archive_race_changes_nothing(tmp_path):
    """Deterministic: three archives with what it saw after two archived the claim already; its push is refused
    as a whole (the claim's lease no longer holds) and its archive ref moves neither there nor here."""
    from git_nerve.shared import archive, open_state

    bare = ss.origin(tmp_path)
    one, two, three = ss.team(tmp_path, str(bare), ["one", "two", "three"], lease=1, shared=QUIET)
    ss.ok(["worker", "spawn", "t"], one)
    _sync(one)
    ss.ok(["worker", "cancel", "t"], one)
    for w in (two, three):
        _sync(w)
    time.sleep(1.3)
    tip = build.git(bare, "rev-parse", "refs/nerve/claims/t")
    assert _sync(two)["archived"] == 1
    common = Path(build.git(three, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    with ss.bus(three) as bus:
        assert archive.archive(open_state(common), bus, {"t": tip}) == []  # lost: refused as a whole
    assert "refs/nerve/finished/three" not in _refs(bare, "refs/nerve/") and _refs(three, "refs/nerve/finished/three") == {}
    assert [t for t, _ in _archived(bare)["two"]] == ["t"]


def test_the_door_deletes_only_claims_an_archive_keeps(tmp_path):
    bare = ss.origin(tmp_path)
    (one,) = ss.team(tmp_path, str(bare), ["one"], shared=QUIET)
    ss.ok(["worker", "spawn", "t"], one)
    tip = build.git(one, "rev-parse", "refs/nerve/claims/t")
    head = build.git(one, "rev-parse", "HEAD")
    with pytest.raises(destroy.Refused):  # an archive commit that does not keep the claim
        destroy.archive_finished_claims(one, "origin", "refs/nerve/finished/one", head, None, [("refs/nerve/claims/t", tip)])
    with pytest.raises(destroy.Refused):  # never anything but a claim ref
        destroy.archive_finished_claims(one, "origin", "refs/nerve/finished/one", tip, None, [("refs/heads/main", head)])
    with pytest.raises(destroy.Refused):
        destroy.drop_claim_mirrors(one, [("refs/nerve/claims/t", tip)], [head])
    assert build.git(bare, "rev-parse", "refs/nerve/claims/t") == tip and build.git(one, "rev-parse", "refs/nerve/claims/t") == tip
    assert _refs(bare, "refs/nerve/finished/") == {}


def test_a_copy_behind_the_archive_never_brings_an_earlier_state_back(tmp_path):
    """two last fetched t WORKING; one cancels it and archives it. two's sync learns FAILED from the archive,
    drops its copy of the claim, and no later sync (nor a rebuild) shows WORKING again."""
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"], shared=QUIET)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    _sync(two)
    assert _view(two) == [("t", "WORKING", "one")] and "refs/nerve/claims/t" in _refs(two, "refs/nerve/claims/")
    ss.ok(["worker", "cancel", "t"], one)
    assert _sync(one)["archived"] == 1
    for more in ((), (), ("--rebuild",)):
        _sync(two, *more)
        assert _view(two) == [("t", "FAILED", "one")], more
        assert _refs(two, "refs/nerve/claims/") == {}
    proc = ss.run(["worker", "start", "--task", "t"], two)
    assert proc.returncode == 8 and "held by machine one" in proc.stderr


def test_a_host_that_refuses_deletions_keeps_the_claims_live_and_is_not_asked_at_every_sync(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"], shared=QUIET)
    hook = bare / "hooks" / "pre-receive"  # a host that refuses every deletion (and notes each push it sees)
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\nwhile read old new ref; do echo $ref >> {tmp_path / 'pushes'}; case $new in "
                    "0000000000000000000000000000000000000000) echo \"no deletions here: $ref\"; exit 1;; esac; done\n")
    hook.chmod(0o755)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "cancel", "t"], one)
    proc = ss.ok(["nerve", "sync"], one)  # the sync itself goes through
    assert "origin refused to archive finished claims" in proc.stderr and "no deletions here" in proc.stderr
    assert "refs/nerve/claims/t" in _refs(bare, "refs/nerve/claims/") and _refs(bare, "refs/nerve/finished/") == {}
    (tmp_path / "pushes").unlink()
    report = _sync(one)  # no archive push for a lease's time
    assert report["archived"] == 0 and "no deletions here" in report["archive_refused"]
    assert not (tmp_path / "pushes").exists()
    _sync(two)
    assert _view(two) == [("t", "FAILED", "one")]


def test_archiving_over_smart_http(tmp_path):
    """The archive push (a ref moved and claim refs deleted, atomically, each leased) through `git http-backend`."""
    bare = ss.origin(tmp_path)
    build.git(bare, "config", "http.receivepack", "true")
    server = ss.SmartHttp(bare.parent)
    try:
        one, two = ss.team(tmp_path, server.url("project.git"), ["one", "two"], shared=QUIET)
        ss.ok(["worker", "spawn", "t"], one)
        ss.ok(["worker", "spawn", "u"], one)
        ss.ok(["worker", "cancel", "t"], one)
        assert _sync(one)["archived"] == 1
        assert list(_refs(bare, "refs/nerve/claims/")) == ["refs/nerve/claims/u"]
        assert [t for t, _ in _archived(bare)["one"]] == ["t"]
        _sync(two)
        assert _view(two) == [("t", "FAILED", "one"), ("u", "ASSIGNED", "one")]
        ss.ok(["worker", "retry", "t"], one)
        assert sorted(_refs(bare, "refs/nerve/claims/")) == ["refs/nerve/claims/t", "refs/nerve/claims/u"]
    finally:
        server.stop()


def test_a_claim_archived_between_the_listing_and_the_fetch_is_not_left_behind(tmp_path, monkeypatch):
    """two's copy of t says WORKING; one cancels t; two's sync lists the remote (t live, FAILED), then one archives
    t before two's fetch, which brings the archive but not the claim. Two's view says FAILED after that sync and
    every later one (before the fix its copy's WORKING stayed for good: the archive entry counted as read)."""
    from git_nerve.shared import status as shared_status
    from git_nerve.shared import sync as sync_mod

    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"], shared=QUIET)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    _sync(two)
    assert _view(two) == [("t", "WORKING", "one")]
    ss.ok(["worker", "cancel", "t"], one)
    listing = sync_mod.remote_refs.ls_remote

    def list_then_archive(*args, **kwargs):
        out = listing(*args, **kwargs)
        if not raced:
            raced.append(True)
            assert _sync(one)["archived"] == 1  # the claim ref leaves the remote, its archive entry arrives
        return out

    raced: list = []
    with monkeypatch.context() as patch:
        patch.setattr(sync_mod.remote_refs, "ls_remote", list_then_archive)
        shared_status.run_sync(two)
    assert raced and "refs/nerve/claims/t" not in _refs(bare, "refs/nerve/claims/")
    views = [_view(two)]
    for more in ((), ("--rebuild",)):
        _sync(two, *more)
        views.append(_view(two))
    assert views == [[("t", "FAILED", "one")]] * 3, views
    assert _refs(two, "refs/nerve/claims/") == {}
