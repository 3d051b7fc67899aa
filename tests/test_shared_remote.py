"""Shared mode (issue 24): several clones, each its own machine, coordinating through a real git remote
(file://, and `git daemon` on 127.0.0.1 started here)."""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fixtures.repos import build
from tests import shared_support as ss
from tests.shared_support import daemon  # noqa: F401  (the fixture)


_local_row = ss.row


def _claims_on(bare: Path) -> dict[str, str]:
    out = build.git(bare, "for-each-ref", "--format=%(refname) %(objectname)", "refs/nerve/claims/")
    return dict(ln.split() for ln in out.splitlines())


def _chain(bare: Path, task: str) -> list[dict]:
    """The claim chain of ``task`` on the remote (from the archive when a sync archived it, finished)."""
    tip = build.git(bare, "for-each-ref", "--format=%(objectname)", f"refs/nerve/claims/{task}")
    if not tip:
        for ref in build.git(bare, "for-each-ref", "--format=%(refname)", "refs/nerve/finished/").split():
            for s in build.git(bare, "rev-list", "--first-parent", ref).split():
                for line in build.git(bare, "show", f"{s}:finished.jsonl").splitlines():
                    d = json.loads(line)
                    tip = tip or (d["tip"] if d["task"] == task else "")
    shas = build.git(bare, "rev-list", "--reverse", tip).split()
    return [json.loads(build.git(bare, "cat-file", "blob", f"{s}:record.json")) for s in shas]


def test_init_shared_probes_then_records_and_leaves_no_probe(tmp_path):
    bare = ss.origin(tmp_path)
    work = ss.clone(tmp_path, str(bare), "alpha")
    proc = ss.ok(["nerve", "init", "--shared"], work)
    assert "through origin as machine alpha" in proc.stdout
    text = (work / "nerve.toml").read_text()
    assert '[shared]\n' in text and 'backend = "git"' in text and 'remote = "origin"' in text
    assert build.git(bare, "for-each-ref", "refs/nerve/probe/") == ""  # the probe ref was deleted again
    assert build.git(bare, "for-each-ref", "--format=%(refname)", "refs/nerve/") == "refs/nerve/machines/alpha"
    again = ss.ok(["nerve", "init", "--shared"], work)  # idempotent: the table is kept as it is
    assert (work / "nerve.toml").read_text() == text and "recorded" not in again.stdout


@pytest.mark.parametrize("host", ["pre-receive hook", "hidden refs"])
def test_a_host_refusing_custom_refs_is_quoted_and_nothing_is_recorded(tmp_path, host):
    bare = ss.origin(tmp_path)
    if host == "hidden refs":  # as GitLab hides refs outside branches and tags
        build.git(bare, "config", "receive.hideRefs", "refs/nerve")
        said = "deny updating a hidden ref"
    else:
        hook = bare / "hooks" / "pre-receive"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text("#!/bin/sh\nwhile read old new ref; do case $ref in refs/nerve/*) "
                        "echo \"custom refs are not allowed here: $ref\"; exit 1;; esac; done\n")
        hook.chmod(0o755)
        said = "custom refs are not allowed here: refs/nerve/probe/alpha-"
    work = ss.clone(tmp_path, str(bare), "alpha")
    proc = ss.run(["nerve", "init", "--shared"], work)
    assert proc.returncode == 4, proc
    assert "origin refused the probe's create of refs/nerve/probe/alpha-" in proc.stderr
    assert said in proc.stderr  # the host's own words
    assert "a separate bare repository" in proc.stderr and "stay on one machine" in proc.stderr
    assert not (work / "nerve.toml").exists()  # the probe runs before anything is written here (issue 36)


