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

The default page of a task's thread opens with its briefing (:class:`Briefing`): what `git worker spawn` was
given, so an agent that reads its thread first learns what it is to do::

    [task fix-login] ASSIGNED
    branch: worker/fix-login (from main; merges into main)
    worktree: /src/app.worktrees/fix-login
    ---
    Fix the login redirect

A description too long for the budget is cut to it, with ``... description cut at N of M characters (git
worker show T prints it whole) ...`` after it.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Sequence

from .. import clock
from ..text import clean, clean_line
from .hints import Hint
from .hints import render as render_hints
from .select import Gap

TYPE_CHECKING = False  # `git nerve thread` is an agent's hot path: typing's names for readers only
if TYPE_CHECKING:
    from typing import Any

RESERVED = frozenset({"type", "role", "content"})
UNKNOWN_ROLE = "unknown"


class ShownRound(namedtuple("ShownRound", "round role ts metadata content")):
    """One round of a view; reserved metadata keys are dropped wherever it is shown."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "role": self.role,
            "ts": clock.iso(self.ts),
            "metadata": visible_metadata(self.metadata),
            "content": self.content,
        }


class Briefing(namedtuple("Briefing", "task state description branch base integration worktree adopted full_length",
                          defaults=(False, None))):
    """What `git worker spawn` was given for a task: the first thing its thread shows (default page only).
    ``full_length``: the description's whole length when it was cut to the budget (None: shown whole)."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.task, "state": self.state, "description": self.description, "branch": self.branch,
            "base": self.base, "integration": self.integration, "worktree": self.worktree, "adopted": self.adopted,
        }
        if self.full_length is not None:
            data["description_cut"] = {"shown": len(self.description), "of": self.full_length}
        return data

    def head(self) -> str:
        """The lines above the description (its size is what the budget always pays)."""
        lines = [f"[task {clean_line(self.task)}] {clean_line(self.state)}"]
        if self.branch:
            base = _short_ref(self.base)
            where = [f"from {clean_line(base)}"] if base else []
            if self.integration:
                where.append(f"merges into {clean_line(self.integration)}")
            adopted = ", adopted: never deleted" if self.adopted else ""
            lines.append(f"branch: {clean_line(self.branch)}" + (f" ({'; '.join(where)}{adopted})" if where else ""))
        if self.worktree:
            lines.append(f"worktree: {clean_line(self.worktree)}")
        return "\n".join(lines) + "\n---\n"

    def render(self) -> str:
        text = clean(self.description.rstrip("\n")) or "(no description: the task was spawned without -d TEXT)"
        cut = ""
        if self.full_length is not None:
            cut = (f"\n... description cut at {len(self.description)} of {self.full_length} characters "
                   f"(git worker show {clean_line(self.task)} prints it whole) ...")
        return self.head() + text + cut

    def within(self, budget: int) -> Briefing:
        """This briefing with its description cut so that the whole fits ``budget`` characters (the lines above
        it always shown)."""
        room = max(0, budget - len(self.head()))
        if len(self.description) <= room:
            return self
        return self._replace(description=self.description[:room], full_length=len(self.description))


def _short_ref(ref: str | None) -> str | None:
    for prefix in ("refs/heads/", "refs/remotes/"):
        if ref and ref.startswith(prefix):
            return ref[len(prefix):]
    return ref


