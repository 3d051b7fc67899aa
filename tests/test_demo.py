"""`git nerve demo` (the full one): real agent processes against the scripted model, checked on git and the bus.

The demo is run as a person runs it (a real subprocess, `git nerve demo --dir X`); what is asserted is what it
left behind in the repository, on origin and on the bus, never its text.
"""

from __future__ import annotations

import json
import re
import socket
import tomllib
from pathlib import Path

import pytest

from fixtures.repos.build import git
from git_nerve.bus import messages, rounds, steer
from git_nerve.bus.connection import Bus
from git_nerve.demo.scripted_model.scenario import DEMO_NOTE, DEMO_NOTE_LINE
from tests.real_agents import agent_pids


def _thread(bus: Bus, task: str) -> list:
    last = rounds.last_round(bus.conn, task)
    return rounds.load(bus.conn, task, list(range(1, last + 1))) if last else []


@pytest.mark.slow
def test_the_full_demo_runs_real_agents_to_a_merged_outcome(tmp_path, sh):
    root = tmp_path / "demo"
    res = sh(["git", "nerve", "demo", "--dir", str(root)], tmp_path, timeout=400)
    assert res.code == 0, res.out[-6000:] + res.err[-3000:]
    work = root / "shop"

    # origin: the two tax tasks merged by the merge queue; the radar made the second move its change off the line
    log = git(work, "log", "--format=%s", "origin/main")
    assert "Merge feat/tax-rate (tax-rate)" in log and "Merge feat/tax-label (tax-label)" in log, log
    assert git(work, "show", "origin/main:prices.py").splitlines()[0] == "TAX_RATE = 0.21"
    assert "VAT" in git(work, "show", "origin/main:TAXES.md")
    assert git(work, "show", "origin/main:README.md") == "# Shop\n\nA small shop."  # the stopped task is not merged
    status = {w["task_id"]: w["state"] for w in json.loads(sh(["git", "worker", "status", "--json"], work).out)}
    assert status == {"tax-rate": "COMPLETED", "tax-label": "COMPLETED", "readme": "WORKING"}, status

    with Bus(work / ".git" / "nerve" / "bus.db") as bus:
        # every workflow ran its roles as real agent runs, each round typed by the develop workflow
        for task in ("tax-rate", "tax-label"):
            by_role = {r.role: r for r in _thread(bus, task) if r.role == "radar" or r.metadata.get("adapter")}
            assert {"coder", "tester", "reviewer", "radar"} <= set(by_role), (task, list(by_role))
            assert by_role["coder"].metadata["adapter"] == "nerve_agent"
            assert by_role["tester"].metadata["passed"] is True
            assert by_role["reviewer"].metadata["approved"] is True
            # the radar told both of the conflict, and (once tax-label moved its change) that it was resolved
            told = [r.metadata["radar"] for r in _thread(bus, task) if r.role == "radar"]
            assert told[0] == "conflict" and set(told) <= {"conflict", "resolved"}, told
        label_coder = next(r for r in _thread(bus, "tax-label") if r.role == "coder")
        assert label_coder.metadata["files_changed"] == ["TAXES.md"]

        # the note reached the running readme agent (its own pid) and was acted on; the stop ended the run
        notes = [m for m in steer.for_task_after(bus.conn, "readme", 0, all_since=None) if m.kind == "note"]
        assert [m.text for m in notes] == [DEMO_NOTE]
        (d,) = steer.deliveries_for(bus.conn, "readme")
        assert d.reader == "nerve-agent" and d.pid and d.via == "hook" and d.acted_at is not None, d
        ends = messages.for_task(bus.conn, "readme", kinds=("workflow_end",))
        assert ends and ends[-1].payload["outcome"] == "stopped", [e.payload for e in ends]
    outbox = json.loads(sh(["git", "nerve", "outbox", "--json"], work).out)
    kinds = [line.get("kind") for line in outbox if "readme" in json.dumps(line)]
    assert "delivered" in kinds and "acted" in kinds and "stop" in kinds, outbox

    # the stopped task's work is kept on its branch: its first commit and the one the note asked for
    subjects = git(work, "log", "--format=%s", "origin/main..feat/readme").splitlines()
    assert len(subjects) == 2, subjects
    assert DEMO_NOTE_LINE in git(work, "show", "feat/readme:README.md")
    assert git(work.parent / "shop.worktrees" / "readme", "status", "--porcelain") == ""

    # nothing is left running: no agent in the demo's directories, the scripted model is stopped
    assert agent_pids(root) == []
    toml = tomllib.loads((work / "nerve.toml").read_text())
    url = toml["adapters"]["nerve_agent"]["extra_args"][1]
    port = int(re.search(r":(\d+)/", url).group(1))
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_demo_options_are_checked_before_anything_is_built(tmp_path, gn):
    res = gn(["demo", "--fast", "--agent", "claude", "--dir", str(tmp_path / "d")], tmp_path)
    assert res.code == 2, res.err
    res = gn(["demo", "--agent", "no-such-cli", "--dir", str(tmp_path / "d")], tmp_path)
    assert res.code == 2, res.err
    assert not (tmp_path / "d").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_to_the_demo_stops_its_console_too(tmp_path, sig):
    """`git nerve demo --console` ended by SIGTERM (a process manager), SIGHUP (a closed terminal) or Ctrl-C:
    the demo exits 128 + the signal, and its `git nerve console` child stops serving (before, it went on as an
    orphan and git said "git-nerve died of signal 15")."""
    import signal
    import subprocess
    import time
    import urllib.error
    import urllib.request

    from conftest import BIN

    proc = subprocess.Popen([str(BIN / "git-nerve"), "demo", "--console", "--dir", str(tmp_path / "demo")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = None
    try:
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"the demo ended before its console served: {proc.stderr.read()}"
            m = re.search(r"open (http://\S+) to watch", line)
            url = m.group(1) if m else None
        assert url, "the demo never printed its console's URL"
        assert urllib.request.urlopen(url, timeout=10).status == 200  # serving
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + getattr(signal, sig), (proc.returncode, err[-2000:])
    assert "Traceback" not in err
    deadline = time.monotonic() + 20
    while True:  # the console child is gone: its port answers no more
        try:
            urllib.request.urlopen(url, timeout=2)
        except (urllib.error.URLError, ConnectionError, OSError):
            break
        assert time.monotonic() < deadline, f"the console at {url} still serves after the demo ended by {sig}"
        time.sleep(0.2)
