"""Hostile input to every command: bad task ids, strange text, broken buses,
read-only and full disks, odd repositories.

Each refusal is one clear error line with the documented exit code and
leaves everything as it was (bus rows, refs, worktrees, files); each
accepted strange string comes back byte for byte.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
import reliability_support as rs

from fixtures.repos import build
from fixtures.repos import worker as wfx

#: task ids no command may accept (and none may act on)
BAD_IDS = {
    "slash": "a/b",
    "dotdot": "../x",
    "dots-inside": "a..b",
    "space": "has space",
    "dash": "-rf",
    "unicode": "tâche",
    "long": "x" * 300,
    "empty": "",
    "newline": "a\nb",
    "shell": "$(touch PWNED)",
    "lock-suffix": "t.lock",
    "nul": "a\x00b",
}

#: every command that names a task, with {id} where the id goes
TASK_COMMANDS = {
    "spawn": ("worker", ["spawn", "--", "{id}"]),
    "show": ("worker", ["show", "--", "{id}"]),
    "approve": ("worker", ["approve", "--", "{id}"]),
    "request-changes": ("worker", ["request-changes", "--", "{id}"]),
    "merge": ("worker", ["merge", "--", "{id}"]),
    "cancel": ("worker", ["cancel", "--", "{id}"]),
    "retry": ("worker", ["retry", "--", "{id}"]),
    "start": ("worker", ["start", "--task", "{id}"]),
    "done": ("worker", ["done", "--task", "{id}"]),
    "heartbeat": ("worker", ["heartbeat", "--task", "{id}"]),
    "fail": ("worker", ["fail", "why", "--task", "{id}"]),
    "run": ("worker", ["run", "--task", "{id}", "--", "touch", "RAN"]),
    "thread": ("nerve", ["thread", "--", "{id}"]),
    "post": ("nerve", ["post", "--task", "{id}", "--role", "tester", "hello"]),
    "tell": ("nerve", ["tell", "--task", "{id}", "hello"]),
    "workflow-run": ("nerve", ["run", "develop", "--task", "{id}"]),
}


def fill(argv: list[str], task_id: str) -> list[str]:
    return [a.replace("{id}", task_id) for a in argv]


def state_of(work: Path) -> dict:
    """What a refused command must leave exactly as it was."""
    wt_root = work.parent / f"{work.name}.worktrees"
    return {
        "bus": rs.dump_bus(work),
        "refs": rs.refs(work),
        "worktrees": rs.worktree_list(work),
        "dirs": sorted(p.name for p in wt_root.iterdir()) if wt_root.is_dir() else [],
    }


def planted(root: Path) -> list[Path]:
    """Files a shell would have created from the hostile strings."""
    return [p for p in root.rglob("*") if p.name.startswith(("PWNED", "RAN"))]


def error_problem(res, code: int) -> str | None:
    """None when ``res`` is one clear error line with exit ``code``."""
    lines = [ln for ln in res.err.splitlines() if ln.strip()]
    if res.code != code:
        return f"exit {res.code}, expected {code}: {res.err.strip()[-300:]!r}"
    if "Traceback" in res.err:
        return f"traceback: {res.err[-500:]}"
    mine = [ln for ln in lines if ln.startswith("error: ")]
    clicks = [ln for ln in lines if ln.startswith("Error: ")]
    if len(mine) + len(clicks) != 1:
        return f"expected one error line, got: {res.err.strip()[-500:]!r}"
    if mine and len(lines) != 1:
        return f"more than the error line: {res.err.strip()[-500:]!r}"
    return None


def invoke(gw, gn, prog: str, argv: list[str], cwd: Path, **kw):
    return (gw if prog == "worker" else gn)(argv, cwd, **kw)


@pytest.fixture
def spawned(repo):
    """``repo`` with task t1 spawned (ASSIGNED); its hooks are installed."""
    wfx.spawn(repo.work, "t1")
    return repo


# -- task ids ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(TASK_COMMANDS))
def test_bad_task_ids_are_refused_and_change_nothing(spawned, gw, gn, command, tmp_path):
    prog, argv = TASK_COMMANDS[command]
    work = spawned.work
    failures = []
    for name, bad in BAD_IDS.items():
        before = state_of(work)
        res = invoke(gw, gn, prog, fill(argv, bad), work)
        problem = error_problem(res, 2)
        if problem:
            failures.append(f"{name}: {problem}")
        if state_of(work) != before:
            failures.append(f"{name}: the command changed the bus, refs or worktrees")
        if planted(tmp_path):
            failures.append(f"{name}: a shell ran: {planted(tmp_path)}")
    assert not failures, "\n".join(failures)


def test_a_leading_dash_without_separator_is_a_usage_error(spawned, gw):
    before = state_of(spawned.work)
    res = gw(["spawn", "-rf"], spawned.work)
    assert error_problem(res, 2) is None, res
    assert state_of(spawned.work) == before


def test_ids_that_collide_after_case_folding(spawned, gw):
    work = spawned.work
    failures = []
    wfx.spawn(work, "Mixed-Case")
    for other in ("T1", "mixed-case", "MIXED-CASE"):
        before = state_of(work)
        res = gw(["spawn", other], work)
        if error_problem(res, 2) or "collides" not in res.err:
            failures.append(f"{other}: {res}")
        if state_of(work) != before:
            failures.append(f"{other}: changed something")
    # the ids that fold together are refused by every command addressing them, too
    for argv in (["approve", "T1"], ["show", "T1"], ["start", "--task", "T1"]):
        res = gw(argv, work)
        if error_problem(res, 2):
            failures.append(f"{argv}: {res}")
    assert not failures, "\n".join(failures)


def test_the_longest_valid_id_works_end_to_end(repo, gw):
    tid = "a" * 64
    assert gw(["spawn", tid], repo.work).code == 0
    wt = wfx.worktree(repo.work, tid)
    build.commit_file(wt, "f.txt", "x\n", "work")
    for argv, cwd in ((["start"], wt), (["done"], wt), (["approve", tid], repo.work), (["merge", tid], repo.work)):
        res = gw(argv, cwd)
        assert res.code == 0, (argv, res)
    assert wfx.state(repo.work, tid) == "COMPLETED"


# -- text ----------------------------------------------------------------------------------------------

TEXTS = {
    "newlines": "first line\nsecond line\n\n  indented third\r\nwindows line",
    "shell": "$(touch PWNED1) `touch PWNED2`; touch PWNED3 && echo x > PWNED4 | cat; '\"\\ $HOME *",
    "unicode": "héllo wörld ✓ 日本語 \u202eevil\u202c emoji 🎉",
    "nul": "before\x00after",
    "megabyte": ("0123456789abcdef" * 64 + "\n") * 1024,
}


def _task_in(work: Path, task_id: str, state: str) -> None:
    """Spawn ``task_id`` and move it to ``state`` on the bus (the text commands below touch no git)."""
    from git_nerve.worker import transitions
    from git_nerve.worker.states import State

    wfx.spawn(work, task_id)
    path = {"ASSIGNED": [], "WORKING": ["WORKING"], "IN_REVIEW": ["WORKING", "IN_REVIEW"]}[state]
    with wfx.opened(work) as repo:
        prev = State.ASSIGNED
        for step in path:
            transitions.transition(repo.bus, task_id, State(step), allowed_from=[prev], verb="test")
            prev = State(step)


def _last_round(work: Path, task_id: str):
    from git_nerve.bus import rounds

    with rs.bus_conn(work) as conn:
        last = rounds.last_round(conn, task_id)
        return rounds.load(conn, task_id, [last])[0] if last else None


def _payload(work: Path, task_id: str, kind: str) -> dict:
    return [m.payload for m in rs.all_messages(work) if m.task_id == task_id and m.kind == kind][-1]


#: (task state needed, prog, argv with {tid} and {text}, how to read the text back)
TEXT_SLOTS = {
    "spawn-description": (None, "worker", ["spawn", "{tid}", "-d", "{text}"], lambda w, t: wfx.row(w, t).description),
    "approve-comment": ("IN_REVIEW", "worker", ["approve", "{tid}", "--comment", "{text}"],
                        lambda w, t: _last_round(w, t).content),
    "request-changes-comment": ("IN_REVIEW", "worker", ["request-changes", "{tid}", "--comment", "{text}"],
                                lambda w, t: _payload(w, t, "changes_requested")["comment"]),
    "cancel-reason": ("WORKING", "worker", ["cancel", "{tid}", "--reason", "{text}"],
                      lambda w, t: _payload(w, t, "task_failed")["reason"]),
    "fail-reason": ("WORKING", "worker", ["fail", "{text}", "--task", "{tid}"],
                    lambda w, t: _payload(w, t, "task_failed")["reason"]),
    "heartbeat-status": ("WORKING", "worker", ["heartbeat", "--task", "{tid}", "--status", "{text}"],
                         lambda w, t: wfx.row(w, t).heartbeat_status),
    "post-content": ("WORKING", "nerve", ["post", "--task", "{tid}", "--role", "tester", "--", "{text}"],
                     lambda w, t: _last_round(w, t).content),
    # a note is trimmed of surrounding blank space, as the tell parser reads it
    "tell-note": ("WORKING", "nerve", ["tell", "--task", "{tid}", "--kind", "note", "--", "{text}"],
                  lambda w, t: _last_round(w, t).content, str.strip),
}


@pytest.mark.parametrize("slot", sorted(TEXT_SLOTS))
def test_strange_text_is_kept_exactly_or_refused_cleanly(repo, gw, gn, slot, tmp_path):
    state, prog, argv, read_back, *norm = TEXT_SLOTS[slot]
    expected = norm[0] if norm else (lambda text: text)
    work = repo.work
    failures = []
    for name, text in TEXTS.items():
        tid = f"t-{name}"
        if state:
            _task_in(work, tid, state)
        before = state_of(work)
        res = invoke(gw, gn, prog, [a.replace("{tid}", tid).replace("{text}", text) for a in argv], work)
        if res.code == 0:
            got = read_back(work, tid)
            if got != expected(text):
                failures.append(f"{name}: accepted but stored {len(got or '')} chars != {len(text)}: {str(got)[:80]!r}")
            for view in (["show", tid, "--json"], ["show", tid], ["status"]):
                shown = gw(view, work)
                if shown.code != 0 or "Traceback" in shown.err:
                    failures.append(f"{name}: `git worker {' '.join(view)}` then failed: {shown}")
        else:
            problem = error_problem(res, 2)
            if problem:
                failures.append(f"{name}: {problem}")
            if state_of(work) != before:
                failures.append(f"{name}: refused, but changed the bus, refs or worktrees")
            if name not in ("nul",):
                failures.append(f"{name}: refused ordinary text: {res.err.strip()!r}")
        if planted(tmp_path):
            failures.append(f"{name}: a shell ran: {planted(tmp_path)}")
    assert not failures, "\n".join(failures)


def test_a_description_with_nul_is_refused_before_anything_exists(repo, gw):
    before = state_of(repo.work)
    res = gw(["spawn", "t1", "-d", "a\x00b"], repo.work)
    assert error_problem(res, 2) is None, res
    assert state_of(repo.work) == before


def test_hostile_description_survives_the_whole_lifecycle(repo, gw):
    text = TEXTS["shell"] + "\n" + TEXTS["unicode"]
    wt = Path(wfx.drive(repo.work, "t1", "ASSIGNED"))
    with wfx.opened(repo.work) as r:
        from git_nerve.bus import workers

        with r.bus.write() as conn:
            workers.update(conn, "t1", description=text)
    build.commit_file(wt, "f.txt", "x\n", "work")
    for argv, cwd in ((["start"], wt), (["done"], wt), (["approve", "t1"], repo.work), (["merge", "t1"], repo.work)):
        assert gw(argv, cwd).code == 0, argv
    body = rs.git(repo.work, "log", "-1", "--format=%B", "main")
    assert text.strip() in body
    assert not planted(repo.work.parent)


# -- broken buses --------------------------------------------------------------------------------------

#: every command, run against an existing task t1 where it names one
ALL_COMMANDS = [(p, fill(a, "t1")) for p, a in TASK_COMMANDS.values()] + [
    ("worker", ["spawn", "t2"]), ("worker", ["status"]), ("worker", ["status", "--json"]),
    ("nerve", ["outbox"]), ("nerve", ["init"]),
]


def _garbage(bus: Path) -> None:
    bus.write_bytes(b"this is not a database, it is a note someone left\n" * 100)


def _truncated(bus: Path) -> None:
    data = bus.read_bytes()
    bus.write_bytes(data[: len(data) // 2] if len(data) > 8192 else data[:4096])


def _newer(bus: Path) -> None:
    conn = sqlite3.connect(bus)
    try:
        conn.execute("PRAGMA user_version = 99")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # into the file itself, not the WAL
    finally:
        conn.close()


def _fill_and_checkpoint(work: Path) -> None:
    """Give the bus several pages (so truncating it cuts real data) and fold the WAL in."""
    for i in range(3):
        _task_in(work, f"filler-{i}", "WORKING")
    with rs.bus_conn(work) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.mark.parametrize("damage", [_garbage, _truncated, _newer], ids=["garbage", "truncated", "newer-schema"])
def test_every_command_on_a_broken_bus_is_exit_5_and_leaves_it_byte_for_byte(repo, gw, gn, damage):
    work = repo.work
    wfx.spawn(work, "t1")
    _fill_and_checkpoint(work)
    bus = rs.bus_path(work)
    damage(bus)
    for side in (Path(f"{bus}-wal"), Path(f"{bus}-shm")):
        side.unlink(missing_ok=True)
    data = bus.read_bytes()
    refs, wts = rs.refs(work), rs.worktree_list(work)
    failures = []
    for prog, argv in ALL_COMMANDS:
        res = invoke(gw, gn, prog, argv, work)
        if argv[0] in ("show", "thread", "status") and damage is _truncated and res.code == 0:
            continue  # a read may still find what it wants in the pages that are left
        problem = error_problem(res, 5)
        if problem:
            failures.append(f"{prog} {' '.join(argv)}: {problem}")
        if bus.read_bytes() != data:
            failures.append(f"{prog} {' '.join(argv)}: the bus file changed")
            bus.write_bytes(data)
        if (rs.refs(work), rs.worktree_list(work)) != (refs, wts):
            failures.append(f"{prog} {' '.join(argv)}: refs or worktrees changed")
    assert not failures, "\n".join(failures)


# -- full disk ------------------------------------------------------------------------------------------

#: commands that write to the bus, on a task in the state they need
WRITERS = [
    (None, "worker", ["spawn", "t2", "-d", "new"]),
    ("ASSIGNED", "worker", ["start", "--task", "t1"]),
    ("WORKING", "worker", ["heartbeat", "--task", "t1", "--status", "busy"]),
    ("IN_REVIEW", "worker", ["approve", "t1", "--comment", "ok"]),
    ("IN_REVIEW", "worker", ["request-changes", "t1", "--comment", "no"]),
    ("WORKING", "worker", ["cancel", "t1"]),
    ("WORKING", "worker", ["fail", "stuck", "--task", "t1"]),
    ("WORKING", "nerve", ["post", "--task", "t1", "--role", "tester", "hello"]),
    ("WORKING", "nerve", ["tell", "--task", "t1", "hello"]),
]


@pytest.mark.parametrize("state,prog,argv", WRITERS, ids=[" ".join(a[:1]) for _, _, a in WRITERS])
def test_a_full_disk_at_the_bus_write_is_exit_5_and_nothing_half_written(repo, gw, gn, monkeypatch, state, prog, argv):
    _task_in(repo.work, "t1", state or "ASSIGNED")
    before = state_of(repo.work)
    monkeypatch.setenv("NERVE_FAULT", "bus.commit:sqlite-full")
    res = invoke(gw, gn, prog, argv, repo.work)
    monkeypatch.delenv("NERVE_FAULT")
    assert error_problem(res, 5) is None, res
    assert "full" in res.err
    assert state_of(repo.work) == before
    assert not rs.orphan_problems(repo.work)


def test_a_full_disk_writing_the_worker_context_rolls_the_spawn_back(repo, gw, monkeypatch):
    wfx.spawn(repo.work, "t0")
    before = state_of(repo.work)
    monkeypatch.delenv("NERVE_DEBUG", raising=False)  # (it turns OSError into a traceback for debugging)
    monkeypatch.setenv("NERVE_FAULT", "ctx.write:enospc")
    res = gw(["spawn", "t1"], repo.work)
    monkeypatch.delenv("NERVE_FAULT")
    assert error_problem(res, 1) is None, res
    assert "No space left on device" in res.err
    assert state_of(repo.work) == before
    assert not rs.orphan_problems(repo.work)
    assert gw(["spawn", "t1"], repo.work).code == 0


# -- read-only .git --------------------------------------------------------------------------------------


def _read_only_runner(git_dir: Path):
    """A function running argv with ``git_dir`` read-only, or None when that cannot be arranged.

    Root ignores file permissions, so as root the directory is bind-mounted
    read-only in a private mount namespace (unshare); otherwise chmod does it.
    """
    if os.geteuid() != 0:
        def chmod_run(argv, cwd):
            modes = {p: p.stat().st_mode for p in [git_dir, *git_dir.rglob("*")] if not p.is_symlink()}
            try:
                for p, m in modes.items():
                    p.chmod(m & ~0o222)
                return rs.run(argv, cwd)
            finally:
                for p, m in modes.items():
                    p.chmod(m)

        return chmod_run
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-m", "true"], capture_output=True, check=False).returncode != 0:
        return None
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@"'

    def ns_run(argv, cwd):
        return rs.run([unshare, "-m", "--propagation", "private", "sh", "-c", script, "sh", str(git_dir), *argv], cwd)

    return ns_run


READ_ONLY_COMMANDS = [
    ["git", "worker", "spawn", "t2"],
    ["git", "worker", "start", "--task", "t1"],
    ["git", "worker", "heartbeat", "--task", "t1"],
    ["git", "worker", "approve", "t1"],
    ["git", "worker", "cancel", "t1", "--cleanup"],
    ["git", "nerve", "post", "--task", "t1", "--role", "r", "hi"],
    ["git", "worker", "status"],
    ["git", "worker", "show", "t1"],
    ["git", "nerve", "thread", "t1"],
]


def test_a_read_only_git_dir_is_one_clear_error_per_command_and_nothing_changes(repo):
    wfx.spawn(repo.work, "t1")
    git_dir = rs.common_dir(repo.work)
    runner = _read_only_runner(git_dir)
    if runner is None:
        pytest.skip("running as root without mount namespaces: a read-only .git cannot be arranged")
    with rs.bus_conn(repo.work) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = state_of(repo.work)
    failures = []
    for argv in READ_ONLY_COMMANDS:
        res = runner(argv, repo.work)
        if res.code == 0 and argv[2] in ("status", "show", "thread"):
            continue  # reading a read-only repository is fine
        if res.code not in (4, 5):
            failures.append(f"{' '.join(argv)}: exit {res.code}: {res.err.strip()[-300:]!r}")
            continue
        problem = error_problem(res, res.code)
        if problem:
            failures.append(f"{' '.join(argv)}: {problem}")
        elif res.code == 5 and "read-only" not in res.err:
            failures.append(f"{' '.join(argv)}: the error does not say what is wrong: {res.err.strip()!r}")
        if state_of(repo.work) != before:
            failures.append(f"{' '.join(argv)}: something changed")
    assert not failures, "\n".join(failures)


# -- odd repositories ----------------------------------------------------------------------------------------


def test_a_repository_without_commits(tmp_path, gw, gn):
    work = tmp_path / "empty"
    build.git(tmp_path, "init", "-q", "-b", "main", str(work))
    res = gw(["spawn", "t1"], work)
    assert error_problem(res, 4) is None and "no commits" in res.err, res
    assert rs.refs(work) == {} and len(rs.worktree_list(work)) == 1
    assert gw(["status"], work).code == 0
    for prog, argv in (("worker", ["approve", "t1"]), ("nerve", ["thread", "t1"])):
        res = invoke(gw, gn, prog, argv, work)
        assert error_problem(res, 2) is None, (argv, res)


def test_a_detached_main_checkout_refuses_new_tasks_but_finishes_old_ones(repo, gw):
    wt = wfx.drive(repo.work, "t1", "WORKING")
    build.commit_file(wt, "f.txt", "x\n", "work")
    rs.git(repo.work, "checkout", "-q", "--detach")
    before = state_of(repo.work)
    res = gw(["spawn", "t2"], repo.work)
    assert error_problem(res, 2) is None and "nerve.integration" in res.err, res
    assert state_of(repo.work) == before
    for argv, cwd in ((["done"], wt), (["approve", "t1"], repo.work), (["merge", "t1"], repo.work)):
        res = gw(argv, cwd)
        assert res.code == 0, (argv, res)
    assert "f.txt" in rs.git(repo.work, "ls-tree", "--name-only", "main")


def test_a_bare_repository_is_refused_with_one_line_and_nothing_written(tmp_path, gw):
    """A bare repository is a remote: spawn refuses it (exit 2, one line) and leaves no bus or worktree behind."""
    src = build.simple(tmp_path / "src").work
    bare = tmp_path / "project.git"
    build.git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    before = sorted(p.relative_to(bare) for p in bare.rglob("*"))
    for argv in (["spawn", "t1"], ["start"], ["done"], ["fail", "why"]):
        res = gw(argv, bare)
        assert error_problem(res, 2) is None, (argv, res)
    assert "bare repository" in gw(["spawn", "t1"], bare).err
    assert sorted(p.relative_to(bare) for p in bare.rglob("*")) == before
    assert not (tmp_path / "project.git.worktrees").exists()


def test_a_path_with_spaces_and_quotes_runs_the_whole_lifecycle_with_hooks(tmp_path, sh):
    root = tmp_path / "my projects" / "it's \"here\""
    work = build.simple(root, name="the project").work
    env = dict(os.environ)
    for argv, cwd in ((["git", "worker", "spawn", "t1", "-d", "spaces"], work),):
        assert sh(argv, cwd, env=env).code == 0
    wt = wfx.worktree(work, "t1")
    assert " " in str(wt)
    res = sh(["git", "worker", "start"], wt)
    assert res.code == 0, res
    (wt / "f.txt").write_text("x\n")
    build.git(wt, "add", "f.txt")
    res = sh(["git", "commit", "-q", "-m", "work in a spaced path"], wt)
    assert res.code == 0 and "warning" not in res.err, res
    assert any(m.kind == "commit" for m in rs.all_messages(work)), "the post-commit hook recorded the commit"
    for argv, cwd in ((["git", "worker", "done"], wt), (["git", "worker", "approve", "t1"], work),
                      (["git", "worker", "merge", "t1"], work)):
        res = sh(argv, cwd)
        assert res.code == 0, (argv, res)
    assert wfx.state(work, "t1") == "COMPLETED"
    assert not rs.orphan_problems(work)
