"""`git nerve demo --fast`: the worker lifecycle on a throw-away repository.

Every step is a real command, printed before it runs, as a person would type
it: git for the agents' own work, `git worker` for the coordination. Two
workers edit the same line of the same file, so the second `done` meets a
real rebase conflict, resolved with git's own `git rebase --continue`.

The full demo (real agents, workflows, radar, notes, stop, knowledge, merge
queue) is :mod:`git_nerve.demo.agents`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from ..errors import NerveError


class DemoFailed(NerveError):
    pass


def _say(text: str) -> None:
    click.echo(click.style(f"\n== {text}", bold=True) if not os.environ.get("NO_COLOR") and sys.stdout.isatty() else f"\n== {text}")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_AUTHOR_NAME="Demo Agent", GIT_AUTHOR_EMAIL="agent@demo.invalid",
        GIT_COMMITTER_NAME="Demo Agent", GIT_COMMITTER_EMAIL="agent@demo.invalid",
        GIT_EDITOR="true", GIT_TERMINAL_PROMPT="0",
    )
    return env


def _run(argv: list[str], cwd: Path, *, expect: int | None = 0, show: bool = True) -> subprocess.CompletedProcess:
    if show:
        click.echo(f"$ {_shown(argv)}" + (f"    # in {cwd.name}" if cwd.name else ""))
    proc = subprocess.run(argv, cwd=cwd, env=_env(), text=True, capture_output=True)
    if show:
        for line in (proc.stdout + proc.stderr).rstrip().splitlines():
            click.echo(f"  {line}")
    if expect is not None and proc.returncode != expect:
        raise DemoFailed(f"`{' '.join(argv)}` exited {proc.returncode}, expected {expect}")
    return proc


def _shown(argv: list[str]) -> str:
    """``argv`` as a person would type it (quoted where the shell needs it)."""
    import shlex

    if argv[:2] == [sys.executable, "-c"] and len(argv) > 3 and argv[3] in ("worker_main", "nerve_main"):
        argv = ["git", "worker" if argv[3] == "worker_main" else "nerve", *argv[4:]]  # what a person types
    return shlex.join(argv)


def _commands() -> tuple[list[str], list[str]]:
    """How to call `git worker` / `git nerve`: through git when they are on PATH, else this interpreter."""
    from shutil import which

    if which("git-worker") and which("git-nerve"):
        return ["git", "worker"], ["git", "nerve"]
    run_entry = "import sys; from git_nerve.cli import entry; getattr(entry, sys.argv.pop(1))()"
    return ([sys.executable, "-c", run_entry, "worker_main"], [sys.executable, "-c", run_entry, "nerve_main"])


def seed_repository(root: Path, seed: Path, origin: Path, work: Path, files: dict[str, str]) -> None:
    """The demo's shop: ``files`` committed in ``seed``, a bare ``origin`` cloned from it, ``work`` cloned from that."""
    _run(["git", "init", "-q", "-b", "main", str(seed)], root)
    for rel, text in files.items():
        (seed / rel).write_text(text)
    _run(["git", "add", "-A"], seed, show=False)
    _run(["git", "commit", "-q", "-m", "initial shop"], seed, show=False)
    _run(["git", "clone", "-q", "--bare", str(seed), str(origin)], root)
    _run(["git", "clone", "-q", str(origin), str(work)], root)


def run(directory: Path | None = None) -> Path:
    """The fast, lifecycle-only demo (`git nerve demo --fast`)."""
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="git-nerve-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise DemoFailed(f"{root} is not empty; pick an empty or new directory")
    gw, gn = _commands()
    origin, seed, work = root / "origin.git", root / "seed", root / "shop"

    _say("A repository with an origin remote")
    seed_repository(root, seed, origin, work, {
        "prices.py": "TAX_RATE = 0.20\n\n\ndef price_with_tax(net):\n    return round(net * (1 + TAX_RATE), 2)\n",
        "README.md": "# Shop\n",
    })
    _run([*gn, "init"], work)

    _say("Spawn two workers: one task = one branch = one worktree")
    _run([*gw, "spawn", "tax-rate", "--description", "Raise the tax rate to 21%"], work)
    _run([*gw, "spawn", "tax-label", "--description", "Document the tax rate"], work)
    wt = work.parent / f"{work.name}.worktrees"
    a, b = wt / "tax-rate", wt / "tax-label"

    _say("Agents work in their own worktrees and commit with plain git (the hooks record heartbeats)")
    _run([*gw, "start"], a)
    (a / "prices.py").write_text((a / "prices.py").read_text().replace("TAX_RATE = 0.20", "TAX_RATE = 0.21"))
    _run(["git", "commit", "-q", "-am", "Raise the tax rate to 21%"], a)
    _run([*gw, "start"], b)
    (b / "prices.py").write_text((b / "prices.py").read_text().replace("TAX_RATE = 0.20", "TAX_RATE = 0.20  # VAT, standard rate"))
    _run(["git", "commit", "-q", "-am", "Say what the tax rate is"], b)
    _run([*gw, "status"], work)

    _say("The first task: done (rebase + push), approve, merge")
    _run([*gw, "done"], a)
    _run([*gw, "approve", "tax-rate", "--comment", "Looks right"], work)
    _run([*gw, "merge", "tax-rate"], work)

    _say("The second task edited the same line: done meets a real rebase conflict")
    _run([*gw, "done"], b, expect=6)
    _run(["git", "status", "--short"], b)

    _say("The agent resolves it with git's own tools")
    (b / "prices.py").write_text((b / "prices.py").read_text().split("<<<<<<<")[0]
                                 + "TAX_RATE = 0.21  # VAT, standard rate\n\n\ndef price_with_tax(net):\n"
                                 "    return round(net * (1 + TAX_RATE), 2)\n")
    _run(["git", "add", "prices.py"], b)
    _run(["git", "rebase", "--continue"], b)
    _run([*gw, "done", "--skip-rebase"], b)
    _run([*gw, "approve", "tax-label"], work)
    _run([*gw, "merge", "tax-label", "--delete-branch"], work)

    _say("Both tasks are merged into main on origin")
    _run(["git", "log", "--oneline", "--graph", "-8", "origin/main"], work)
    _run([*gw, "status"], work)
    _run([*gw, "show", "tax-label"], work)
    click.echo(f"\nThe demo repository is kept at {root}")
    return root
