"""Live on PostgreSQL (issue 29): each clone's listener (git_nerve/listener.py), started by the commands
themselves, keeps the clone's view fresh through LISTEN/NOTIFY with no command run there: `git worker status`,
a note told from another machine (the notes hook's pending marker), the console's live page; it stops after
``listen_idle`` with no live task, reconnects after the database restarts, and ``listen = false`` starts none.
Clones of one origin, each its own machine, on a real PostgreSQL (tests/pg_support.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from git_nerve.bus import shared as cache
from tests import shared_support as ss
from tests.pg_support import listening, stop_listeners, team

pytestmark = pytest.mark.real


def _wait(check, within: float, step: float = 0.01) -> float:
    """Seconds until ``check()`` is true (AssertionError after ``within``)."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        if check():
            return time.monotonic() - started
        time.sleep(step)
    raise AssertionError(f"not within {within} s")


def _log(work: Path) -> str:
    try:
        return (work / ".git" / "nerve" / "listen.log").read_text()
    except FileNotFoundError:
        return ""


def _listening(work: Path) -> None:
    """A command here started the listener: wait until it listens (its first sync done)."""
    _wait(lambda: listening(work) and " published, " in _log(work), 15)


def _cached_state(work: Path, task: str) -> str | None:
    with ss.bus(work) as b:
        c = cache.claim(b.conn, task)
        return c.state if c else None


def _status(work: Path) -> dict:
    return {r["task_id"]: r for r in json.loads(ss.ok(["worker", "status", "--json"], work).stdout)}


def test_another_machines_transitions_reach_status_here_through_the_listener(tmp_path, db):
    one, two = team(tmp_path, db, ["one", "two"])
    ss.ok(["worker", "status"], one)  # any command starts one's listener; from now on nothing runs on one
    _listening(one)
    ss.ok(["worker", "spawn", "t"], two)
    # nothing runs on one, so only its listener can bring them (how fast: bench/shared_postgres.py, not a timed test)
    _wait(lambda: _cached_state(one, "t") == "ASSIGNED", 10)
    ss.ok(["worker", "start", "--task", "t"], two)
    _wait(lambda: _cached_state(one, "t") == "WORKING", 10)
    row = _status(one)["t"]  # status reads the cache the listener refreshed: no sync asked for
    assert (row["state"], row["machine"], row.get("elsewhere")) == ("WORKING", "two", True)
    assert len(_log(one).splitlines()) == 2  # started, listening: a sync a change is not logged
    shown = json.loads(ss.ok(["worker", "show", "t", "--json"], one).stdout)
    assert (shown["state"], shown["machine"]) == ("WORKING", "two")


