"""The agent's commands without click (issue 27): `git worker start`, `done`, `status --json`, `show T --json` and
`conflicts --json` with plain arguments take entry.py's click-free path and print and exit exactly as their click
commands do; and a spawn's checkout (the CPU-heavy `git worktree add`) yields the CPU to the short commands agents run
meanwhile."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from conftest import git
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)
from git_nerve.git.cli import BULK_NICENESS


def _worker(cwd: Path, *args: str, env: dict | None = None, tty: bool = False) -> tuple[int, str, str]:
    env = {**os.environ, **(env or {})}
    if not tty:
        proc = subprocess.run(["git", "worker", *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)
        return proc.returncode, proc.stdout, proc.stderr
    main, side = pty.openpty()  # stdout a terminal: colours on unless NO_COLOR
    proc = subprocess.Popen(["git", "worker", *args], cwd=cwd, stdout=side, stderr=subprocess.PIPE, env=env)
    os.close(side)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), out.decode().replace("\r\n", "\n"), err


def _same(data):
    """Timestamps and ages differ between two runs one after the other."""
    if isinstance(data, dict):
        return {k: _same(v) for k, v in data.items() if not k.endswith(("_at", "heartbeat", "activity", "port", "age", "tip"))}
    if isinstance(data, list):
        return [_same(v) for v in data]
    return data


def _norm(out: str) -> str:
    try:
        return json.dumps(_same(json.loads(out)), sort_keys=True)
    except ValueError:
        return out


def _both(work: Path, args: list[str], click_extra: list[str], *, cwd_of=None, env=None, tty=False):
    """``args`` on the fast path (task ``fast``) and on click's (task ``click``, ``click_extra`` appended: a
    repeated option only click reads), names swapped back: (code, out, err) of each."""
    seen = []
    for name, extra in (("fast", []), ("click", click_extra)):
        argv = [a.replace("{t}", name) for a in args] + [a.replace("{t}", name) for a in extra]
        cwd = cwd_of(name) if cwd_of else work
        code, out, err = _worker(cwd, *argv, env={**(env or {}), "PYTHONPROFILEIMPORTTIME": "1"}, tty=tty)
        imported = [ln.rsplit("|", 1)[1].strip() for ln in err.splitlines() if ln.startswith("import time:")]
        err = "".join(ln + "\n" for ln in err.splitlines() if not ln.startswith("import time:"))
        if code == 0:  # (an error meets click's own handler on both paths)
            assert ("click" in imported) == (name == "click"), (args, name)
        seen.append((code, _norm(out.replace("click", "fast")), err.replace("click", "fast")))
    return seen


def _spawned(work: Path, *names: str) -> dict[str, Path]:
    wts = {}
    for name in names:
        code, out, err = _worker(work, "spawn", name, "--no-fetch", "--json")
        assert code == 0, err
        wts[name] = Path(json.loads(out)["worktree"])
    return wts


def test_start_done_status_and_show_json_run_without_click(repo):
    wt = _spawned(repo.work, "t1")["t1"]
    git(wt, "commit", "-q", "--allow-empty", "-m", "work")
    for cwd, args in ((wt, ["start"]), (repo.work, ["status", "--json"]), (wt, ["done", "--json"]),
                      (repo.work, ["show", "t1", "--json"])):
        code, _out, err = _worker(cwd, *args, env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert code == 0, err
        imported = [ln.rsplit("|", 1)[1].strip() for ln in err.splitlines() if ln.startswith("import time:")]
        assert "git_nerve.worker.lifecycle" in imported, args  # it did the work
        assert not [m for m in imported if m == "click" or m.startswith("click.")], args


def test_the_click_free_verbs_print_and_exit_as_the_click_commands_do(repo):
    work = repo.work
    wts = _spawned(work, "fast", "click")
    in_wt = wts.__getitem__
    again, twice = ["--task", "{t}"], ["--task", "{t}"] * 2  # --task repeated: only click's path reads that
    cases = [  # (args, run in the task's worktree, the extra arguments that send it click's way)
        (["start", "--task", "{t}"], False, again, {"NO_COLOR": ""}, True),  # ASSIGNED -> WORKING, on a terminal: the colours
        (["start"], True, twice, {"NO_COLOR": "1"}, True),  # already WORKING: a warning; NO_COLOR on a terminal
        (["start", "--json"], True, twice, {}, False),
        (["start", "--task", "nope"], True, ["--task", "nope"], {}, False),  # unknown task: exit 2, one line
        (["done"], True, twice, {}, False),  # no commits of its own: refused
        (["done", "--allow-empty", "--json"], True, twice, {}, False),  # IN_REVIEW
        (["done", "--task={t}", "--allow-empty"], False, again, {}, False),  # already
        (["start"], True, twice, {}, False),  # IN_REVIEW -> WORKING is not a transition: exit 3
    ]
    for args, in_worktree, extra, env, tty in cases:
        fast, slow = _both(work, args, extra, cwd_of=in_wt if in_worktree else None, env=env, tty=tty)
        assert fast == slow, args
        if tty and not env["NO_COLOR"]:
            assert "\x1b[1m" in fast[1], fast  # the colours were on: the same codes both ways
    assert _worker(work, "start")[0] == 2  # outside a task's worktree: click's usage error, both ways alike
    status_fast = _worker(work, "status", "--json")
    assert (status_fast[0], _norm(status_fast[1])) == (0, _norm(_worker(work, "status", "--json", "--json")[1]))
    assert _norm(_worker(work, "status", "--stale", "--json")[1]) == _norm(
        _worker(work, "status", "--stale", "--json", "--stale")[1])
    for task in ("fast", "nope"):  # show --json, of a task and of no task (exit 2): the same bytes both ways
        assert _worker(work, "show", task, "--json") == _worker(work, "show", task, "--json", "--json")
    states = {r["task_id"]: r["state"] for r in json.loads(status_fast[1])}
    assert states == {"fast": "IN_REVIEW", "click": "IN_REVIEW"}


def _aged(out: str) -> str:
    """The radar result's age when printed (`age_s`, in tenths of a second) differs between two runs."""
    return re.sub(r'"age_s": [0-9.]+', '"age_s": _', out)


