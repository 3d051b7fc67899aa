"""`git nerve sync --watch` on the git remote (issue 24): the polling schedule (pure, with a fake clock) and a
watching machine over a real bare remote: it brings another machine's claim within seconds, keeps its own
leases while idle, and stops cleanly on SIGTERM / Ctrl-C (exit 130, no lock left)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fixtures.repos import build
from git_nerve import locks
from git_nerve.errors import GitError, UsageError
from git_nerve.shared import config as shared_config
from git_nerve.shared import poll
from git_nerve.shared.background import lock_paths
from tests import shared_support as ss


def _schedule(results: list[str], low: float = 2, high: float = 200, rand: float = 1.0) -> list[float]:
    s = poll.Schedule(low, high, rand=lambda: rand)
    return [s.next(r) for r in results]


def test_the_wait_is_short_after_a_change_and_doubles_while_nothing_changes():
    C, S = poll.CHANGED, poll.SAME
    assert _schedule([C, S, S, S, S, S, S, S, S]) == [2, 4, 8, 16, 32, 64, 128, 200, 200]
    assert _schedule([S, S, S, C, S]) == [4, 8, 16, 2, 4]  # a change: short again
    assert _schedule([S] * 5, low=0.5, high=3) == [1, 2, 3, 3, 3]


def test_errors_back_off_with_jitter_and_rate_limits_harder():
    E, L, C = poll.ERROR, poll.LIMITED, poll.CHANGED
    assert _schedule([E, E, E]) == [4, 8, 16]  # rand 1.0: the whole wait
    assert _schedule([E, E, E], rand=0.0) == [2, 4, 8]  # rand 0.0: half of it
    assert _schedule([L, L, L, L]) == [8, 32, 128, 200]
    assert _schedule([L, C]) == [8, 2]  # back once the remote answers with a change
    for r in (0.0, 0.3, 0.99):
        assert all(1 <= d <= 200 for d in _schedule([E] * 12, rand=r))  # never above the cap


def test_how_a_look_went_is_read_from_its_report():
    assert poll.outcome({"fetched": True, "ingested": 0}) == poll.CHANGED
    assert poll.outcome({"fetched": False, "exported": 1}) == poll.SAME  # this machine's own beat: no change
    assert poll.outcome({"error": "cannot reach origin: fatal: unable to access: Connection refused"}) == poll.ERROR
    for words in ("The requested URL returned error: 429", "API rate limit exceeded", "Too Many Requests"):
        assert poll.outcome({"error": f"sync refused by origin: {words}"}) == poll.LIMITED


class _State:
    """A shared state whose syncs play a script (a report or a GitError each)."""

    def __init__(self, script, low=2.0, high=20.0):
        self.config = type("C", (), {"poll_min": low, "poll_max": high})()
        self.script = list(script)

    def sync(self, bus):
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return dict(step)


def test_the_watch_loop_waits_as_the_schedule_says_on_a_fake_clock():
    slept, reports = [], []
    state = _State([{"fetched": True}, {"fetched": False}, GitError("cannot reach origin: timed out"),
                    {"fetched": False}, {"fetched": True}])

    def sleep(seconds):
        slept.append(seconds)
        if not state.script:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        poll.watch(state, None, reports.append, sleep=sleep)
    assert [r.get("error", "ok") for r in reports] == ["ok", "ok", "cannot reach origin: timed out", "ok", "ok"]
    assert slept[:2] == [2, 4] and 4 <= slept[2] <= 8 and slept[3] == 16 and slept[4] == 2
    assert [r["next_look"] for r in reports] == [round(s, 2) for s in slept]


def test_a_stop_during_a_sync_waits_for_its_end():
    guard = poll.Guard()
    done = []

    class Slow(_State):
        def sync(self, bus):
            guard.signal()  # SIGTERM arrives mid-sync: noted, not raised
            done.append(True)
            return {"fetched": False}

    with pytest.raises(KeyboardInterrupt):
        poll.watch(Slow([]), None, lambda r: None, guard=guard, sleep=lambda s: pytest.fail("slept"))
    assert done == [True]
    with pytest.raises(KeyboardInterrupt):
        poll.Guard().signal()  # between syncs: at once


def _shared_toml(tmp_path: Path, extra: str) -> Path:
    work = build.simple(tmp_path / "w").work
    (work / "nerve.toml").write_text(f'[shared]\nbackend = "git"\nlease = 60\n{extra}', encoding="utf-8")
    return work


@pytest.mark.parametrize("extra, words", [
    ("poll_min = 0\n", "poll_min must be a number of seconds above 0"),
    ('poll_max = "fast"\n', "poll_max must be a number of seconds above 0"),
    ("poll_min = 5\npoll_max = 3\n", "needs poll_min (5) <= poll_max (3) <= a third of the lease (20 s)"),
    ("poll_max = 30\n", "<= a third of the lease (20 s)"),
])
def test_poll_bounds_that_cannot_hold_are_refused_in_one_line(tmp_path, extra, words):
    work = _shared_toml(tmp_path, extra)
    with pytest.raises(UsageError) as exc:
        shared_config.load(work / ".git")
    assert words in exc.value.message and "\n" not in exc.value.message


def test_poll_bounds_default_to_two_seconds_and_a_third_of_the_lease(tmp_path):
    cfg = shared_config.load(_shared_toml(tmp_path, "") / ".git")
    assert (cfg.poll_min, cfg.poll_max) == (2.0, 20.0)
    cfg = shared_config.load(_shared_toml(tmp_path / "b", "poll_max = 1.5\n") / ".git")
    assert (cfg.poll_min, cfg.poll_max) == (1.5, 1.5)


def _watch(work: Path) -> subprocess.Popen:
    return subprocess.Popen([str(ss.BIN / "git-nerve"), "sync", "--watch", "--json"], cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _stopped(proc: subprocess.Popen, sig: int, work: Path) -> None:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, (proc.returncode, err)
    common = work / ".git"
    assert not any(locks.is_held(p) for p in lock_paths(common))
    assert not [p for p in common.rglob("*.lock") if "nerve" not in p.parts]  # no git lock file left either
    for line in out.splitlines():
        json.loads(line)  # one JSON object a line, up to the end


def test_a_watching_machine_sees_a_claim_within_seconds_keeps_its_leases_and_stops_cleanly(tmp_path):
    bare = ss.origin(tmp_path)
    one, two = ss.team(tmp_path, str(bare), ["one", "two"], lease=4, shared="poll_min = 0.3\n")  # poll_max 4/3 s
    ss.ok(["worker", "spawn", "u"], two)
    ss.ok(["nerve", "sync"], two)
    ss.ok(["nerve", "sync"], one)  # one has seen two's log where it is now
    watcher = _watch(two)
    try:
        first = json.loads(watcher.stdout.readline())
        assert first["backend"] == "git" and first["machine"] == "two" and first["next_look"] <= 4 / 3
        ss.ok(["worker", "spawn", "t"], one)
        spawned = time.monotonic()
        while True:
            report = json.loads(watcher.stdout.readline())
            if report.get("claims"):
                break
            assert time.monotonic() - spawned < 5, report
        assert time.monotonic() - spawned < 5 and report["fetched"] and report["next_look"] == 0.3
        with ss.bus(two) as b:
            from git_nerve.bus import shared as cache

            assert cache.claim(b.conn, "t").owner == "one"
        time.sleep(4.5)  # longer than the lease: an idle but watching machine's log still moved (alive beats)
        proc = ss.run(["worker", "takeover", "u"], one)
        assert proc.returncode == 8 and "held by machine two" in proc.stderr, proc.stderr
        assert watcher.poll() is None
    finally:
        if watcher.poll() is None:
            _stopped(watcher, signal.SIGTERM, two)
    second = _watch(two)
    assert json.loads(second.stdout.readline())["machine"] == "two"
    _stopped(second, signal.SIGINT, two)
    bare_log = build.git(bare, "rev-parse", "refs/nerve/log/two")
    assert bare_log == build.git(two, "rev-parse", "refs/nerve/log/two")  # every beat made was pushed


def test_an_unreachable_remote_is_reported_and_the_watch_goes_on_backing_off(tmp_path):
    bare = ss.origin(tmp_path)
    daemon = ss.Daemon(bare.parent)
    daemon.start()
    try:
        one, two = ss.team(tmp_path, daemon.url("project.git"), ["one", "two"], lease=3, shared="poll_min = 0.2\n")
        watcher = _watch(two)
        try:
            assert "error" not in json.loads(watcher.stdout.readline())
            daemon.stop()  # the server is gone: each look fails, the watch says so and waits longer
            errors = []
            while len(errors) < 3:
                report = json.loads(watcher.stdout.readline())
                if "error" in report:
                    errors.append(report)
            assert all(r["error"].startswith("cannot reach origin") and r["next_look"] <= 1 for r in errors)
            daemon.start()
            ss.ok(["worker", "spawn", "t"], one)  # the remote is back: the next look brings the claim
            while not json.loads(watcher.stdout.readline()).get("claims"):
                pass
            assert watcher.poll() is None
        finally:
            _stopped(watcher, signal.SIGTERM, two)
    finally:
        daemon.stop()
