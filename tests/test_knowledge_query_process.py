"""`git nerve knowledge query` as a process: the click-free start-up path prints what the command prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.repos import knowledge as kfix
from git_nerve.knowledge import sync as ksync
from git_nerve.paths import discover

GIT_NERVE = Path(sys.executable).parent / "git-nerve"


@pytest.fixture
def shop(tmp_path):
    work = kfix.project(tmp_path).work
    ksync.sync(discover(work))
    return work


def process(args: list[str], cwd: Path, **env: str) -> tuple[int, str, str]:
    proc = subprocess.run([str(GIT_NERVE), *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **env})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("args", [
    ["invoice", "sales", "tax", "--limit", "2"],
    ["--json", "-n", "3", "how", "long", "to", "wait", "from", "a", "Retry-After", "header"],
    ["zzzunknownword"],
    ["--limit", "0", "invoice"],  # an error: reported the documented way
    ["--limit=2", "invoice"],  # the table's other spelling (git_nerve/options.py), read both ways
    ["--limit", "2", "--limit", "2", "invoice"],  # repeated: only click reads it
    ["-g", "--repo", ".", "invoice"],
])
def test_the_process_prints_what_the_command_prints(shop, gn, args):
    res = gn(["knowledge", "query", *args], shop / "src")
    assert process(["knowledge", "query", *args], shop / "src") == (res.code, res.out, res.err)


def test_a_plain_query_loads_no_click(shop):
    code = ("import sys\nfrom git_nerve.cli.entry import nerve_main\n"
            "sys.argv = ['git-nerve', 'knowledge', 'query', 'invoice', 'total']\n"
            "try:\n    nerve_main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print('click loaded' if 'click' in sys.modules else 'no click', file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=shop, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("src/billing/invoice.py:") and proc.stderr.strip().endswith("no click")


def test_colour_on_a_terminal_is_the_same_both_ways(shop):
    from tests.test_worker_cli import run_in_pty

    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["TERM"] = "xterm"
    fast = run_in_pty([str(GIT_NERVE), "knowledge", "query", "--limit", "2", "invoice"], shop, env)
    by_click = run_in_pty([str(GIT_NERVE), "knowledge", "query", "--limit", "2", "--limit", "2", "invoice"], shop,
                          env)  # repeated: click's path
    assert fast == by_click and b"\x1b[36msrc/billing/invoice.py\x1b[0m:" in fast
    assert b"\x1b[2m(ranked by full text" in fast and b"\\e[" not in fast  # dim, not an escaped ESC
    plain = run_in_pty([str(GIT_NERVE), "knowledge", "query", "--limit", "2", "invoice"], shop, dict(env, NO_COLOR="1"))
    assert b"\x1b[" not in plain and plain.startswith(b"src/billing/invoice.py:")
