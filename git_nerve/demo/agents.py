"""`git nerve demo`: the whole product, with real agent processes at work.

Nothing is needed but python3 and git: the agents are git-nerve's own agent
(:mod:`git_nerve.agent`, a real separate process per role, driven by the
``nerve_agent`` adapter) talking to the deterministic scripted model
(:mod:`git_nerve.demo.scripted_model`, mode ``demo``) that this command starts on
127.0.0.1 and stops at the end. With ``--agent NAME`` the agents are that real
CLI instead (the user's own install and login), and no model is started.

Every step prints the command a person would type and runs it for real:
three tasks spawned; their ``develop`` workflows running at once in the
background while ``git worker status`` shows each commit as it lands; the
conflict radar catching the two tasks that change the same line and telling
both (one agent reads it in its thread and moves its change); a person's
``git nerve tell`` note reaching a running agent (``git nerve outbox``: delivered,
then acted on) and a ``stop`` ending that run with its commits kept;
``git nerve knowledge query``; and the merge queue merging what passes its check.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from ..stopping import Stopped
from .fast import DemoFailed, _commands, _env, _run, _say, _shown, seed_repository

RATE, LABEL, README = "tax-rate", "tax-label", "readme"
TEST_COMMAND = "python3 -m unittest -v"
#: how long the three workflows may take together before the demo gives up
RUNS_DEADLINE = 360.0

PRICES = "TAX_RATE = 0.20\n\n\ndef price_with_tax(net):\n    return round(net * (1 + TAX_RATE), 2)\n"
TESTS = '''import unittest

from prices import price_with_tax


class PriceTest(unittest.TestCase):
    def test_tax_is_added(self):
        self.assertGreater(price_with_tax(100), 100)


if __name__ == "__main__":
    unittest.main()
'''


def _console(gn: list[str], root: Path, env: dict[str, str], started: list) -> subprocess.Popen | None:
    """Start `git nerve console` when this git-nerve has it; print its URL. None when it is not available.
    ``started`` gets the process the moment it exists (a signal right after its URL is printed still stops it)."""
    import importlib.util

    if importlib.util.find_spec("git_nerve.console") is None:
        click.echo("  git nerve console is not available in this version of git-nerve; the demo goes on without it")
        return None
    click.echo(f"$ {_shown([*gn, 'console'])} &")
    log = root / "logs" / "console.log"
    proc = subprocess.Popen([*gn, "console"], cwd=root / "shop", env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    started.append(proc)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and proc.poll() is None:
        m = re.search(r"https?://\S+", log.read_text(errors="replace"))
        if m:
            click.echo(f"  open {m.group(0)} to watch the tasks, threads and outbox live")
            proc.nerve_url = m.group(0)  # type: ignore[attr-defined]
            return proc
        time.sleep(0.2)
    click.echo(f"  the console did not print its URL (see {log}); the demo goes on without it")
    return proc


def _serve_until_interrupted(proc: subprocess.Popen) -> None:
    """The demo's work is done; the console goes on serving what it left until Ctrl-C (or until it ends)."""
    url = getattr(proc, "nerve_url", "")
    click.echo(f"The console keeps serving{' at ' + url if url else ''} until you press Ctrl-C")
    sys.stdout.flush()
    try:
        proc.wait()
    except KeyboardInterrupt as exc:
        click.echo("console stopped")
        if isinstance(exc, Stopped):  # SIGTERM or SIGHUP: the command ends as that signal says
            raise