def visible_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The metadata without the reserved keys, order kept."""
    return {k: v for k, v in (metadata or {}).items() if k not in RESERVED}


_DUMPER = None


def _dumper():
    """Safe YAML whose strings read back exactly and never break the ``---`` framing (made on first use: a
    thread whose rounds carry no metadata, a new task's, never imports yaml).

    Strings holding a non-printable character (control characters and the
    Unicode line separators U+0085, U+2028, U+2029, which a plain or
    single-quoted scalar would write raw) are double-quoted with escapes;
    other multi-line strings use a literal block, indented under their key.
    """
    global _DUMPER
    if _DUMPER is None:
        import yaml

        class _Dumper(yaml.SafeDumper):
            pass

        def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
            if any(ch != "\n" and not ch.isprintable() for ch in data):
                return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
            if "\n" in data:
                return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
            return dumper.represent_str(data)

        _Dumper.add_representer(str, _represent_str)
        _DUMPER = _Dumper
    return _DUMPER


def frontmatter(metadata: dict[str, Any]) -> str:
    """Block-style YAML of ``metadata`` (keys in their stored order, lines never folded), without its final newline.

    The usual metadata (words, numbers, shas, lists of them) is written here, byte for byte as yaml would write it
    (tests/test_thread_format.py compares them): importing yaml costs `git nerve thread` about as much as starting
    Python. Anything else is yaml's."""
    plain = _plain_yaml(metadata)
    if plain is not None:
        return plain
    import yaml

    return yaml.dump(
        metadata, Dumper=_dumper(), sort_keys=False, allow_unicode=True, default_flow_style=False, width=2**31 - 1
    ).removesuffix("\n")


#: words yaml reads as a bool or null (YAML 1.1, PyYAML's resolver): written quoted, so left to yaml
_YAML_WORDS = frozenset("yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF null Null NULL".split())
_WORD_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_WORD_CHARS = _WORD_START | frozenset("0123456789./-")
_HEX = frozenset("0123456789abcdef")


def _plain_scalar(value: object) -> str | None:
    """``value`` as yaml writes a plain scalar, for the kinds whose spelling is certain; None for anything else."""
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if type(value) is int:
        return str(value)
    if type(value) is float:
        if value != value or value in (float("inf"), float("-inf")):
            return None
        text = repr(value).lower()
        return text.replace("e", ".0e", 1) if "." not in text and "e" in text else text
    if type(value) is not str or not value or value in _YAML_WORDS:
        return None
    if value[0] in _WORD_START and all(c in _WORD_CHARS for c in value):
        return value  # a word, a path, a dotted name: nothing yaml would read as another type
    if 7 <= len(value) <= 64 and all(c in _HEX for c in value) and not value.isdigit():
        return value  # a sha: no digit-only one (an int to yaml), and never a '.', '-', ':' or 'x' it could resolve
    return None


def _plain_yaml(metadata: dict[str, Any]) -> str | None:
    """yaml.dump's block style of a flat mapping of words to plain scalars (or non-empty lists of them, or empty
    lists); None for anything else."""
    lines = []
    for key, value in metadata.items():
        if type(key) is not str or _plain_scalar(key) != key:
            return None
        if type(value) is list:
            items = [_plain_scalar(v) for v in value]
            if None in items:
                return None
            lines.append(f"{key}: []" if not items else f"{key}:\n" + "\n".join(f"- {v}" for v in items))
            continue
        text = _plain_scalar(value)
        if text is None:
            return None
        lines.append(f"{key}: {text}")
    return "\n".join(lines) if lines else None


def header(r: ShownRound) -> str:
    spent = usage_words((r.metadata or {}).get("usage"))
    return f"[#{r.round} {clean_line(r.role or UNKNOWN_ROLE)}] {clock.iso(r.ts)}" + (f"  ({spent})" if spent else "")


def _count(value: object) -> str:
    if type(value) is not int:
        return "?"
    return str(value) if value < 1000 else f"{value / 1000:.1f}k" if value < 1_000_000 else f"{value / 1e6:.1f}M"


def usage_words(u: object) -> str | None:
    """A round's usage (the runner's ``usage`` metadata, issue 39) for its header line; None when it has none."""
    if type(u) is not dict:
        return None
    cost = u.get("cost_usd")
    cached = f" ({_count(u.get('cached_input_tokens'))} cached)" if u.get("cached_input_tokens") else ""
    money = f"${cost:.4f}" if type(cost) in (int, float) else "cost unknown"
    return f"{_count(u.get('input_tokens'))} tokens in{cached}, {_count(u.get('output_tokens'))} out, {money}"


def render_round(r: ShownRound) -> str:
    lines = [header(r)]
    meta = visible_metadata(r.metadata)
    if usage_words(meta.get("usage")):
        del meta["usage"]  # in the header line
    if meta:
        lines += ["---", frontmatter(meta), "---"]
    text = "\n".join(lines)
    # the blank line between rounds is ours to place; control characters are shown escaped
    # (the view goes to terminals and agents)
    content = clean(r.content.rstrip("\n"))
    return f"{text}\n{content}" if content else text


def hint(gap: Gap) -> str:
    return f"... {gap.count} messages omitted (use --before {gap.before} to load) ..."


def render(rounds: Iterable[ShownRound], omitted: Iterable[Gap], where: Sequence[Hint] = (),
           briefing: Briefing | None = None) -> str:
    """The whole view: the task's briefing, rounds in order, each gap's hint in place, the where-to-look line last;
    no trailing newline."""
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
    first = [briefing.render()] if briefing is not None else []
    return "\n\n".join(first + blocks + trailing + look)
