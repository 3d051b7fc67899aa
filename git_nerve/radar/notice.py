"""The notice a new conflict leaves for the agent's terminal: ``<git-dir>/nerve/radar-notice``.

Standard library only: the post-commit hook reads (and removes) it and
prints it with its next message, so the agent hears of the conflict where it
already looks.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..filedoor import keep_or_remove

NOTICE = "radar-notice"


def path(git_dir: str | os.PathLike[str]) -> Path:
    return Path(git_dir) / "nerve" / NOTICE


def add(git_dir: str | os.PathLike[str], text: str) -> None:
    from ..paths import create_file, make_dirs

    target = path(git_dir)
    make_dirs(target.parent)
    fd = create_file(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(text.rstrip("\n") + "\n")


def take(git_dir: str | os.PathLike[str]) -> str:
    """The pending notice, removed as it is read ("" when there is none)."""
    target = path(git_dir)
    claimed = target.with_name(f"{NOTICE}.{os.getpid()}")
    try:
        os.replace(target, claimed)
    except FileNotFoundError:
        return ""
    try:
        return claimed.read_text(encoding="utf-8")
    finally:
        keep_or_remove(claimed, within=claimed.parent, kind="radar-notice")


def withdraw(git_dir: str | os.PathLike[str], needles: tuple[str, ...]) -> None:
    """Drop the pending notice's lines holding one of ``needles`` (a conflict that is gone); the others stay."""
    text = take(git_dir)
    kept = [line for line in text.splitlines() if line and not any(n in line for n in needles)]
    if kept:
        add(git_dir, "\n".join(kept))


def other_task(line: str) -> str | None:
    """The task a notice line names as the conflict (None: the integration branch, or no such line)."""
    head, sep, rest = line.partition("conflicts with task ")
    if not sep:
        return None
    name = rest.split(":", 1)[0]
    return name.split(" (on machine ", 1)[0] or None


def withdraw_finished(git_dir: str | os.PathLike[str], live: set[str]) -> None:
    """Drop the pending notice's lines naming a task no longer live (merged, cancelled): a hook message never
    names a finished task as a live conflict."""
    try:
        text = path(git_dir).read_text(encoding="utf-8")
    except OSError:
        return
    gone = {t for t in map(other_task, text.splitlines()) if t is not None and t not in live}
    if gone:
        withdraw(git_dir, tuple(n for t in sorted(gone) for n in (f"conflicts with task {t}:", f"conflicts with task {t} (")))


__all__ = ["NOTICE", "add", "other_task", "path", "take", "withdraw", "withdraw_finished"]
