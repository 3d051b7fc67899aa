"""The object database through the git binary: ``cat-file``, ``hash-object``. Standard library only
(:mod:`.objects` is the pygit2 side)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from . import cli


def cat_blob(cwd, blob: str) -> bytes:
    """``git cat-file blob BLOB``: its content (b"" when git cannot read it)."""
    return cli.run(["cat-file", "blob", blob], cwd=cwd, text=False, check=False).stdout or b""


def hash_object_no_filters(cwd, path: str | os.PathLike[str]) -> str:
    """``git hash-object --no-filters -- PATH``: the blob name of the file's bytes as they are."""
    return cli.out(["hash-object", "--no-filters", "--", os.fspath(path)], cwd=cwd)


def existing_commits(cwd, shas: Sequence[str]) -> set[str]:
    """Which of ``shas`` name commits this repository has (``git cat-file --batch-check``)."""
    if not shas:
        return set()
    proc = cli.run(["cat-file", "--batch-check=%(objectname) %(objecttype)"], cwd=cwd,
                   input="".join(f"{s}\n" for s in shas), check=False)
    return {ln.split()[0] for ln in proc.stdout.splitlines() if ln.endswith(" commit")}


def diff_name_only(cwd, old: str, new: str) -> list[str]:
    """``git diff --name-only --no-renames OLD NEW``: the paths that differ between two commits."""
    out = cli.run(["diff", "--name-only", "-z", "--no-renames", old, new], cwd=cwd).stdout
    return [p for p in out.split("\0") if p]


def diff_names_since_fork(cwd, base: str, tip: str) -> list[str] | None:
    """``git diff --name-only --no-renames BASE...TIP``: the paths ``tip`` changed since its merge base with
    ``base`` (one git process); None when git cannot (a ref that does not exist)."""
    proc = cli.run(["diff", "--name-only", "-z", "--no-renames", f"{base}...{tip}", "--"], cwd=cwd, check=False)
    return [p for p in proc.stdout.split("\0") if p] if proc.returncode == 0 else None
