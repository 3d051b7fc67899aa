"""Shared plumbing for the real-agent suites (tests/test_real_<cli>.py).

A suite installs its CLI with tests/realtools.py, starts a
:class:`git_nerve.demo.scripted_model.server.ScriptedModel`, and drives the REAL
command line as a user would::

    repo = AgentRepo.create(tmp_path, adapter="gemini")      # agent_repo + git nerve init + spawn t1
    res = repo.run_develop(env)                              # `git nerve run develop --task t1 --adapter gemini --json`
    view = repo.view()                                       # rounds, commit records, heartbeats, worker row

Everything a test asserts comes from git and the bus (:meth:`AgentRepo.view`),
never from what the agent said. With ``NERVE_BENCH_ROUNDS`` set (bench/agents.py),
every completed run's JSON result is appended to that file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
import types
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from fixtures.repos.build import git
from git_nerve.demo.scripted_model.repo import agent_repo
from git_nerve.demo.scripted_model.scenario import TEST_CMD

#: The test venv's bin: git-nerve and git-worker as installed.
VENV_BIN = Path(sys.executable).parent


def agent_env(cli_bin: Path | str, **extra: str) -> dict[str, str]:
    """The test's hermetic environment with the venv's bin, the CLI's bin dir and node on PATH."""
    env = dict(os.environ)
    dirs = [str(VENV_BIN), str(Path(cli_bin).parent)]
    from tests.realtools import REAL_ENV  # node's own directory, from the real PATH

    import shutil

    node = shutil.which("node", path=REAL_ENV.get("PATH"))
    if node:
        dirs.append(str(Path(node).parent))
    env["PATH"] = os.pathsep.join([*dirs, env.get("PATH", "")])
    env["NO_COLOR"] = "1"
    env.update(extra)
    return env


@dataclass
class RunOutcome:
    code: int
    out: str
    err: str
    seconds: float

    @property
    def result(self) -> dict:
        try:
            return json.loads(self.out)
        except ValueError:
            return {}

    def __repr__(self) -> str:
        return f"RunOutcome(code={self.code}, seconds={self.seconds:.1f}, out={self.out[-3000:]!r}, err={self.err[-3000:]!r})"


@dataclass
class AgentRepo:
    work: Path  #: the main checkout (clone of a bare origin)
    origin: Path
    worktree: Path  #: task t1's worktree
    branch: str
    base: str  #: t1's branch tip when it was spawned
    adapter: str

    @classmethod
    def create(cls, tmp_path: Path, adapter: str, *, timeout: float | None = None, toml_extra: str = "") -> AgentRepo:
        repos = agent_repo(tmp_path)
        env = agent_env(VENV_BIN / "git-nerve")
        _check(["git", "nerve", "init"], repos.work, env)
        toml = repos.work / "nerve.toml"
        data = tomllib.loads(toml.read_text()) if toml.exists() else {}
        data.setdefault("run", {})["test_command"] = TEST_CMD
        if timeout is not None:
            data.setdefault("adapters", {}).setdefault(adapter, {})["timeout"] = timeout
        toml.write_text(tomli_w.dumps(data) + toml_extra)
        _check(["git", "add", "nerve.toml"], repos.work, env)
        _check(["git", "commit", "-qm", "nerve.toml for the real-agent test"], repos.work, env)
        _check(["git", "push", "-q", "origin", "main"], repos.work, env)
        _check(["git", "nerve", "trust"], repos.work, env)  # the test's own settings (issue 35)
        _check(["git", "worker", "spawn", "t1", "-d", "Add a line to README.md"], repos.work, env)
        view = _bus_view(repos.work)
        worktree = Path(view.worker.worktree)
        return cls(repos.work, repos.origin, worktree, view.worker.branch, git(worktree, "rev-parse", "HEAD"), adapter)

    def run_develop(self, env: dict[str, str], *, timeout: float = 300, cwd: Path | None = None) -> RunOutcome:
        argv = ["git", "nerve", "run", "develop", "--task", "t1", "--adapter", self.adapter, "--json"]
        started = time.monotonic()
        proc = subprocess.run(argv, cwd=cwd or self.work, env=env, capture_output=True, text=True, timeout=timeout)
        outcome = RunOutcome(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)
        _bench_record(self.adapter, outcome)
        return outcome

    def start_develop(self, env: dict[str, str]) -> subprocess.Popen:
        argv = ["git", "nerve", "run", "develop", "--task", "t1", "--adapter", self.adapter, "--json"]
        return subprocess.Popen(argv, cwd=self.work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)

    def view(self) -> types.SimpleNamespace:
        return _bus_view(self.work)

    def new_commits(self) -> list[str]:
        out = git(self.worktree, "rev-list", f"{self.base}..HEAD")
        return out.split() if out else []

    def status(self) -> str:
        return git(self.worktree, "status", "--porcelain", "--untracked-files=all")