def stop_group(proc: subprocess.Popen) -> None:
    """End ``proc``'s process group (started in a session of its own), if it is still there: SIGTERM, then
    SIGKILL after 10 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=_env(), text=True, capture_output=True).stdout.strip()


def _note_state(work: Path, task: str) -> str:
    """'queued', 'delivered' or 'acted on' for the newest note of ``task`` (read from the bus, as `git worker show` does)."""
    from ..bus import steer
    from ..bus.connection import Bus
    from ..paths import discover

    bus = Bus(discover(work).bus_path)
    try:
        ds = steer.deliveries_for(bus.conn, task)
    finally:
        bus.close()
    if not ds:
        return "queued"
    return "acted on" if all(d.acted_at is not None for d in ds) else "delivered"


def run(directory: Path | None = None, *, agent: str | None = None, console: bool = False) -> Path:
    adapter = agent or "nerve_agent"
    _check_agent(agent)
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="git-nerve-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise DemoFailed(f"{root} is not empty; pick an empty or new directory")
    gw, gn = _commands()
    (root / "logs").mkdir()
    model = None
    procs: dict[str, subprocess.Popen] = {}
    console_proc = None
    consoles: list[subprocess.Popen] = []  # what the finally stops, whatever instant a signal arrives at
    try:
        env = _env()
        if agent is None:
            from .scripted_model.server import API_KEY, ScriptedModel

            _say("A model for the agents: the scripted model, on 127.0.0.1 (deterministic; no network, no API key)")
            model = ScriptedModel(mode="demo").start()
            click.echo(f"  listening on {model.url}/v1 (OpenAI Chat Completions); the demo stops it at the end")
            env["NERVE_DEMO_API_KEY"] = API_KEY
        work = root / "shop"
        base = _set_up(root, work, gn, adapter, model)
        if console:
            _say("The web console, to watch it all live")
            console_proc = _console(gn, root, env, consoles)
        from .scripted_model.scenario import DEMO_NOTE

        branches = _spawn_three(work, gw)
        _start_runs(root, work, gn, env, adapter, list(branches), procs)
        _watch(work, gw, gn, procs, branches, base, DEMO_NOTE)
        outcomes = _show_outcomes(root, work, gw, gn, procs, branches, base)
        _review_and_merge(root, work, gw, gn, agent, outcomes)
        if console_proc is not None and console_proc.poll() is None:
            _serve_until_interrupted(console_proc)
        return root
    finally:
        for p in procs.values():
            stop_group(p)
        for p in consoles:
            stop_group(p)
        if model is not None:
            model.stop()


def _check_agent(agent: str | None) -> None:
    if agent:
        from ..workflow.adapters import by_name

        problems = by_name(agent).check()  # an unknown name is a usage error (exit 2)
        if problems:
            raise DemoFailed(f"--agent {agent} cannot run here: {'; '.join(problems)}")


def _set_up(root: Path, work: Path, gn: list[str], adapter: str, model) -> str:
    """The repository with its origin, git-nerve initialised, nerve.toml naming the agent; its first commit."""
    _say("A repository with an origin remote, and git-nerve in it")
    seed_repository(root, root / "seed", root / "origin.git", work, {
        "prices.py": PRICES, "test_prices.py": TESTS, "README.md": "# Shop\n\nA small shop.\n",
        ".gitignore": "__pycache__/\n",
    })
    _run([*gn, "init"], work)
    toml = work / "nerve.toml"
    extra = ""
    if model is not None:
        extra = (f'\n[adapters.nerve_agent]\ntimeout = 300\nextra_args = ["--base-url", "{model.url}/v1", '
                 '"--api-key-env", "NERVE_DEMO_API_KEY"]\n')
    toml.write_text(f'[run]\ntest_command = "{TEST_COMMAND}"\nadapter = "{adapter}"\n\n' + toml.read_text() + extra)
    click.echo(f"$ cat nerve.toml    # [run] the test command and the agent; [adapters.{adapter}] how to reach it")
    for line in toml.read_text().strip().splitlines():
        if line.startswith(("[run]", "test_command", "adapter =", "[adapters.nerve_agent]", "extra_args")):
            click.echo(f"  {line}")
    _run(["git", "config", "nerve.heartbeatInterval", "1"], work)
    _run(["git", "add", "nerve.toml"], work, show=False)
    _run(["git", "commit", "-q", "-m", "git-nerve: the demo's agent and test command"], work, show=False)
    _run([*gn, "trust"], work, show=False)  # the demo wrote these settings itself: trusted on this machine
    _run(["git", "push", "-q", "origin", "main"], work, show=False)
    return _git(work, "rev-parse", "HEAD")


def _spawn_three(work: Path, gw: list[str]) -> dict[str, str]:
    """The three tasks spawned; each one's branch."""
    _say("Spawn three tasks: one task = one branch = one worktree")
    from .scripted_model.scenario import DEMO_LABEL, DEMO_RATE, DEMO_README

    descriptions = {RATE: DEMO_RATE, LABEL: DEMO_LABEL, README: DEMO_README}
    for task, text in descriptions.items():
        _run([*gw, "spawn", task, "--description", text], work)
    wt = work.parent / f"{work.name}.worktrees"
    return {t: _git(wt / t, "rev-parse", "--abbrev-ref", "HEAD") for t in descriptions}


def _start_runs(root: Path, work: Path, gn: list[str], env: dict, adapter: str, tasks: list[str],
                procs: dict[str, subprocess.Popen]) -> None:
    _say(f"Run the develop workflow (coder -> tester -> reviewer) of all three at once, on {adapter}")
    click.echo("  each role is a real agent process in the task's worktree; it reads its thread with"
               " `git nerve thread`, edits, runs the tests and commits")
    for t in tasks:
        argv = [*gn, "run", "develop", "--task", t, "--adapter", adapter]
        click.echo(f"$ {_shown(argv)} > logs/{t}.log 2>&1 &")
        procs[t] = subprocess.Popen(argv, cwd=work, env=env, stdout=(root / "logs" / f"{t}.log").open("w"),
                                    stderr=subprocess.STDOUT, start_new_session=True)