def test_claim_races_over_git_daemon_have_exactly_one_owner(tmp_path, daemon):
    machines = ["m1", "m2", "m3", "m4"]
    works = ss.team(tmp_path, daemon.url("project.git"), machines)
    tasks = [f"race-{i}" for i in range(5)]
    jobs = [(t, m, w) for t in tasks for m, w in zip(machines, works)]
    with ThreadPoolExecutor(max_workers=len(machines)) as pool:
        results = list(pool.map(lambda j: (j[0], j[1], ss.run(["worker", "spawn", j[0]], j[2])), jobs))
    bare = daemon.base / "project.git"
    for task in tasks:
        won = [m for t, m, p in results if t == task and p.returncode == 0]
        lost = [(m, p) for t, m, p in results if t == task and p.returncode != 0]
        assert len(won) == 1, [(m, p.returncode, p.stderr) for t, m, p in results if t == task]
        chain = _chain(bare, task)
        assert [r["owner"] for r in chain] == won and chain[0]["state"] == "ASSIGNED"
        for m, p in lost:
            assert p.returncode == 8, p.stderr
            assert f"task {task} is held by machine {won[0]}" in p.stderr and len(p.stderr.splitlines()) == 1
            loser = works[machines.index(m)]
            assert _local_row(loser, task) is None  # the loser changed nothing here
            assert build.git(loser, "branch", "--list", f"feat/{task}") == ""
            assert not (loser.parent / f"{m}.worktrees" / task).exists()
    for m, w in zip(machines, works):  # every chain linear, every machine's view the same after a sync
        ss.ok(["nerve", "sync"], w)
    for task in tasks:
        assert build.git(bare, "rev-list", "--merges", f"refs/nerve/claims/{task}") == ""
    views = [sorted((r["task_id"], r["machine"]) for r in json.loads(ss.ok(["worker", "status", "--json"], w).stdout))
             for w in works]
    assert all(v == views[0] for v in views) and len(views[0]) == len(tasks)


