"""Which of some paths a checkout tracks, and what git ignores there (for the files a new worktree is given)."""

from __future__ import annotations

from pathlib import Path

from . import cli


def tracked_among(checkout: Path, paths: list[str]) -> set[str]:
    """The paths of ``paths`` (relative, '/'-separated) that ``checkout``'s index tracks."""
    found: set[str] = set()
    for i in range(0, len(paths), 500):  # argv stays well under the system's limit
        batch = paths[i:i + 500]
        proc = cli.run(["ls-files", "-z", "--", *[f":(literal){p}" for p in batch]], cwd=checkout, check=False)
        if proc.returncode != 0:
            found |= set(batch)  # cannot tell: treat them as tracked (never copied over)
            continue
        found |= {p for p in proc.stdout.split("\0") if p}
    return found


def ignored_entries(checkout: Path) -> list[str] | None:
    """Ignored, untracked paths of ``checkout`` (a wholly ignored directory is one entry ending in '/');
    None when git cannot tell."""
    proc = cli.run(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
                   cwd=checkout, check=False)
    if proc.returncode != 0:
        return None
    return sorted(p for p in proc.stdout.split("\0") if p)


def is_ignored(checkout: Path, rel: str) -> bool:
    """True when git ignores ``rel`` in ``checkout`` (and does not track it)."""
    return cli.ok(["check-ignore", "-q", "--", rel], cwd=checkout)
