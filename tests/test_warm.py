"""The warm reader (issue 27): a per-clone server answering `git worker status --json` and `show T --json` with
the very bytes and exit code the command itself gives, fresh after any change, started only where it is worth a
process, stopping by itself, and never in the way (a file planted at its socket's name is kept; anything wrong
with it and the command answers itself)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.repos import build
from git_nerve import locks
from waiting import wait_until

TASKS = ("t1", "t2", "t3", "t4")


class Clone:
    def __init__(self, work: Path, env: dict, trace: Path):
        self.work, self.env, self.trace = work, env, trace
        self.common = work / ".git"
        self.sock = self.common / "nerve" / "warm.sock"
        self.lock = self.common / "nerve" / "locks" / "warm.lock"
        self.log = self.common / "nerve" / "warm.log"

    def wt(self, task: str) -> Path:
        return self.work.parent / f"{self.work.name}.worktrees" / task

    def git(self, args: list[str], cwd: Path | None = None, **extra) -> subprocess.CompletedProcess:
        """A real `git ...` with the warm reader on; (code, stdout bytes, stderr bytes)."""
        return subprocess.run(["git", *args], cwd=cwd or self.work, env={**self.env, **extra}, capture_output=True,
                              timeout=120)

    def lines(self) -> list[str]:
        return self.trace.read_text(encoding="utf-8").splitlines() if self.trace.exists() else []

    def served(self, args: list[str], cwd: Path | None = None, **extra) -> subprocess.CompletedProcess:
        """The command, answered by the server (the client's trace says so)."""
        before = len(self.lines())
        res = self.git(["worker", *args], cwd, **extra)
        said = self.lines()[before:]
        assert said and said[-1].split()[1] == "served", (said, res)
        return res

    def direct(self, args: list[str], cwd: Path | None = None, **extra) -> subprocess.CompletedProcess:
        return self.git(["worker", *args], cwd, **{**extra, "NERVE_WARM": "0"})

    def running(self) -> bool:
        return locks.is_held(self.lock) and self.sock.exists()

    def server_pid(self) -> int | None:
        return locks.holder(self.lock) if locks.is_held(self.lock) else None

    def start(self) -> None:
        """Any direct `status --json` starts the server (at least 4 live tasks); wait until it listens."""
        res = self.git(["worker", "status", "--json"])
        assert res.returncode == 0, res
        wait_until(self.running, what="the warm reader listening")


def _stop(clone: Clone) -> None:
    """Stop every server started for this clone, one still starting included (a command's last direct answer may
    have started one a moment ago): SIGTERM to each pid running the server's module for this clone's common dir."""
    deadline = time.monotonic() + 10
    while True:
        found = subprocess.run(["pgrep", "-f", f"git_nerve.warm_server --common {clone.common}$"], capture_output=True,
                               text=True).stdout.split()
        if not found:
            break
        for pid in map(int, found):
            try:
                os.kill(pid, signal.SIGKILL if time.monotonic() > deadline else signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    wait_until(lambda: not locks.is_held(clone.lock), timeout=10, what="no server left")


@pytest.fixture
def warm(tmp_path_factory, hermetic):
    """A clone with the warm reader on (the suite turns it off: conftest.py), a short idle time, a trace file; in a
    short directory (a test's own is too long for a Unix socket's path: then there is no server, by design)."""
    tmp_path = tmp_path_factory.mktemp("w")
    env = {k: v for k, v in hermetic.items() if k != "NERVE_WARM"}
    env.update(NERVE_WARM_TRACE=str(tmp_path / "trace"), NERVE_WARM_IDLE="60")
    clones: list[Clone] = []

    def make(tasks=TASKS, **extra) -> Clone:
        work = build.simple(tmp_path / f"c{len(clones)}").work
        clone = Clone(work, {**env, **extra}, tmp_path / "trace")
        clones.append(clone)
        for t in tasks:
            res = clone.git(["worker", "spawn", t, "--no-fetch"], NERVE_WARM="0")
            assert res.returncode == 0, res
        return clone

    yield make
    for clone in clones:
        _stop(clone)


def _same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def _settled(clone: Clone) -> None:
    """Every task's disk size measured (a status measures at most two worktrees: worktree_prep/disk.py), so two
    answers in a row agree."""
    for _ in range(3):
        clone.direct(["status", "--json"])


def test_served_answers_are_the_commands_own_bytes_in_every_state(warm):
    clone = warm()
    assert clone.git(["worker", "start"], clone.wt("t1")).returncode == 0
    assert clone.git(["worker", "start"], clone.wt("t2")).returncode == 0
    assert clone.git(["worker", "done", "--allow-empty"], clone.wt("t2")).returncode == 0  # IN_REVIEW
    clone.start()
    _settled(clone)
    sub = clone.wt("t1") / "src"
    cases = [
        (["status", "--json"], clone.work, {}),
        (["status", "--json", "--stale"], clone.work, {}),
        (["status", "--json"], sub, {}),  # from a worktree's subdirectory
        (["show", "t2", "--json"], clone.work, {}),
        (["show", "--json", "t1"], sub, {}),
        (["show", "t1", "--json"], clone.work, {"NO_COLOR": "1"}),
        (["status", "--json"], clone.work, {"NO_COLOR": "1"}),
    ]
    for args, cwd, extra in cases:
        served = clone.served(args, cwd, **extra)
        assert served.returncode == 0 and served.stdout[:1] in (b"{", b"["), served
        _same(served, clone.direct(args, cwd, **extra))
    missing = clone.served(["show", "nope", "--json"])  # an unknown task: exit 2, one line on stderr
    assert missing.returncode == 2 and b"unknown task 'nope'" in missing.stderr and missing.stdout == b""
    _same(missing, clone.direct(["show", "nope", "--json"]))
    states = {r["task_id"]: r["state"] for r in json.loads(clone.served(["status", "--json"]).stdout)}
    assert states == {"t1": "WORKING", "t2": "IN_REVIEW", "t3": "ASSIGNED", "t4": "ASSIGNED"}


def test_with_no_task_the_served_answer_is_the_direct_one(warm):
    clone = warm(tasks=())
    assert clone.direct(["status", "--json"]).returncode == 0  # the bus made; no server (no live task)
    assert not clone.log.exists()
    server = subprocess.Popen([sys.executable, "-m", "git_nerve.warm_server", "--common", str(clone.common)],
                              cwd=clone.work, env=clone.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(clone.running, what="the warm reader listening", alive=server)
        served = clone.served(["status", "--json"])
        assert served.stdout == b"[]\n"
        _same(served, clone.direct(["status", "--json"]))
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert not clone.sock.exists()  # a server removes its socket when it stops


def test_served_answers_follow_every_change(warm):
    clone = warm()
    clone.start()
    _settled(clone)
    assert clone.git(["worker", "spawn", "t5", "--no-fetch"]).returncode == 0  # a new task and its worktree
    _settled(clone)
    served = clone.served(["status", "--json"])
    assert b'"t5"' in served.stdout
    _same(served, clone.direct(["status", "--json"]))
    assert clone.git(["worker", "start"], clone.wt("t3")).returncode == 0  # a state change
    served = clone.served(["show", "t3", "--json"])
    assert b'"WORKING"' in served.stdout
    _same(served, clone.direct(["show", "t3", "--json"]))
    build.git(clone.work, "config", "nerve.staleAfter", "1s")  # git config: every ASSIGNED task stale
    time.sleep(1.1)  # the tasks' age must pass the new staleness
    served = clone.served(["status", "--json", "--stale"])
    assert b'"t4"' in served.stdout
    _same(served, clone.direct(["status", "--json", "--stale"]))
    # nerve.toml: the main checkout's and a worktree's that differs -> the command says which one it read
    (clone.work / "nerve.toml").write_text("[worktree]\ndisk_ttl = 60\n", encoding="utf-8")
    (clone.wt("t1") / "nerve.toml").write_text("[worktree]\ndisk_ttl = 30\n", encoding="utf-8")
    served = clone.served(["status", "--json"], clone.wt("t1"))
    assert b"this worktree's nerve.toml differs" in served.stderr
    _same(served, clone.direct(["status", "--json"], clone.wt("t1")))


def test_no_server_below_four_live_tasks_one_at_four(warm):
    clone = warm(tasks=TASKS[:3])
    res = clone.git(["worker", "status", "--json"])
    assert res.returncode == 0
    assert not clone.log.exists() and not locks.is_held(clone.lock)  # the log is made before any start
    assert clone.lines()[-1].split()[1:] == ["direct", "none"]
    assert clone.git(["worker", "spawn", "t4", "--no-fetch"]).returncode == 0
    clone.start()
    clone.served(["status", "--json"])
    assert oct(clone.sock.stat().st_mode & 0o777) == oct(0o600)


def test_the_spawn_that_makes_the_fourth_live_task_starts_the_server(warm):
    """An orchestrator spawns its tasks, then polls: the polls are answered warm from the first."""
    clone = warm(tasks=())
    for t in TASKS[:3]:
        assert clone.git(["worker", "spawn", t, "--no-fetch"]).returncode == 0
    assert not clone.log.exists() and not locks.is_held(clone.lock)  # three live tasks: no server
    assert clone.git(["worker", "spawn", TASKS[3], "--no-fetch"]).returncode == 0
    wait_until(clone.running, what="the warm reader listening after the fourth spawn")
    clone.served(["status", "--json"])


def test_turned_off_in_nerve_toml_no_server_and_a_running_one_stops(warm):
    clone = warm()
    clone.start()
    (clone.work / "nerve.toml").write_text("[worker]\nwarm = false\n", encoding="utf-8")
    res = clone.git(["worker", "status", "--json"])  # refused: answered directly
    assert res.returncode == 0 and clone.lines()[-1].split()[1] == "direct"
    wait_until(lambda: not locks.is_held(clone.lock), what="the server stopped")
    assert not clone.sock.exists()
    assert clone.git(["worker", "status", "--json"]).returncode == 0
    assert not locks.is_held(clone.lock)


def test_it_stops_when_idle(warm):
    clone = warm(NERVE_WARM_IDLE="1")
    clone.start()
    clone.served(["status", "--json"])
    wait_until(lambda: not locks.is_held(clone.lock), what="the idle server stopped")
    assert not clone.sock.exists()
    assert "idle for 1 s" in clone.log.read_text(encoding="utf-8")


def test_it_stops_when_its_clone_is_removed(warm):
    clone = warm()
    clone.start()
    pid = clone.server_pid()
    shutil.rmtree(clone.work)
    (clone.common / "nerve").mkdir(parents=True)  # a process of the removed clone may make its directories again
    wait_until(lambda: not _alive(pid), what="the server of the removed clone stopped")


def _alive(pid: int) -> bool:
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(state) and not state.startswith("Z")


def test_a_server_of_another_version_is_not_used_and_stops(warm):
    clone = warm()
    clone.start()
    code = ("import sys, git_nerve; git_nerve.__version__ = '0.0.0-other'\n"
            "from git_nerve.warm import client\n"
            "print(client.answer(['status', '--json']))\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=clone.work, env=clone.env, capture_output=True,
                         text=True)
    assert res.stdout == "None\n" and res.stderr == ""  # nothing printed: the command answers itself
    assert clone.lines()[-1].split()[1:] == ["direct", "refused:", "another", "git-nerve"]
    wait_until(lambda: not locks.is_held(clone.lock), what="the server of another version stopped")
    assert not clone.sock.exists()


@pytest.mark.parametrize("planted", ["file", "directory"])
def test_something_planted_at_the_socket_is_kept_and_commands_answer(warm, planted):
    clone = warm()
    clone.direct(["status", "--json"])
    clone.sock.parent.mkdir(parents=True, exist_ok=True)
    if planted == "file":
        clone.sock.write_text("a person's file\n", encoding="utf-8")
    else:
        clone.sock.mkdir()
        (clone.sock / "inside").write_text("x", encoding="utf-8")
    _settled(clone)
    for _ in range(2):
        res = clone.git(["worker", "status", "--json"])
        _same(res, clone.direct(["status", "--json"]))
        assert clone.lines()[-1].split()[1] == "direct"
    assert not locks.is_held(clone.lock) and not clone.log.exists()  # no server was even started
    # a server started by hand keeps it too, and stops
    subprocess.run([sys.executable, "-m", "git_nerve.warm_server", "--common", str(clone.common)], cwd=clone.work,
                   env=clone.env, timeout=60, check=True, capture_output=True)
    if planted == "file":
        assert clone.sock.read_text(encoding="utf-8") == "a person's file\n"
    else:
        assert (clone.sock / "inside").read_text(encoding="utf-8") == "x"


def test_a_killed_servers_socket_is_replaced_by_the_next_server(warm):
    clone = warm()
    clone.start()
    pid = clone.server_pid()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not locks.is_held(clone.lock), what="the killed server's lock free")
    assert clone.sock.exists()  # its socket stays: nothing listens
    with pytest.raises(ConnectionRefusedError):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(clone.sock))
    _settled(clone)
    res = clone.git(["worker", "status", "--json"])
    assert clone.lines()[-1].split()[1:] == ["direct", "none"]
    _same(res, clone.direct(["status", "--json"]))
    wait_until(lambda: clone.running() and clone.server_pid() != pid, what="a new server")
    clone.served(["status", "--json"])


def test_it_stops_when_its_package_changes(warm, tmp_path):
    """An upgrade or an edit of git-nerve's files: the running server would answer with the old code; it stops.
    On a copy of the package of its own (commands and server import it through PYTHONPATH): an edit of the real
    one would stop the servers of the tests running beside this one."""
    copy = tmp_path / "pkg"
    shutil.copytree(Path(__file__).resolve().parent.parent / "git_nerve", copy / "git_nerve",
                    ignore=shutil.ignore_patterns("__pycache__"))
    clone = warm(PYTHONPATH=str(copy))
    clone.start()
    res = clone.served(["status", "--json"])
    assert res.returncode == 0
    ps = subprocess.run(["ps", "-o", "args=", "-p", str(clone.server_pid())], capture_output=True, text=True).stdout
    assert "git_nerve.warm_server" in ps
    edited = copy / "git_nerve" / "demo" / "scripted_model" / "__init__.py"
    st = edited.stat()
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    wait_until(lambda: not locks.is_held(clone.lock), what="the server of the changed package stopped")
    assert "its package changed" in clone.log.read_text(encoding="utf-8")
    res = clone.git(["worker", "status", "--json"])
    assert res.returncode == 0 and clone.lines()[-1].split()[1:] == ["direct", "none"]


def _on_a_terminal(clone: Clone, args: list[str], **extra) -> tuple[int, bytes, bytes]:
    """(exit code, stdout, what reached the terminal) of the command with its stderr on a pseudo-terminal."""
    import pty

    main, side = pty.openpty()
    try:
        proc = subprocess.run(["git", "worker", *args], cwd=clone.work, env={**clone.env, **extra},
                              stdout=subprocess.PIPE, stderr=side, timeout=120)
        os.close(side)
        side = -1
        seen = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other side closed: all read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(main)
        if side >= 0:
            os.close(side)
    return proc.returncode, proc.stdout, seen


def test_on_a_terminal_the_served_answer_has_the_same_colours(warm):
    clone = warm()
    clone.start()
    for extra in ({"NO_COLOR": ""}, {"NO_COLOR": "1"}):  # (the test environment sets it)
        before = len(clone.lines())
        served = _on_a_terminal(clone, ["show", "nope", "--json"], **extra)
        assert clone.lines()[before:][-1].split()[1] == "served"
        direct = _on_a_terminal(clone, ["show", "nope", "--json"], NERVE_WARM="0", **extra)
        assert served == direct and served[0] == 2
        assert (b"\x1b[" in served[2]) is (not extra["NO_COLOR"])  # red `error:` on a terminal, none with NO_COLOR


def test_many_commands_at_once_are_each_answered_alike(warm):
    import concurrent.futures

    clone = warm()
    clone.start()
    _settled(clone)
    want = clone.direct(["status", "--json"])
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: clone.git(["worker", "status", "--json"]), range(16)))
    for res in got:
        _same(res, want)
    assert sum(1 for ln in clone.lines() if ln.split()[1] == "served") >= 16