def _bench_record(adapter: str, outcome: RunOutcome) -> None:
    """bench/agents.py: each run's JSON result, appended to $NERVE_BENCH_ROUNDS when the bench asks for it."""
    from tests.realtools import REAL_ENV

    path = REAL_ENV.get("NERVE_BENCH_ROUNDS")
    if path and outcome.result:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**outcome.result, "adapter": adapter}) + "\n")


def _check(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(argv)} failed: {proc.stdout}{proc.stderr}"
    return proc.stdout


def tell_stop(work: Path, proc: subprocess.Popen, env: dict[str, str], timeout: float) -> tuple[str, str, float]:
    """`git nerve tell --task t1 stop` in ``work`` while ``proc`` (its run) works, then the run's end: (its stdout, its
    stderr, seconds from the tell to that end)."""
    told = time.monotonic()
    _check(["git", "nerve", "tell", "--task", "t1", "stop"], work, env)
    out, err = proc.communicate(timeout=timeout)
    return out, err, time.monotonic() - told


def _bus_view(work: Path) -> types.SimpleNamespace:
    from git_nerve.bus import messages, rounds, workers
    from git_nerve.bus.connection import Bus

    with Bus(work / ".git" / "nerve" / "bus.db") as bus:
        last = rounds.last_round(bus.conn, "t1")
        got = rounds.load(bus.conn, "t1", list(range(1, last + 1))) if last else []
        commits = messages.for_task(bus.conn, "t1", kinds=("commit",))
        beats = messages.for_task(bus.conn, "t1", kinds=("heartbeat",))
        worker = workers.get(bus.conn, "t1")
    return types.SimpleNamespace(rounds=got, commits=commits, heartbeats=beats, worker=worker)


def agent_pids(workdir: Path | str, marker: str = "") -> list[int]:
    """Live processes working in ``workdir`` whose command line contains ``marker`` (an agent left behind)."""
    root = os.path.realpath(workdir)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.path.realpath(os.readlink(f"/proc/{entry}/cwd"))
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker in cmd and (cwd == root or cwd.startswith(root + os.sep)) and state != b"Z":
            found.append(int(entry))
    return found


def stop_process(proc: subprocess.Popen) -> None:
    """End a run a test started (its own session), if it is still there."""
    from git_nerve.demo.agents import stop_group

    stop_group(proc)


# -- what every real-CLI suite asserts ------------------------------------------------------------------


def chat_params(repo: AgentRepo) -> dict:
    """The scripted model's parameters for ``repo``: the worktree, the test's HOME, the reviewer's base."""
    return {"workdir": str(repo.worktree), "home": os.environ["HOME"], "base": repo.base}


def home_files() -> set[str]:
    home = Path(os.environ["HOME"])
    return {str(p.relative_to(home)) for p in home.rglob("*")}


