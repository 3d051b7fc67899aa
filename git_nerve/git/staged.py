"""What a commit adds: the staged diff (``git diff --cached``) of the hook's own worktree (the commit being made),
and the same two facts of commits already made, each against its first parent (what a pre-commit would have seen).

Standard library only: the pre-commit hook reads it on every commit, pre-push when a task's worktree has copies."""

from __future__ import annotations

from collections.abc import Sequence

from . import cli

_DIFF_CACHED = ["-c", "core.quotePath=false", "diff", "--cached", "--no-color", "--no-ext-diff", "--no-renames"]


def added_paths() -> list[str]:
    """The files the staged changes add (``--diff-filter=A``)."""
    out = cli.run([*_DIFF_CACHED, "--name-only", "-z", "--diff-filter=A"], inherit_location=True).stdout
    return [p for p in out.split("\0") if p]


def added_lines() -> list[tuple[str, str]]:
    """(file, line) of every line the staged changes add."""
    patch = cli.run([*_DIFF_CACHED, "-U0", "--text"], inherit_location=True, text=False).stdout
    return _added_lines(patch, set()).get("", [])


_DIFF_TREE = ["diff-tree", "--stdin", "-r", "--no-renames", "--root", "--diff-merges=first-parent"]


def commit_additions(cwd, commits: Sequence[str], *, inherit_location: bool = False
                     ) -> list[tuple[str, list[str], list[tuple[str, str]]]]:
    """For each of ``commits`` that adds something, in their order: (commit, the files it adds, (file, line) of
    every line it adds), against its first parent. Two git processes whatever the number of commits."""
    if not commits:
        return []
    feed = ("\n".join(commits) + "\n").encode()
    wanted = set(commits)
    files: dict[str, list[str]] = {}
    out = cli.run([*_DIFF_TREE, "-z", "--name-only", "--diff-filter=A"], cwd=cwd, input=feed, text=False,
                  inherit_location=inherit_location).stdout.decode("utf-8", "surrogateescape")
    commit = ""
    for item in out.split("\0"):
        if item in wanted:
            commit = item
        elif item and commit:
            files.setdefault(commit, []).append(item)
    lines = _added_lines(cli.run(["-c", "core.quotePath=false", *_DIFF_TREE, "-p", "-U0", "--text", "--no-color",
                                  "--no-ext-diff"], cwd=cwd, input=feed, text=False,
                                 inherit_location=inherit_location).stdout, wanted)
    return [(c, files.get(c, []), lines.get(c, [])) for c in commits if c in files or c in lines]


def _added_lines(patch: bytes, wanted: set[str]) -> dict[str, list[tuple[str, str]]]:
    """(file, line) of the added lines of each commit in diff-tree's ``--stdin -p`` output (a commit's id on a line
    of its own before its diff; ``---``/``+++`` are headers only between ``diff --git`` and the first hunk); a diff
of no commit (the staged diff) under ``""``."""
    found: dict[str, list[tuple[str, str]]] = {}
    commit, current, in_header = "", "", False
    for raw in patch.split(b"\n"):
        line = raw.decode("utf-8", "surrogateescape")
        if line in wanted:
            commit, in_header = line, False
        elif line.startswith("diff --git "):
            current, in_header = "", True
        elif in_header:
            if line.startswith("+++ "):
                current = (line[6:] if line.startswith("+++ b/") else line[4:]).rstrip("\t")
            elif line.startswith("@@"):
                in_header = False
        elif line.startswith("+"):
            found.setdefault(commit, []).append((current, line[1:]))
    return found