def _aged(out: bytes) -> bytes:
    """The radar result's age when printed (`age_s`, in tenths of a second) differs between two runs."""
    return re.sub(rb'"age_s": [0-9.]+', b'"age_s": _', out)


def _same_radar(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    assert (a.returncode, _aged(a.stdout), a.stderr) == (b.returncode, _aged(b.stdout), b.stderr)


def _pairs(res: subprocess.CompletedProcess) -> list[tuple[str, str, str]]:
    assert res.returncode == 0, res
    return [(p["a"], p["b"], p["kind"]) for p in json.loads(res.stdout)["pairs"]]


def _edit_line(clone: Clone, task: str, word: str, hooks: bool = False) -> None:
    """``task`` edits the line every task shares and commits it (our hooks skipped unless ``hooks``: then the
    post-commit hook asks the radar for a recompute in the background)."""
    wt = clone.wt(task)
    (wt / "src" / "app.py").write_text(f"def greet(name):\n    return f'{word} {{name}}'\n", encoding="utf-8")
    skip = [] if hooks else ["-c", "core.hooksPath=/dev/null"]
    res = subprocess.run(["git", *skip, "commit", "-qam", f"{task}: {word}"], cwd=wt, env=clone.env,
                         capture_output=True, timeout=120)
    assert res.returncode == 0, res


def test_conflicts_json_is_served_from_the_radars_last_result(warm):
    """An orchestrator polls `conflicts --json` to see new conflicts: served, with the command's own bytes, with no
    pairs, with a conflict pair between two tasks, and from a worktree's subdirectory."""
    clone = warm()
    clone.start()
    assert clone.direct(["conflicts", "--refresh", "--json"]).returncode == 0
    served = clone.served(["conflicts", "--json"])
    assert _pairs(served) == []
    _same_radar(served, clone.direct(["conflicts", "--json"]))
    _edit_line(clone, "t1", "hi")
    _edit_line(clone, "t2", "howdy")
    assert clone.direct(["conflicts", "--refresh"]).returncode == 0
    for cwd in (clone.work, clone.wt("t3") / "src"):
        served = clone.served(["conflicts", "--json"], cwd)
        assert _pairs(served) == [("t1", "t2", "conflict")]
        _same_radar(served, clone.direct(["conflicts", "--json"], cwd))
    before = len(clone.lines())
    for args in (["conflicts"], ["conflicts", "--json", "--refresh"]):  # the text, a recompute: never asked
        assert clone.git(["worker", *args]).returncode == 0
    assert len(clone.lines()) == before


def test_a_new_conflict_from_a_commit_is_served_once_the_background_recompute_is_done(warm):
    clone = warm()
    _edit_line(clone, "t1", "hi")
    assert clone.direct(["conflicts", "--refresh"]).returncode == 0
    clone.start()
    assert _pairs(clone.served(["conflicts", "--json"])) == []
    _edit_line(clone, "t2", "howdy", hooks=True)  # the post-commit hook: a recompute in the background
    wait_until(lambda: _pairs(clone.served(["conflicts", "--json"])), 60, interval=0.2,
               what="the new conflict served")
    served = clone.served(["conflicts", "--json"])
    assert _pairs(served) == [("t1", "t2", "conflict")]
    _same_radar(served, clone.direct(["conflicts", "--json"]))


def _timeless(out: bytes) -> bytes:
    """A result computed by two runs: when, how old and how long differ."""
    return re.sub(rb'"(at|age_s|duration_s)": ("[^"]*"|[0-9.]+)', rb'"\1": _', out)


def test_conflicts_json_needing_a_recompute_is_answered_by_the_command_itself(warm):
    """The radar never computed: a recompute is long git work that would hold the warm reader (and every status
    behind it), so the reader refuses before printing anything and the command recomputes itself."""
    clone = warm()
    clone.start()
    before = len(clone.lines())
    res = clone.git(["worker", "conflicts", "--json"])
    said = clone.lines()[before:]
    assert [ln.split(None, 1)[1] for ln in said] == ["direct refused: the radar needs a recompute"], said
    # the command computed it (computed > 0): the reader did not (then the command would have read its result)
    data = json.loads(res.stdout)
    assert res.returncode == 0 and res.stderr == b"" and data["computed"] > 0 and data["pairs"] == []
    (clone.common / "nerve" / "radar.json").unlink()  # never computed again: the same answer, directly
    direct = clone.direct(["conflicts", "--json"])
    assert (res.returncode, _timeless(res.stdout), res.stderr) == (direct.returncode, _timeless(direct.stdout),
                                                                  direct.stderr)
    assert clone.running()  # the reader is still there, and answers now that the result needs no recompute
    _same_radar(clone.served(["conflicts", "--json"]), clone.direct(["conflicts", "--json"]))


def test_conflicts_json_after_other_machines_footprints_changed_is_answered_by_the_command_itself(warm):
    """Shared mode: a sync that brought other machines' footprints or claims makes the radar's pairs across machines
    out of date (radar/remote.stale); the warm reader refuses, the command recomputes, and the reader answers the
    next poll."""
    from git_nerve.bus import shared
    from git_nerve.bus.connection import Bus

    clone = warm()
    assert clone.direct(["conflicts", "--refresh"]).returncode == 0
    clone.start()
    clone.served(["conflicts", "--json"])
    with Bus(clone.common / "nerve" / "bus.db") as bus, bus.write() as conn:
        shared.ensure(conn)  # what the first sync makes: the remote inputs' stamp is no longer the result's
    before = len(clone.lines())
    res = clone.git(["worker", "conflicts", "--json"])
    assert [ln.split(None, 1)[1] for ln in clone.lines()[before:]] == ["direct refused: the radar needs a recompute"]
    data = json.loads(res.stdout)  # recomputed by the command (a result read as it is counts no pair either way)
    assert res.returncode == 0 and data["computed"] + data["reused"] > 0
    _same_radar(clone.served(["conflicts", "--json"]), clone.direct(["conflicts", "--json"]))