def test_transitions_extend_the_claim_chain_and_other_machines_are_refused(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    assert [(r["previous"], r["state"], r["verb"], r["machine"], r["seq"]) for r in _chain(bare, "t")] == [
        (None, "ASSIGNED", "spawn", "one", 1), ("ASSIGNED", "WORKING", "start", "one", 2)]
    ss.ok(["nerve", "sync"], one)
    ss.ok(["nerve", "sync"], two)
    shown = json.loads(ss.ok(["worker", "show", "t", "--json"], two).stdout)  # a task held elsewhere, from the cache
    assert (shown["state"], shown["machine"], shown["last_transition"]["verb"]) == ("WORKING", "one", "start")
    assert {"task_assign", "state_change"} <= {e["kind"] for e in shown["events"]}
    assert "held by machine one" in ss.ok(["worker", "show", "t"], two).stdout
    proc = ss.run(["worker", "start", "--task", "t"], two)
    assert proc.returncode == 8 and "task t is held by machine one" in proc.stderr
    proc = ss.run(["worker", "spawn", "t"], two)
    assert proc.returncode == 8 and "held by machine one (WORKING)" in proc.stderr
    assert _local_row(two, "t") is None and len(_chain(bare, "t")) == 2
    status = ss.ok(["worker", "status"], two).stdout
    assert "MACHINE" in status and "view: synced" in status
    row = next(ln for ln in status.splitlines() if ln.startswith("t "))
    assert row.split()[1:3] == ["WORKING", "one"]
    rows = json.loads(ss.ok(["worker", "status", "--json"], two).stdout)
    assert [(r["task_id"], r["state"], r["machine"], r["elsewhere"]) for r in rows] == [("t", "WORKING", "one", True)]


def test_a_stale_mirror_is_refreshed_and_the_newer_state_wins(tmp_path):
    """A clone whose copy of the claim is behind the remote asks the remote before it decides: the transition
    goes on from the remote's tip (the chain stays linear)."""
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    # one's copy of the claim falls behind (as after a sync that raced a push)
    first = build.git(bare, "rev-list", "--reverse", "refs/nerve/claims/t").split()[0]
    build.git(one, "update-ref", "refs/nerve/claims/t", first)
    proc = ss.run(["worker", "cancel", "t"], one)  # the mirror says ASSIGNED, the remote WORKING: refreshed, wins
    assert proc.returncode == 0, proc.stderr
    assert [r["state"] for r in _chain(bare, "t")] == ["ASSIGNED", "WORKING", "FAILED"]


def _produced(work: Path) -> int:
    """Every record the machine wrote that it publishes: messages, thread rounds, notes, acknowledgements."""
    from git_nerve.bus import shared as cache

    with ss.bus(work) as b:
        return cache.local_count(b.conn)


def _ingested(work: Path) -> dict[str, int]:
    from git_nerve.bus import shared as cache

    with ss.bus(work) as b:
        return cache.event_counts(b.conn)


def test_events_produced_equal_events_ingested_on_every_machine(tmp_path, daemon):
    machines = ["a", "b", "c"]
    works = ss.team(tmp_path, daemon.url("project.git"), machines)
    for i, w in enumerate(works):
        for k in range(2):
            ss.ok(["worker", "spawn", f"{machines[i]}-{k}", "-d", f"task {k}"], w)
            ss.ok(["worker", "start", "--task", f"{machines[i]}-{k}"], w)
            ss.ok(["worker", "heartbeat", "--task", f"{machines[i]}-{k}", "--status", "busy"], w)
        ss.ok(["nerve", "post", "--task", f"{machines[i]}-0", "--role", "tester", f"tests pass on {machines[i]}"], w)
        ss.ok(["nerve", "tell", "--task", f"{machines[i]}-1", f"a note for {machines[i]}-1"], w)
        ss.ok(["nerve", "sync"], w)  # in the middle of the others' work
    for _ in range(2):
        for w in works:
            ss.ok(["nerve", "sync"], w)
    produced = {m: _produced(w) for m, w in zip(machines, works)}
    for m, w in zip(machines, works):
        assert _ingested(w) == {o: produced[o] for o in machines if o != m}  # 0 lost, 0 duplicated
    again = json.loads(ss.ok(["nerve", "sync", "--json"], works[0]).stdout)
    assert again["ingested"] == 0 and again["exported"] == 0
    rebuilt = json.loads(ss.ok(["nerve", "sync", "--rebuild", "--json"], works[0]).stdout)
    assert rebuilt["ingested"] == produced["b"] + produced["c"] and _ingested(works[0]) == {"b": produced["b"], "c": produced["c"]}
    views = [json.loads(ss.ok(["worker", "status", "--json"], w).stdout) for w in works]
    assert all(sorted((r["task_id"], r["state"], r["machine"]) for r in v) ==
               sorted((r["task_id"], r["state"], r["machine"]) for r in views[0]) for v in views)
    assert len(views[0]) == 6
    from git_nerve.bus import shared as cache

    with ss.bus(works[2]) as b:
        rounds = [e[5]["content"] for e in cache.events(b.conn, "a-0") if e[4] == "thread_round"]
        notes = [e[5]["text"] for e in cache.events(b.conn, "b-1") if e[4] == "note"]
    assert "tests pass on a" in rounds and notes == ["a note for b-1"]


def test_a_partition_fails_transitions_fast_and_queues_events(tmp_path, daemon):
    one, two = ss.team(tmp_path, daemon.url("project.git"), ["one", "two"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["nerve", "sync"], two)
    daemon.stop()
    started = time.monotonic()
    proc = ss.run(["worker", "start", "--task", "t"], one)
    assert proc.returncode == 4 and time.monotonic() - started < 10
    assert proc.stderr.startswith("error: cannot reach origin") and "nothing changed here (t is still ASSIGNED)" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert _local_row(one, "t").state == "ASSIGNED"
    ss.ok(["worker", "heartbeat", "--task", "t", "--status", "offline work"], one)  # written locally at once
    proc = ss.run(["nerve", "sync"], one)
    assert proc.returncode == 4 and "events wait in refs/nerve/log/one" in proc.stderr
    assert "remote unreachable since" in ss.ok(["worker", "status"], one).stdout
    daemon.start()
    ss.ok(["nerve", "sync"], one)
    assert "view: synced" in ss.ok(["worker", "status"], one).stdout
    ss.ok(["nerve", "sync"], two)
    from git_nerve.bus import shared as cache

    with ss.bus(two) as b:
        statuses = [e[5].get("status") for e in cache.events(b.conn, "t") if e[4] == "heartbeat"]
    assert "offline work" in statuses and _ingested(two) == {"one": _produced(one)}
    ss.ok(["worker", "start", "--task", "t"], one)  # back online: transitions go through again


def test_an_alive_beat_moves_the_log_but_is_not_an_event(tmp_path, daemon):
    """A sync with nothing new moves the log with an ``alive`` beat when this machine never beat (the background
    sync of its first transition, started once the claim landed, winning the race against that transition's
    bus write: what failed under load) or a third of the lease passed: the others see the log move (the lease
    holds) but ingest exactly the machine's records, no more."""
    one, two = ss.team(tmp_path, daemon.url("project.git"), ["one", "two"], lease=0.6)
    ss.ok(["nerve", "sync"], one)  # nothing written here yet: a beat, as that background sync publishes
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["nerve", "sync"], one)
    time.sleep(0.5)  # a third of the lease (0.2 s) passed: the next sync with nothing new beats
    ss.ok(["nerve", "sync"], one)  # (or a background sync just before it did)
    bare = daemon.base / "project.git"
    lines = [json.loads(ln) for sha in build.git(bare, "rev-list", "refs/nerve/log/one").split()
             for ln in build.git(bare, "cat-file", "blob", f"{sha}:events.jsonl").splitlines()]
    assert any(e["kind"] == "alive" for e in lines) and _produced(one) > 0
    ss.ok(["nerve", "sync"], two)
    assert _ingested(two) == {"one": _produced(one)}  # the beat is not one of one's records
    rebuilt = json.loads(ss.ok(["nerve", "sync", "--rebuild", "--json"], two).stdout)
    assert rebuilt["ingested"] == _produced(one) and _ingested(two) == {"one": _produced(one)}


def test_without_shared_mode_nothing_reaches_the_remote(tmp_path):
    bare = ss.origin(tmp_path)
    work = ss.clone(tmp_path, str(bare), "solo")
    ss.ok(["nerve", "init"], work)
    ss.ok(["worker", "spawn", "t"], work)
    ss.ok(["worker", "start", "--task", "t"], work)
    assert build.git(bare, "for-each-ref", "refs/nerve/") == ""
    assert build.git(work, "for-each-ref", "refs/nerve/") == ""
    status = ss.ok(["worker", "status"], work).stdout
    assert "MACHINE" not in status and "view:" not in status
    assert "machine" not in json.loads(ss.ok(["worker", "status", "--json"], work).stdout)[0]
    proc = ss.ok(["nerve", "sync"], work)
    assert "not in shared mode" in proc.stdout


def _foreign_record(bare: Path, task: str, state: str, machine: str, verb: str = "cancel") -> None:
    """Another transition landing on the remote first (written into the bare repository): by the holder (another
    clone could not move it: issue 36), or a review another machine may make."""
    tip = build.git(bare, "rev-parse", f"refs/nerve/claims/{task}")
    last = json.loads(build.git(bare, "cat-file", "blob", f"{tip}:record.json"))
    rec = {**last, "state": state, "previous": last["state"], "verb": verb, "machine": machine, "seq": last["seq"] + 1}
    blob = build.git(bare, "hash-object", "-w", "--stdin", input=json.dumps(rec))
    tree = build.git(bare, "mktree", input=f"100644 blob {blob}\trecord.json\n")
    commit = build.git(bare, "commit-tree", tree, "-p", tip, "-m", "foreign")
    build.git(bare, "update-ref", f"refs/nerve/claims/{task}", commit, tip)


def test_done_pushes_the_branch_and_the_claim_atomically(tmp_path):
    bare = ss.origin(tmp_path)
    (one,) = ss.team(tmp_path, str(bare), ["one"])
    for task in ("kept", "lost"):
        ss.ok(["worker", "spawn", task], one)
        wt = Path(_local_row(one, task).worktree)
        ss.ok(["worker", "start", "--task", task], one)
        build.commit_file(wt, f"{task}.txt", "work\n")
    ss.ok(["worker", "done", "--task", "kept"], one)
    assert [r["state"] for r in _chain(bare, "kept")] == ["ASSIGNED", "WORKING", "IN_REVIEW"]
    assert build.git(bare, "rev-parse", "refs/heads/feat/kept") == build.git(one, "rev-parse", "feat/kept")
    _foreign_record(bare, "lost", "FAILED", "one")  # (a cancel of this machine's own, elsewhere: it holds the task)
    proc = ss.run(["worker", "done", "--task", "lost"], one)
    assert proc.returncode == 8 and "task lost is held by machine one (FAILED)" in proc.stderr
    assert build.git(bare, "branch", "--list", "feat/lost") == ""  # the branch did not land without its claim
    assert _local_row(one, "lost").state == "WORKING"


def test_smart_http_claims_and_sync(tmp_path):
    """The same over smart HTTP (`git http-backend`): a race has one owner, the other machine sees its task."""
    bare = ss.origin(tmp_path)
    build.git(bare, "config", "http.receivepack", "true")
    server = ss.SmartHttp(bare.parent)
    try:
        one, two = ss.team(tmp_path, server.url("project.git"), ["one", "two"])
        with ThreadPoolExecutor(max_workers=2) as pool:
            procs = list(pool.map(lambda w: ss.run(["worker", "spawn", "web"], w), [one, two]))
        assert sorted(p.returncode for p in procs) == [0, 8], [(p.returncode, p.stderr) for p in procs]
        winner = ["one", "two"][[p.returncode for p in procs].index(0)]
        assert [r["owner"] for r in _chain(bare, "web")] == [winner]
        for w in (one, two):
            ss.ok(["nerve", "sync"], w)
        rows = json.loads(ss.ok(["worker", "status", "--json"], two).stdout)
        assert [(r["task_id"], r["machine"]) for r in rows] == [("web", winner)]
    finally:
        server.stop()


def test_takeover_after_the_lease_and_the_old_holder_is_fenced(tmp_path):
    bare = ss.origin(tmp_path)
    one, two, three = ss.team(tmp_path, str(bare), ["one", "two", "three"], lease=2)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    build.commit_file(Path(_local_row(one, "t").worktree), "t.txt", "one's work\n")
    ss.ok(["worker", "done", "--task", "t"], one)
    ss.ok(["nerve", "sync"], one)  # then `one` goes silent
    proc = ss.run(["worker", "takeover", "t"], two)
    assert proc.returncode == 8 and "held by machine one, whose log moved 0 s ago (lease: 2 s" in proc.stderr
    ss.ok(["nerve", "sync"], three)
    time.sleep(2.5)
    ss.ok(["worker", "takeover", "t"], two)
    row = _local_row(two, "t")
    assert row.state == "ASSIGNED" and (Path(row.worktree) / "t.txt").read_text() == "one's work\n"
    last = _chain(bare, "t")[-1]
    assert (last["verb"], last["owner"], last["previous"], last["state"]) == ("takeover", "two", "IN_REVIEW", "ASSIGNED")
    proc = ss.run(["worker", "takeover", "t"], three)  # two's log moved when it took over: its lease holds
    assert proc.returncode == 8 and "held by machine two" in proc.stderr
    proc = ss.run(["worker", "request-changes", "t"], one)  # the old holder comes back: fenced off
    assert proc.returncode == 8 and "task t is held by machine two" in proc.stderr
    assert _local_row(one, "t").state == "FAILED" and _chain(bare, "t")[-1]["owner"] == "two"  # fenced off here
    ss.ok(["worker", "start", "--task", "t"], two)


def test_a_wall_clock_days_ahead_changes_no_lease(tmp_path, monkeypatch, gw, gn):
    """Leases are judged on the observer's monotonic clock: a holder whose wall clock is days ahead keeps its
    task while its log moves, and loses it only once the log stood still for the lease."""
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"], lease=3)
    from git_nerve import clock

    real = clock.now
    with monkeypatch.context() as m:
        m.setattr(clock, "now", lambda: real() + 3 * 86400)
        assert gw("spawn t", one).code == 0 and gn("sync", one).code == 0
        ss.ok(["nerve", "sync"], two)
        time.sleep(2)
        assert gw("start --task t", one).code == 0 and gn("sync", one).code == 0  # its log moves
    time.sleep(1.5)  # 3.5 s since two first saw one's log: but it moved since, as two's own sync now sees
    proc = ss.run(["worker", "takeover", "t"], two)
    assert proc.returncode == 8 and "held by machine one, whose log moved 0 s ago (lease: 3 s" in proc.stderr
    time.sleep(3.2)
    ss.ok(["worker", "takeover", "t"], two)
    assert _chain(bare, "t")[-1]["owner"] == "two"


def test_merge_pushes_the_integration_branch_and_the_claim_atomically(tmp_path):
    bare = ss.origin(tmp_path)
    (one,) = ss.team(tmp_path, str(bare), ["one"])
    for task in ("kept", "lost"):
        ss.ok(["worker", "spawn", task], one)
        ss.ok(["worker", "start", "--task", task], one)
        build.commit_file(Path(_local_row(one, task).worktree), f"{task}.txt", "work\n")
        ss.ok(["worker", "done", "--task", task], one)
        ss.ok(["worker", "approve", task], one)
    ss.ok(["worker", "merge", "kept"], one)
    assert [r["state"] for r in _chain(bare, "kept")][-2:] == ["APPROVED", "COMPLETED"]
    main = build.git(bare, "rev-parse", "main")
    _foreign_record(bare, "lost", "WORKING", "two", "request changes for")  # a review from another machine
    proc = ss.run(["worker", "merge", "lost"], one)
    # refused either way: by the claim as the atomic push found it (8), or, when a background sync brought the
    # review in first, by the state it left (3)
    assert (proc.returncode == 8 and "(WORKING, moved there by two's request changes for)" in proc.stderr) or (
        proc.returncode == 3 and "cannot merge lost: it is WORKING (merge needs APPROVED)" in proc.stderr), proc
    assert build.git(bare, "rev-parse", "main") == main  # the integration branch did not move without the claim
    assert _local_row(one, "lost").state in ("APPROVED", "WORKING")  # never COMPLETED


def test_a_transition_publishes_its_events_in_the_background(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)  # no `git nerve sync` on `one`
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if build.git(bare, "for-each-ref", "refs/nerve/log/one"):
            ss.ok(["nerve", "sync"], two)
            if _ingested(two).get("one", 0) == _produced(one):
                break
        time.sleep(0.3)
    assert _ingested(two) == {"one": _produced(one)}
    kinds = build.git(one, "log", "--format=%s", "refs/nerve/log/one")
    assert kinds  # the log ref was written by the background sync, not by a sync run here


def test_credentials_in_the_remote_url_reach_neither_the_bus_nor_the_output(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t"], one)
    build.git(one, "remote", "set-url", "origin", f"http://bob:s3cr3t-token@127.0.0.1:{ss.free_port()}/project.git")
    for args in (["nerve", "sync"], ["worker", "start", "--task", "t"]):
        proc = ss.run(args, one)
        assert proc.returncode == 4 and "cannot reach origin" in proc.stderr
        assert "s3cr3t" not in proc.stderr + proc.stdout
    with ss.bus(one) as b:
        dump = "\n".join(b.conn.iterdump())
    assert "s3cr3t" not in dump and "remote unreachable since" in ss.ok(["worker", "status"], one).stdout


def _stops(work: Path, task: str) -> list[str]:
    from git_nerve.bus import steer

    with ss.bus(work) as b:
        return [m.text for m in steer.about_task(b.conn, task, all_since=None) if m.kind == "stop"]


def test_a_machine_back_after_a_takeover_is_fenced_off(tmp_path):
    """`one` holds two tasks, goes silent past its lease, `two` takes both over. `one` comes back: through a
    refused `done` (its claim lost on the remote) and through `git nerve sync`, each task's run is asked to stop,
    its unpushed commits and uncommitted files are on one's archive ref, its row is FAILED here, and every verb
    of it is refused with exit 8 naming two."""
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"], lease=2)
    for task in ("pushy", "dirty"):
        ss.ok(["worker", "spawn", task], one)
        ss.ok(["worker", "start", "--task", task], one)
        build.commit_file(Path(_local_row(one, task).worktree), f"{task}.txt", "one's unpushed work\n")
    wt = Path(_local_row(one, "dirty").worktree)
    (wt / "dirty.txt").write_text("one's uncommitted edit\n")
    (wt / "new.txt").write_text("one's untracked file\n")
    unpushed = {t: build.git(one, "rev-parse", f"feat/{t}") for t in ("pushy", "dirty")}
    ss.ok(["nerve", "sync"], one)  # then `one` goes silent
    ss.ok(["nerve", "sync"], two)
    time.sleep(2.5)
    for task in ("pushy", "dirty"):
        ss.ok(["worker", "takeover", task], two)
    # one is back: its `done` of pushy loses the claim on the remote, learns the holder, fences pushy off
    proc = ss.run(["worker", "done", "--task", "pushy"], one)
    assert proc.returncode == 8 and "task pushy is held by machine two" in proc.stderr.splitlines()[-1]
    assert "fenced: task pushy was taken over by machine two" in proc.stderr
    assert build.git(bare, "branch", "--list", "feat/pushy") == ""  # its branch never landed
    assert _local_row(one, "pushy").state == "FAILED" and _local_row(one, "dirty").state == "WORKING"
    # a sync learns the rest from the claim chain (the background one only fills the cache); the agent's next
    # heartbeat fences the task off and is refused
    from git_nerve.shared.status import run_sync

    run_sync(one)
    assert _local_row(one, "dirty").state == "WORKING"
    proc = ss.run(["worker", "heartbeat", "--task", "dirty"], one)
    assert proc.returncode == 8 and "task dirty is held by machine two (ASSIGNED)" in proc.stderr.splitlines()[-1]
    assert "fenced: task dirty was taken over by machine two" in proc.stderr
    for task in ("pushy", "dirty"):
        row = _local_row(one, task)
        assert row.state == "FAILED"
        archive = f"refs/nerve/archive/{task}"
        build.git(one, "merge-base", "--is-ancestor", unpushed[task], archive)  # its commits are kept
        assert _stops(one, task) == ["stop: taken over by machine two"]  # its run was asked to stop
        proc = ss.run(["worker", "done", "--task", task], one)
        assert proc.returncode == 8 and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert f"task {task} is held by machine two (ASSIGNED)" in proc.stderr
        assert build.git(bare, "branch", "--list", f"feat/{task}") == ""
    assert build.git(one, "show", "refs/nerve/archive/dirty:dirty.txt") == "one's uncommitted edit"
    assert build.git(one, "show", "refs/nerve/archive/dirty:new.txt") == "one's untracked file"
    assert (wt / "dirty.txt").read_text() == "one's uncommitted edit\n"  # nothing removed: the worktree as it was
    pushed = subprocess.run(["git", "push", "origin", "feat/pushy"], cwd=Path(_local_row(one, "pushy").worktree),
                            capture_output=True, text=True)  # its agent's own push: the pre-push hook refuses it
    assert pushed.returncode != 0 and "push refused: task pushy was taken over by machine two" in pushed.stderr
    assert build.git(bare, "branch", "--list", "feat/pushy") == ""
    for verb in (["worker", "cancel", "dirty"], ["worker", "retry", "dirty"], ["worker", "start", "--task", "dirty"]):
        proc = ss.run(verb, one)
        assert proc.returncode == 8 and "held by machine two" in proc.stderr, (verb, proc.stderr)
    assert [r["owner"] for r in _chain(bare, "dirty")][-1] == "two" and _chain(bare, "dirty")[-1]["state"] == "ASSIGNED"
    rows = {r["task_id"]: r for r in json.loads(ss.ok(["worker", "status", "--json"], one).stdout)}
    assert (rows["dirty"]["state"], rows["dirty"]["machine"], rows["dirty"]["fenced"]) == ("ASSIGNED", "two", "FAILED")
    line = next(ln for ln in ss.ok(["worker", "status"], one).stdout.splitlines() if ln.startswith("dirty "))
    assert line.split()[1:3] == ["ASSIGNED", "two"] and line.endswith("(fenced off here: FAILED)")
    ss.ok(["worker", "start", "--task", "dirty"], two)  # the new holder goes on
    ss.ok(["nerve", "sync"], one)
    time.sleep(2.5)  # two goes silent in turn: one may not take the task back onto its fenced row (not yet)
    before = _chain(bare, "dirty")
    proc = ss.run(["worker", "takeover", "dirty"], one)
    assert proc.returncode == 3 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "this machine has an earlier row of dirty (FAILED" in proc.stderr and "nothing changed here" in proc.stderr
    assert _chain(bare, "dirty") == before  # the claim stays two's, for another machine to take


def test_automatic_takeover_races_have_one_winner_and_spare_working_tasks(tmp_path):
    """``[shared] takeover = "idle"``: once `one`'s lease ran out, `two` and `three` syncing at the same moment
    each try to take its idle tasks; every task ends with exactly one new holder (its claim chain: one record
    more, never taken back), the task it is spawned on that machine only, and a WORKING task stays one's."""
    bare = ss.origin(tmp_path)
    one, two, three = ss.team(tmp_path, str(bare), ["one", "two", "three"], lease=2, shared='takeover = "idle"\n')
    idle = ["a", "b", "c"]
    for task in [*idle, "w"]:
        ss.ok(["worker", "spawn", task], one)
    ss.ok(["worker", "start", "--task", "w"], one)
    ss.ok(["nerve", "sync"], one)  # then `one` goes silent
    for w in (two, three):
        assert json.loads(ss.ok(["nerve", "sync", "--json"], w).stdout)["taken_over"] == []  # the lease holds
    time.sleep(2.5)
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = [json.loads(p.stdout) for p in pool.map(lambda w: ss.ok(["nerve", "sync", "--json"], w), [two, three])]
    taken = {m: [t["task"] for t in r["taken_over"]] for m, r in zip(["two", "three"], reports)}
    assert sorted(taken["two"] + taken["three"]) == idle, taken  # each task once
    for task in idle:
        winner = "two" if task in taken["two"] else "three"
        chain = _chain(bare, task)
        assert [(r["owner"], r["verb"]) for r in chain] == [("one", "spawn"), (winner, "takeover")]
        assert _local_row(two if winner == "two" else three, task).state == "ASSIGNED"
        assert _local_row(three if winner == "two" else two, task) is None
    assert [r["owner"] for r in _chain(bare, "w")] == ["one", "one"]  # WORKING: nobody's to take under "idle"
    for w in (two, three):  # and nothing more on the next syncs
        assert json.loads(ss.ok(["nerve", "sync", "--json"], w).stdout)["taken_over"] == []
    report = json.loads(ss.ok(["nerve", "sync", "--json"], one).stdout)  # one comes back: fenced off
    assert sorted(report["fenced"]) == idle and _local_row(one, "w").state == "WORKING"


def test_a_takeover_setting_that_is_not_known_is_refused(tmp_path):
    bare = ss.origin(tmp_path)
    (one,) = ss.team(tmp_path, str(bare), ["one"], shared='takeover = "always"\n')
    proc = ss.run(["nerve", "sync"], one)
    assert proc.returncode != 0 and len(proc.stderr.splitlines()) == 1
    assert "takeover = 'always' is not one of manual, idle, auto" in proc.stderr


def test_review_verbs_of_another_machines_task_run_here_and_other_verbs_say_where_to_run_them(tmp_path):
    """approve, request-changes and merge of a task another machine holds run here (issue 36: review from any
    machine; tests/test_shared_anywhere.py); every other verb of it is refused with one line naming the machine."""
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"])
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    build.commit_file(Path(_local_row(one, "t").worktree), "t.txt", "work\n")
    ss.ok(["worker", "done", "--task", "t"], one)
    ss.ok(["nerve", "sync"], two)
    proc = ss.run(["worker", "cancel", "t"], two)
    assert proc.returncode == 8 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "task t is held by machine one (IN_REVIEW when this machine last synced)" in proc.stderr
    assert [r["state"] for r in _chain(bare, "t")] == ["ASSIGNED", "WORKING", "IN_REVIEW"]
    ss.ok(["worker", "approve", "t", "--comment", "fine"], two)
    assert (_chain(bare, "t")[-1]["state"], _chain(bare, "t")[-1]["machine"]) == ("APPROVED", "two")
    assert _local_row(two, "t") is None
    ss.ok(["worker", "approve", "t"], one)  # on the holder: already APPROVED, nothing more
    assert [r["state"] for r in _chain(bare, "t")] == ["ASSIGNED", "WORKING", "IN_REVIEW", "APPROVED"]