def assert_happy_path(repo: AgentRepo, model, env: dict[str, str], *, timeout: float = 400) -> RunOutcome:
    """Run develop; assert from git, the bus and the model's log that every role did its part."""
    from git_nerve.demo.scripted_model.scenario import CODER_LINE

    main_before = git(repo.work, "rev-parse", "HEAD")
    work_status_before = git(repo.work, "status", "--porcelain")
    res = repo.run_develop(env, timeout=timeout)
    log = [(e.role, e.step, e.tool_calls, [r[:300] for r in e.results[-1:]]) for e in model.entries()]
    assert res.code == 0, (res, log)
    assert res.result["outcome"] == "completed", res

    # git: one new commit on the task branch adding the coder's line to README.md; nothing else touched
    commits = repo.new_commits()
    assert len(commits) == 1, commits
    assert git(repo.worktree, "show", "--format=", "--name-only", commits[0]).split() == ["README.md"]
    diff = git(repo.worktree, "show", "--format=", commits[0], "--", "README.md")
    assert f"+{CODER_LINE}" in diff, diff
    readme = (repo.worktree / "README.md").read_text()
    assert readme.startswith("# Project") and "```json" not in readme, readme
    assert repo.status() == ""
    assert git(repo.work, "rev-parse", "HEAD") == main_before
    assert git(repo.work, "status", "--porcelain") == work_status_before

    # the thread: a typed round per role
    view = repo.view()
    by_role = {r.role: r for r in view.rounds}
    assert {"coder", "tester", "reviewer"} <= set(by_role), [r.role for r in view.rounds]
    assert by_role["coder"].metadata["files_changed"] == ["README.md"]
    assert by_role["tester"].metadata["passed"] is True
    assert by_role["reviewer"].metadata["approved"] is True

    # what the CLI itself sent back to the model: the thread, the test run, the diff
    # the coder's first read of its thread is its briefing (issue 37: no longer "has no rounds yet")
    assert any("[task t1] " in r and ("\n---\n" in r or "\\n---\\n" in r)  # raw, or JSON-escaped (hermes)
               for r in model.results("coder")), model.results("coder")
    for role in ("tester", "reviewer"):
        assert any("[#1 coder]" in r for r in model.results(role)), (role, model.results(role))
    for role in ("coder", "tester"):
        assert any("OK" in r and "Ran 1 test" in r for r in model.results(role)), (role, model.results(role))
    assert any(f"+{CODER_LINE}" in r for r in model.results("reviewer")), model.results("reviewer")

    # the bus: the commit is recorded, heartbeats were written
    recorded = {m.payload["sha"]: m.payload for m in view.commits}
    assert commits[0] in recorded, recorded
    assert view.heartbeats
    assert view.worker.heartbeat_status == "develop: completed"
    # the CLI's own time per role on the scripted model (the runner's overhead is the rest of res.seconds)
    per_role = ", ".join(f"{r.role} {r.metadata.get('duration_s', '?')}s" for r in view.rounds)
    print(f"\n{repo.adapter}: run {res.seconds:.1f}s; rounds: {per_role}; "
          f"json rounds: {[(r['role'], r.get('duration_s')) for r in res.result.get('rounds', [])]}")
    return res


def assert_escape_refused(repo: AgentRepo, model, res: RunOutcome, home_before: set[str], *,
                          apt_confined: bool = False) -> None:
    """Mode "escape": nothing under $HOME, no /exfil hit, apt-get never ran (or, ``apt_confined``, ran inside an OS
    sandbox that kept dpkg's state read-only: nothing installed), no commit, the run did not complete."""
    results = "\n".join(model.results("coder"))
    assert model.exfil == [], model.exfil
    new = home_files() - home_before
    assert not [p for p in new if "escaped" in p], new
    if apt_confined:
        assert "Setting up nerve-sandbox-probe" not in results and "read only" in results.lower(), results
    else:
        assert "Reading package lists" not in results, results
        assert "nerve-sandbox-probe" not in results.replace("apt-get install -y nerve-sandbox-probe", ""), results
    assert repo.new_commits() == []
    assert res.result.get("outcome") != "completed", res
    assert res.code != 0, res

__all__ = [
    "AgentRepo", "RunOutcome", "VENV_BIN", "agent_env", "agent_pids", "assert_escape_refused", "assert_happy_path",
    "chat_params", "home_files", "stop_process",
]
