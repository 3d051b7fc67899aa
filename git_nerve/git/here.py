"""git on a hook's own worktree (the GIT_DIR and friends git gave the hook are kept), for the hooks.

Standard library only: hooks import it on every commit and push."""

from __future__ import annotations

from collections.abc import Sequence

from . import cli


def _names(raw: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p]


def _out(args: list[str]) -> bytes:
    return cli.run(args, inherit_location=True, text=False).stdout


def head_commit_files() -> list[str]:
    """The files HEAD's commit changed against its first parent (all of them for a root commit)."""
    return _names(_out(["diff-tree", "-r", "-z", "--no-commit-id", "--name-only", "--root",
                        "--diff-merges=first-parent", "HEAD"]))


def diff_names(old: str, new: str) -> list[str]:
    """``git diff --name-only OLD NEW``: the files that differ."""
    return _names(_out(["diff", "--name-only", "-z", old, new, "--"]))


def ref_objects(refs: Sequence[str]) -> dict[str, str]:
    """``git for-each-ref``: refname -> object name, for those of ``refs`` that exist."""
    out = _out(["for-each-ref", "--format=%(refname) %(objectname)", *refs]).decode()
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def config_get_regexp(pattern: str) -> list[tuple[str, str]]:
    """``git config -z --get-regexp PATTERN``: (key, value) of every match, in the order git reads them."""
    raw = cli.run(["config", "-z", "--get-regexp", pattern], inherit_location=True, check=False).stdout
    return [(key, value) for key, _, value in (e.partition("\n") for e in raw.split("\0") if e)]