def test_a_note_told_from_another_machine_is_pending_here_through_the_listener(tmp_path, db):
    from git_nerve.fs import notes_marker

    one, two = team(tmp_path, db, ["one", "two"])
    ss.ok(["worker", "spawn", "t", "--description", "make the parser strict"], one)
    ss.ok(["worker", "status"], two)
    _listening(one)
    _listening(two)
    _wait(lambda: _cached_state(two, "t") == "ASSIGNED", 5)  # two knows one holds t (its listener)
    marker = notes_marker(one / ".git" / "nerve", "t")
    marker.unlink(missing_ok=True)
    ss.ok(["nerve", "tell", "--task", "t", "please cover the empty input"], two)
    _wait(marker.exists, 10)  # nothing polls on one: its listener brings it
    hook = subprocess.run([str(ss.BIN / "git-nerve"), "notes", "--hook", "claude"], cwd=_worktree(one, "t"),
                          input=json.dumps({"hook_event_name": "PostToolUse", "cwd": _worktree(one, "t")}),
                          capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert "please cover the empty input" in hook.stdout, hook  # what the agent's notes hook hands it


def _worktree(work: Path, task: str) -> str:
    from git_nerve.bus import workers

    with ss.bus(work) as b:
        return workers.get(b.conn, task).worktree


def test_the_listener_stops_after_listen_idle_without_a_live_task(tmp_path, db):
    (one,) = team(tmp_path, db, ["one"], listen_idle=2)
    ss.ok(["worker", "spawn", "t"], one)
    _listening(one)
    time.sleep(3)
    assert listening(one)  # a live task here: it stays
    ss.ok(["worker", "cancel", "t"], one)
    gone = _wait(lambda: not listening(one), 10, step=0.1)
    assert gone < 5, gone
    assert "stopped" in _log(one).splitlines()[-1]
    ss.ok(["worker", "status"], one)  # the next command starts it again
    _listening(one)


def test_a_command_returns_with_its_listener_running_so_a_stop_leaves_no_process(tmp_path, db, monkeypatch):
    """The command that starts the clone's listener hands it its lock: when the command returns the listener is
    running (its lock held, naming it), so the next command starts none of its own and a stop of the clone's
    listener (SIGTERM to the pid the lock names) leaves no listener process behind. (A listener that took its lock
    only once it had started missed a stop made meanwhile and ran on for ``listen_idle``, its database gone.)"""
    import uuid

    from git_nerve import locks, proctable
    from tests.pg_support import listener_lock

    mark = f"NERVE_TEST_LISTENER={uuid.uuid4().hex}"
    monkeypatch.setenv(*mark.split("=", 1))  # carried by every process the commands below start
    (one,) = team(tmp_path, db, ["one"])
    ss.ok(["worker", "status"], one)  # starts one's listener
    assert listening(one)  # at once, with no wait
    pid = locks.holder(listener_lock(one))
    assert stop_listeners(tmp_path) == [pid]
    _wait(lambda: not _alive(pid), 10, step=0.05)
    assert proctable.carrying(mark) is not None
    _wait(lambda: not proctable.carrying(mark), 10, step=0.05)  # nothing started here runs on


def test_the_listener_of_a_removed_clone_stops(tmp_path, db):
    """A person removes a clone whose listener runs (a live task in it): the listener stops instead of keeping
    the removed bus open for good, even when a process of that clone still running made its directories again."""
    import shutil

    from git_nerve import locks

    (one,) = team(tmp_path, db, ["one"], lease=3)  # the listener wakes every lease/3 s
    ss.ok(["worker", "spawn", "t"], one)
    _listening(one)
    pid = locks.holder(one / ".git" / "nerve" / "locks" / "listen.lock")
    bus = one / ".git" / "nerve" / "bus.db"
    shutil.rmtree(one)
    bus.parent.mkdir(parents=True)  # what a process of the removed clone still running may make again
    bus.write_bytes(b"")
    _wait(lambda: not _alive(pid), 15, step=0.1)


def _alive(pid: int) -> bool:
    if os.path.isdir("/proc/self"):  # Linux: a zombie waiting for its reaper counts as gone
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_listen_false_starts_nothing(tmp_path, db):
    one, two = team(tmp_path, db, ["one", "two"], listen=False)
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["nerve", "sync"], two)
    ss.ok(["nerve", "tell", "--task", "t", "hello"], two)
    ss.ok(["worker", "status"], two)
    time.sleep(1)
    assert _cached_state(two, "t") == "ASSIGNED"
    assert not listening(one) and not listening(two)
    assert _log(one) == "" and _log(two) == ""


def test_the_listener_reconnects_after_the_database_restarts_and_catches_up(tmp_path, db, pg_server):
    one, two = team(tmp_path, db, ["one", "two"])
    ss.ok(["worker", "status"], one)
    _listening(one)
    pg_server.stop()
    time.sleep(1.5)  # the listener finds the database gone and waits to try again
    pg_server.start()
    ss.ok(["worker", "spawn", "t"], two)  # while one is not listening yet: the catching up brings it
    _wait(lambda: _cached_state(one, "t") == "ASSIGNED", 30, step=0.05)
    assert listening(one)
    ss.ok(["worker", "start", "--task", "t"], two)  # and it listens again
    assert _wait(lambda: _cached_state(one, "t") == "WORKING", 5) < 1.0
    log = _log(one)
    assert ("cannot reach the database" in log or "failed" in log) and log.count(": listening; ") == 2, log


def test_a_listen_setting_that_is_not_a_boolean_is_one_line(tmp_path, db):
    (one,) = team(tmp_path, db, ["one"], listen=False)
    toml = one / "nerve.toml"
    toml.write_text(toml.read_text().replace("listen = false", 'listen = "maybe"'))
    proc = ss.run(["worker", "status"], one)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("[shared] listen must be true or false"), proc
    assert not listening(one)


def test_the_console_page_follows_another_machines_transition_through_the_listener(tmp_path, db):
    from console_support import Console, Events, worker_row

    one, two = team(tmp_path, db, ["one", "two"], listen_idle=2)
    console = Console(one)  # `git nerve console` starts one's listener, which stays while the console is open
    events = None
    try:
        _listening(one)
        events = Events(console.url)
        time.sleep(3)  # past listen_idle, with no live task here
        assert listening(one)
        ss.ok(["worker", "spawn", "t"], two)
        page = events.until(lambda s: (worker_row(s, "t") or {}).get("state") == "ASSIGNED", within=10)
        assert worker_row(page, "t")["machine"] == "two"
    finally:
        if events is not None:
            events.close()
        console.stop()
    assert _wait(lambda: not listening(one), 10, step=0.1) < 6  # the console closed: idle again


