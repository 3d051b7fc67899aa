"""Rendering a thread view as text (pure: no I/O).

Each round prints as the spec shows::

    [#5 tester] 2026-04-23T13:00:12Z
    ---
    exit_code: 0
    assertions_passed: 3
    ---
    All tests passed, sense validates correctly.

The frontmatter block is left out when the round has no metadata; the
reserved keys ``type``, ``role`` and ``content`` never appear in it; a round
without a role shows ``unknown``. Rounds are separated by a blank line, and
each gap becomes one line ``... K messages omitted (use --before M to load) ...``
(the wording is fixed, also for K = 1, so agents can match it). A gap between
shown rounds sits where the rounds are missing; a gap older than every shown
round (the ``--before`` mode) comes last, where the next page is looked for.
The default page may end with one more line, ``... where to look: PATH:START-END, ...
(git nerve knowledge query on the task's description) ...`` (see :mod:`.hints`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from .. import clock
from ..text import clean, clean_line
from .hints import Hint
from .hints import render as render_hints
from .select import Gap

RESERVED = frozenset({"type", "role", "content"})
UNKNOWN_ROLE = "unknown"


@dataclass(frozen=True)
class ShownRound:
    """One round of a view; reserved metadata keys are dropped wherever it is shown."""

    round: int
    role: str | None
    ts: float
    metadata: dict[str, Any]
    content: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "role": self.role,
            "ts": clock.iso(self.ts),
            "metadata": visible_metadata(self.metadata),
            "content": self.content,
        }


def visible_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The metadata without the reserved keys, order kept."""
    return {k: v for k, v in (metadata or {}).items() if k not in RESERVED}


class _Dumper(yaml.SafeDumper):
    """Safe YAML whose strings read back exactly and never break the ``---`` framing.

    Strings holding a non-printable character (control characters and the
    Unicode line separators U+0085, U+2028, U+2029, which a plain or
    single-quoted scalar would write raw) are double-quoted with escapes;
    other multi-line strings use a literal block, indented under their key.
    """


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if any(ch != "\n" and not ch.isprintable() for ch in data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_str(data)


_Dumper.add_representer(str, _represent_str)


def frontmatter(metadata: dict[str, Any]) -> str:
    """Block-style YAML of ``metadata`` (keys in their stored order, lines never folded), without its final newline."""
    return yaml.dump(
        metadata, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=2**31 - 1
    ).removesuffix("\n")


def header(r: ShownRound) -> str:
    return f"[#{r.round} {clean_line(r.role or UNKNOWN_ROLE)}] {clock.iso(r.ts)}"


def render_round(r: ShownRound) -> str:
    lines = [header(r)]
    meta = visible_metadata(r.metadata)
    if meta:
        lines += ["---", frontmatter(meta), "---"]
    text = "\n".join(lines)
    # the blank line between rounds is ours to place; control characters are shown escaped
    # (the view goes to terminals and agents)
    content = clean(r.content.rstrip("\n"))
    return f"{text}\n{content}" if content else text


def hint(gap: Gap) -> str:
    return f"... {gap.count} messages omitted (use --before {gap.before} to load) ..."


def render(rounds: Iterable[ShownRound], omitted: Iterable[Gap], where: Sequence[Hint] = ()) -> str:
    """The whole view: rounds in order, each gap's hint in place, the where-to-look line last; no trailing newline."""
    shown = sorted(rounds, key=lambda r: r.round)
    gaps = sorted(omitted, key=lambda g: g.first)
    blocks: list[str] = []
    trailing: list[str] = []
    for gap in gaps:
        if not shown or gap.last < shown[0].round:
            trailing.append(hint(gap))
    inner = [g for g in gaps if shown and g.last >= shown[0].round]
    for r in shown:
        while inner and inner[0].last < r.round:
            blocks.append(hint(inner.pop(0)))
        blocks.append(render_round(r))
    blocks += [hint(g) for g in inner]
    look = [render_hints(tuple(where))] if where else []
    return "\n\n".join(blocks + trailing + look)