def _show_outcomes(root: Path, work: Path, gw: list[str], gn: list[str], procs: dict[str, subprocess.Popen],
                   branches: dict[str, str], base: str) -> dict[str, int | None]:
    _say("How each run ended")
    outcomes = {}
    for t, p in procs.items():
        outcomes[t] = p.returncode
        click.echo(f"$ cat logs/{t}.log")
        for line in (root / "logs" / f"{t}.log").read_text(errors="replace").strip().splitlines()[-12:]:
            click.echo(f"  {line}")

    _say("An agent's thread: its rounds, and the radar's message it read mid-run")
    click.echo(f"  {LABEL}'s coder read this thread with `git nerve thread` before it started and again after its"
               f" commit; there it found the radar's round, moved its change off the line {RATE} changes and"
               " amended its commit")
    _run([*gn, "thread", LABEL], work)

    _say("The stopped run's work is kept: its commits are on its branch")
    _run(["git", "log", "--oneline", f"{base[:12]}..{branches[README]}"], work)
    _run([*gw, "show", README], work)
    return outcomes


def _review_and_merge(root: Path, work: Path, gw: list[str], gn: list[str], agent: str | None,
                      outcomes: dict[str, int | None]) -> None:
    wt = work.parent / f"{work.name}.worktrees"
    finished = [t for t in (RATE, LABEL) if outcomes.get(t) == 0]
    _say("The finished tasks go to review: done (rebase + push), then a person approves")
    for t in finished:
        _run([*gw, "done"], wt / t)
        _run([*gw, "approve", t, "--comment", "the reviewer agent approved; so do I"], work)

    _say("The merge queue merges what passes its check")
    _run([*gw, "merge", "--all", "--check", TEST_COMMAND], work, expect=0 if agent is None else None)
    _run(["git", "pull", "-q", "--ff-only"], work)
    _run(["git", "log", "--oneline", "--graph", "-10", "origin/main"], work)
    _run([*gw, "status"], work)

    _say("The knowledge index answers questions about the repository")
    _run([*gn, "knowledge", "sync"], work)
    _run([*gn, "knowledge", "query", "where is the tax rate documented"], work)

    merged = _git(work, "log", "--format=%s", "origin/main")
    missing = [t for t in (RATE, LABEL) if f"({t})" not in merged]
    if agent is None and missing:
        raise DemoFailed(f"the merge queue did not merge {', '.join(missing)} (see the logs in {root / 'logs'})")
    click.echo(f"\nThe demo repository is kept at {root} (the agents' logs are in {root / 'logs'})")


def _watch(work: Path, gw: list[str], gn: list[str], procs: dict[str, subprocess.Popen], branches: dict[str, str],
           base: str, note: str) -> None:
    """Follow the running workflows; act as the person in charge would, at the moment it makes sense."""
    seen = {t: 0 for t in procs}
    tips = {t: base for t in procs}
    radar = note_sent = note_shown = stop_sent = False
    started = time.monotonic()
    while any(p.poll() is None for p in procs.values()):
        now = time.monotonic() - started
        if now > RUNS_DEADLINE:
            raise DemoFailed(f"the workflows did not end within {RUNS_DEADLINE:.0f}s")
        for t in procs:
            tip = _git(work, "rev-parse", branches[t])
            if tip and tip != tips[t]:
                tips[t] = tip
                seen[t] = int(_git(work, "rev-list", "--count", f"{base}..{tip}") or 0)
                _say(f"{t}: its agent committed \"{_git(work, 'log', '-1', '--format=%s', tip)}\" on {branches[t]}")
                _run([*gw, "status"], work)
                if not radar and seen[RATE] and seen[LABEL]:
                    radar = True
                    _say(f"The conflict radar: {RATE} and {LABEL} change the same line; both agents are told "
                         "in their thread (a commit starts it in the background; --refresh recomputes now)")
                    _run([*gw, "conflicts", "--refresh"], work)
        if not note_sent and (seen[README] or now > 60) and procs[README].poll() is None:
            note_sent = True
            _say(f"A person sends a note to the running {README} agent")
            _run([*gn, "tell", "--task", README, note], work)
        if note_sent and not note_shown and _note_state(work, README) == "acted on":
            note_shown = True
            _say("The agent took the note at its next step: the outbox says delivered (to which process), then acted on")
            _run([*gn, "outbox"], work)
        ready = (note_shown and seen[README] >= 2) or (note_sent and now > 150)  # a real CLI may never take the note
        if ready and not stop_sent and procs[README].poll() is None:
            stop_sent = True
            _say(f"The person stops the {README} run; its commits stay on its branch")
            _run([*gn, "tell", "--task", README, "stop"], work)
        time.sleep(0.3)
    if note_sent and not note_shown:
        _run([*gn, "outbox"], work)


__all__ = ["run"]