def _skewed(tmp_path: Path, seconds: float) -> dict:
    """An environment whose Python processes (and the listener they start) read a wall clock ``seconds`` off."""
    where = tmp_path / f"skew{int(seconds)}"
    where.mkdir(exist_ok=True)
    (where / "sitecustomize.py").write_text(
        "import time\n_real = time.time\ntime.time = lambda: _real() + %r\n" % float(seconds))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(where) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _run(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    prog = "git-worker" if args[0] == "worker" else "git-nerve"
    return subprocess.run([str(ss.BIN / prog), *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=env)


def test_a_listening_machine_keeps_its_lease_by_the_databases_clock_whatever_the_clocks_say(tmp_path, db):
    """one's clock is an hour behind, two's an hour ahead: only the database's clock judges the lease. While
    one's listener runs it notes one seen (every third of the lease), so its task cannot be taken over however
    long one stays silent; once it stops, the lease runs out after the lease by the database's clock."""
    behind, ahead = _skewed(tmp_path, -3600), _skewed(tmp_path, 3600)
    one, two = team(tmp_path, db, ["one", "two"], lease=3, background=False)
    assert _run(["worker", "spawn", "t"], one, behind).returncode == 0
    assert _run(["worker", "start", "--task", "t"], one, behind).returncode == 0
    _listening(one)
    time.sleep(4.5)  # more than the lease without a command on one
    proc = _run(["worker", "takeover", "t"], two, ahead)
    assert proc.returncode == 8 and "held by machine one, which was seen" in proc.stderr, proc
    stop_listeners(one.parent)  # one goes away
    proc = _run(["worker", "takeover", "t"], two, ahead)
    assert proc.returncode == 8, proc  # an hour ahead changes nothing: the lease is the database's
    time.sleep(3.5)
    assert _run(["worker", "takeover", "t"], two, ahead).returncode == 0
    assert _cached_state(two, "t") == "ASSIGNED"


def test_another_machines_footprint_arriving_recomputes_the_radar_here(tmp_path, db):
    """one's task's footprint reaches two through the database: two's listener ingests it and asks for a radar
    recompute, so two's radar.json names the conflict across machines with no command run on two."""
    from fixtures.repos import build
    from git_nerve.radar import cache as radar_cache
    from tests.test_shared_radar import _published, _task

    one, two = team(tmp_path, db, ["one", "two"])
    theirs = build.commit_file(_task(two, "b"), "src/app.py", "def greet(name):\n    return f'good day {name}'\n")
    _published(two, "b", theirs)
    mine = build.commit_file(_task(one, "a"), "src/app.py", "def greet(name):\n    return f'hi {name}'\n")
    _published(one, "a", mine)
    _listening(two)

    def pairs() -> list[tuple]:
        got = radar_cache.load(two / ".git").get("remote_pairs") or {}
        return sorted((p["a"], p["b"], p["machine"], p["kind"]) for p in got.values())

    ss.ok(["nerve", "sync"], one)  # publishes a's footprint: the database rings two's listener
    _wait(lambda: pairs() == [("b", "a", "one", "conflict")], 20, step=0.1)


def test_the_listener_follows_a_change_of_database(tmp_path, db, pg_server):
    """The person points this clone at another database (`git config nerve.database`) while its listener runs (a
    live task: it would never go idle): the listener stops within seconds, saying why, and the next command starts
    one on the new database (it used to listen to the old one until it went idle)."""
    from git_nerve import locks
    from tests.pg_support import listener_lock

    (one,) = team(tmp_path, db, ["one"])
    ss.ok(["worker", "spawn", "t"], one)
    _listening(one)
    pid = locks.holder(listener_lock(one))
    import hashlib

    other = pg_server.create_database("o_" + hashlib.sha1(str(tmp_path).encode()).hexdigest()[:20])
    subprocess.run(["git", "config", "nerve.database", other], cwd=one, check=True)
    _wait(lambda: not _alive(pid), 20, step=0.1)
    assert "names another store now" in _log(one).splitlines()[-1], _log(one)
    ss.run(["worker", "status"], one)  # the next command starts a listener, on the new database
    _wait(lambda: listening(one) and locks.holder(listener_lock(one)) != pid, 15)
