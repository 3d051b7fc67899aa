"""What the commit being made adds: the staged diff (``git diff --cached``) of the hook's own worktree.

Standard library only: the pre-commit hook reads it on every commit."""

from __future__ import annotations

from . import cli

_DIFF_CACHED = ["-c", "core.quotePath=false", "diff", "--cached", "--no-color", "--no-ext-diff", "--no-renames"]


def added_paths() -> list[str]:
    """The files the staged changes add (``--diff-filter=A``)."""
    out = cli.run([*_DIFF_CACHED, "--name-only", "-z", "--diff-filter=A"], inherit_location=True).stdout
    return [p for p in out.split("\0") if p]


def added_lines() -> list[tuple[str, str]]:
    """(file, line) of every line the staged changes add."""
    lines: list[tuple[str, str]] = []
    current = ""
    for line in cli.run([*_DIFF_CACHED, "-U0", "--text"], inherit_location=True).stdout.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else line[4:]
        elif line.startswith("+"):
            lines.append((current, line[1:]))
    return lines
