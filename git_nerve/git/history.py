"""Walking history through the git binary: ``rev-list``, ``merge-base``, ``log``. Standard library only."""

from __future__ import annotations

import os
from collections.abc import Sequence

from . import cli


def rev_list(cwd, tips: Sequence[str], *, excluding: Sequence[str] = (), reverse: bool = False) -> list[str]:
    """``git rev-list [--reverse] TIPS [--not EXCLUDING] --``: the commits ``tips`` reach and ``excluding`` do
    not, newest first (oldest first with ``reverse``)."""
    args = ["rev-list", *(["--reverse"] if reverse else []), *tips, *(["--not", *excluding] if excluding else []), "--"]
    return cli.out(args, cwd=cwd).split()


def not_held(cwd, tip: str, other: str, *, excluding: Sequence[str] = ()) -> list[str]:
    """The commits ``other`` reaches that neither ``tip`` nor ``excluding`` reach and whose change ``tip`` does not
    hold as a copy either (a rebased one: ``--cherry-pick`` compares patch ids), newest first: what replacing
    ``other`` by ``tip`` would lose."""
    args = ["rev-list", "--right-only", "--cherry-pick", f"{tip}...{other}",
            *(["--not", *excluding] if excluding else []), "--"]
    return cli.out(args, cwd=cwd).split()


def merge_base(cwd, a: str, b: str) -> str:
    """``git merge-base A B``: their best common ancestor (GitError when there is none)."""
    return cli.out(["merge-base", a, b], cwd=cwd)


def merge_base_independent(cwd, commits: Sequence[str]) -> list[str]:
    """``git merge-base --independent``: those of ``commits`` no other of them reaches."""
    return cli.out(["merge-base", "--independent", *commits], cwd=cwd).split()


def first_parent_merges(cwd, since: str, until: str) -> list[list[str]]:
    """``git log --first-parent --merges SINCE..UNTIL``: each merge as [merge, first parent, other parents...]."""
    out = cli.out(["log", "--first-parent", "--merges", "--format=%H %P", f"{since}..{until}", "--"], cwd=cwd)
    return [line.split() for line in out.splitlines()]


def parents_and_subject(cwd, rev: str) -> tuple[list[str], str]:
    """A commit's parents and subject line (``git log -1 --format=%P%x00%s``)."""
    parents, _, subject = cli.out(["log", "-1", "--format=%P%x00%s", rev], cwd=cwd).partition("\0")
    return parents.split(), subject


def commit_times_and_subjects(git_dir, shas: Sequence[str]) -> dict[str, tuple[float, str]]:
    """sha -> (committer time, subject) of each of ``shas`` (``git log --no-walk --stdin``, in the repository
    at ``git_dir``); commits git no longer has are left out."""
    if not shas:
        return {}
    proc = cli.run(
        ["--git-dir", os.fspath(git_dir), "log", "--no-walk=unsorted", "--ignore-missing",
         "--format=%H%x00%ct%x00%s", "--stdin"],
        cwd=git_dir, input=("\n".join(dict.fromkeys(shas)) + "\n").encode(), check=False, text=False,
    )
    info = {}
    if proc.returncode == 0:
        for line in proc.stdout.decode("utf-8", "replace").splitlines():
            sha, _, rest = line.partition("\0")
            ct, _, subject = rest.partition("\0")
            try:
                info[sha] = (float(ct), subject)
            except ValueError:
                continue
    return info
