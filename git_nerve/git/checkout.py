"""Moving a checkout: ``git checkout``/``reset`` of paths, ``reset --keep``/``--hard``, ``rebase`` and its
``--abort``/``--quit``, ``merge --ff-only``. Standard library only (the repair code that undoes a killed one
runs without pygit2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import cli


@dataclass(frozen=True)
class Outcome:
    """How a git command that may stop half-way ended: ``ok`` (exit 0) and what git said on stderr."""

    ok: bool
    stderr: str


def checkout_paths(wt: Path, rev: str, paths: Sequence[str]) -> None:
    """``git checkout REV -- PATHS``: the files as at ``rev`` (GitError when git fails)."""
    cli.run(["checkout", rev, "--", *paths], cwd=wt)


def reset_paths(wt: Path, rev: str, paths: Sequence[str]) -> None:
    """``git reset -q REV -- PATHS``: the index entries as at ``rev``; a failure is ignored."""
    cli.run(["reset", "-q", rev, "--", *paths], cwd=wt, check=False)


def reset_keep(wt: Path, rev: str, *, check: bool = True) -> bool:
    """``git reset --quiet --keep REV``; True when it did (GitError when ``check`` and git fails)."""
    return cli.run(["reset", "--quiet", "--keep", rev], cwd=wt, check=check).returncode == 0


def reset_hard(wt: Path, rev: str) -> bool:
    """``git reset -q --hard REV``; True when it did."""
    return cli.run(["reset", "-q", "--hard", rev], cwd=wt, check=False).returncode == 0


def rebase(wt: Path, onto: str) -> Outcome:
    """``git rebase ONTO`` with an editor that accepts every message as it is."""
    proc = cli.run(["rebase", onto], cwd=wt, check=False, env=cli.clean_env({"GIT_EDITOR": "true"}))
    return Outcome(proc.returncode == 0, proc.stderr)


def rebase_abort(wt: Path) -> bool:
    """``git rebase --abort``; True when it did."""
    return cli.run(["rebase", "--abort"], cwd=wt, check=False).returncode == 0


def rebase_quit(wt: Path) -> bool:
    """``git rebase --quit`` (drops the rebase's state, moves nothing); True when it did."""
    return cli.run(["rebase", "--quit"], cwd=wt, check=False).returncode == 0


def merge_ff_only(wt: Path, rev: str) -> Outcome:
    """``git merge --ff-only --quiet REV``."""
    proc = cli.run(["merge", "--ff-only", "--quiet", rev], cwd=wt, check=False)
    return Outcome(proc.returncode == 0, proc.stderr)
