"""Task ids (pure)."""

from __future__ import annotations

import re

from ..errors import UsageError

MAX_LEN = 64
_ALLOWED = re.compile(r"[A-Za-z0-9._-]+\Z")


def validate(task_id: str) -> str:
    """Return ``task_id`` if it is a valid id, else raise UsageError (exit 2).

    Letters, digits, ``.``, ``_``, ``-``; at most 64 characters; not starting
    with ``-`` or ``.``; no ``..``; and a valid git ref component (no ``.lock``
    suffix, no trailing ``.``, not ``@``).
    """
    shown = task_id if len(task_id) <= 80 else task_id[:77] + "..."
    shown = shown.encode("unicode_escape").decode("ascii")

    def bad(why: str) -> UsageError:
        return UsageError(f"invalid task id {shown!r}: {why}")

    if not task_id:
        raise bad("it is empty")
    if len(task_id) > MAX_LEN:
        raise bad(f"longer than {MAX_LEN} characters")
    if not _ALLOWED.match(task_id):
        raise bad("use only letters, digits, '.', '_' and '-'")
    if task_id[0] in "-.":
        raise bad("it must not start with '-' or '.'")
    if ".." in task_id:
        raise bad("it must not contain '..'")
    if task_id.endswith(".lock") or task_id.endswith("."):
        raise bad("it must not end with '.lock' or '.'")
    return task_id


def validate_description(text: str) -> str:
    """A task description becomes part of a commit message, which cannot hold NUL (exit 2)."""
    if "\0" in text:
        raise UsageError("the description must not contain NUL characters")
    return text