def test_conflicts_json_runs_without_click_and_prints_as_the_click_command(repo):
    """An orchestrator polls `conflicts --json` to see new conflicts: the radar's last result, without click or
    pygit2; the same stdout, stderr and exit code as click's path (a repeated --json sends it there), from the main
    checkout, a worktree's subdirectory, and outside any repository (exit 2, one line)."""
    work = repo.work
    wts = _spawned(work, "t1", "t2", "t3")
    for name, word in (("t1", "hi"), ("t2", "howdy")):  # the same line, committed in both: a conflict pair
        (wts[name] / "src" / "app.py").write_text(f"def greet(name):\n    return f'{word} {{name}}'\n")
        git(wts[name], "-c", "core.hooksPath=/dev/null", "commit", "-qam", word)  # no background recompute
    assert _worker(work, "conflicts", "--refresh")[0] == 0
    for cwd in (work, wts["t3"] / "src", work.parent):
        env = {"PYTHONPROFILEIMPORTTIME": "1"}
        fast, slow = (_worker(cwd, "conflicts", *args, env=env) for args in (["--json"], ["--json", "--json"]))
        loaded = [[ln.rsplit("|", 1)[1].strip() for ln in err.splitlines() if ln.startswith("import time:")]
                  for _code, _out, err in (fast, slow)]
        if cwd != work.parent:
            assert fast[0] == 0 and "click" in loaded[1], fast
            assert not {"click", "pygit2"} & set(loaded[0]), cwd
            pairs = [(p["a"], p["b"], p["kind"]) for p in json.loads(fast[1])["pairs"]]
            assert pairs == [("t1", "t2", "conflict")]
        else:
            assert fast[0] == 2 and "not a git repository" in fast[2] and fast[1] == ""
        quiet = ["".join(ln + "\n" for ln in err.splitlines() if not ln.startswith("import time:"))
                 for _code, _out, err in (fast, slow)]
        assert (fast[0], _aged(fast[1]), quiet[0]) == (slow[0], _aged(slow[1]), quiet[1]), cwd


def test_a_spawns_checkout_runs_at_a_lower_priority_than_the_agents_commands(repo):
    """The `git worktree add` of a spawn (thousands of files on a real codebase) runs niced, so the `start` and
    `heartbeat` of agents already working are not queued behind it for a CPU."""
    seen = repo.work.parent / "niceness"
    hook = Path(git(repo.work, "rev-parse", "--git-path", "hooks").strip())
    hook = hook if hook.is_absolute() else repo.work / hook
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "post-checkout").write_text(f"#!/bin/sh\n{sys.executable} -c 'import os; print(os.nice(0))' > '{seen}'\n")
    (hook / "post-checkout").chmod(0o755)
    assert _worker(repo.work, "spawn", "t1", "--no-fetch")[0] == 0
    assert int(seen.read_text()) == min(19, os.nice(0) + BULK_NICENESS)


def test_a_status_after_many_spawns_walks_a_few_new_worktrees_not_all(repo):
    """Each worktree's disk_bytes is a walk of every file in it: a status right after many spawns walks two of
    them (the next status the next two; each is then cached), so an orchestrator's poll stays short."""
    _spawned(repo.work, "t1", "t2", "t3", "t4")

    def measured() -> list[str]:
        code, out, err = _worker(repo.work, "status", "--json")
        assert code == 0, err
        return sorted(r["task_id"] for r in json.loads(out) if r["disk_bytes"] is not None)

    assert len(measured()) == 2
    assert measured() == ["t1", "t2", "t3", "t4"]
    assert "Disk:" in _worker(repo.work, "show", "t4")[1]  # one task's `show` measures it


def test_show_without_an_id_inside_a_tasks_worktree(repo):
    """`git worker show` infers the task as start, done and thread do (issue 37): the click-free `show --json`, click's
    text, from a subdirectory; outside a task's worktree, one line and exit 2."""
    assert _worker(repo.work, "spawn", "solo", "-d", "Say hello", "--no-fetch")[0] == 0
    wt = repo.work.parent / f"{repo.work.name}.worktrees" / "solo"
    code, out, err = _worker(wt, "show", "--json")
    assert code == 0, err
    assert json.loads(out)["worker"]["task_id"] == "solo"
    assert _norm(out) == _norm(_worker(repo.work, "show", "solo", "--json")[1])
    code, out, err = _worker(wt / "src", "show")
    assert code == 0 and out.startswith("solo  ASSIGNED") and "Say hello" in out, (out, err)
    for args in (("show",), ("show", "--json")):
        code, out, err = _worker(repo.work, *args)
        assert (code, out) == (2, ""), (args, out, err)
        assert err.strip().splitlines() == ["error: not inside a worker's worktree (no .worker-ctx.json); "
                                            "pass TASK_ID (a task id)"], args
