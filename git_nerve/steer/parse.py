"""What a queued message asks for, from its text (pure).

The patterns are anchored to the start of the message, so guidance that
merely mentions a command word stays a note:

* ``stop`` only as the first word (``stop``, ``STOP!``, ``stop: tests are red``);
  ``please stop`` and ``stopping soon`` are notes;
* ``skip <task-id>`` and ``add <task-id>`` as the first words (``skip t2``,
  ``skip task t2 - flaky``, ``add: #t3``);
* anything else is a note.

An explicit kind (``--kind``) wins over the text; ``skip``/``add`` then take
their task id from the text (``t2`` or ``skip t2``).
"""

from __future__ import annotations

from dataclasses import dataclass
import re

from ..errors import UsageError

KINDS = ("stop", "skip", "add", "note")
COMMANDS = ("stop", "skip", "add")

_ID = r"([A-Za-z0-9][A-Za-z0-9._-]*)"
#: patterns, compiled by re.match when a note is first parsed (not by every command that imports this)
_STOP = r"\s*stop\b"
_TARGETED = rf"\s*(skip|add)[\s:]+(?:task\s+)?#?{_ID}"


@dataclass(frozen=True)
class Parsed:
    kind: str
    target: str | None = None  #: the task id named by skip/add
    explicit: bool = False  #: the kind came from --kind, not the text


def _target(match: re.Match[str]) -> str:
    return match.group(2).rstrip(".")


def parse(text: str, kind: str | None = None, *, commands: tuple[str, ...] = COMMANDS) -> Parsed:
    """The kind (and skip/add target) of ``text``.

    ``commands`` are the kinds the text may select (a message addressed to a
    task can only be ``stop`` or a note). An explicit ``kind`` must be one of
    :data:`KINDS`; an explicit ``skip``/``add`` whose text names no task id
    raises :class:`UsageError`.
    """
    if kind is not None:
        kind = kind.strip().lower()
        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
        if kind in ("skip", "add"):
            match = re.compile(rf"\s*(?:{kind}[\s:]+)?(?:task\s+)?#?{_ID}", re.IGNORECASE).match(text)
            if match is None:
                raise UsageError(f"--kind {kind} needs a task id as the message (e.g. `git nerve tell --kind {kind} t2`)")
            return Parsed(kind, match.group(1).rstrip("."), explicit=True)
        return Parsed(kind, explicit=True)
    if "stop" in commands and re.match(_STOP, text, re.IGNORECASE):
        return Parsed("stop")
    match = re.match(_TARGETED, text, re.IGNORECASE)
    if match is not None and match.group(1).lower() in commands:
        return Parsed(match.group(1).lower(), _target(match))
    return Parsed("note")


__all__ = ["COMMANDS", "KINDS", "Parsed", "parse"]
