"""Text from users, agents and commits, made safe to print.

Descriptions, commit subjects, review comments, `tell` notes, thread rounds
and outbox lines are written by people and agents we do not control. Printed
raw, an OSC 0 sets the terminal's title, ``ESC[2J`` clears the screen, OSC 8
hides a link, a bidi override reorders what the reader sees, and an agent
reading the output gets the same bytes. :func:`clean` is the one function
every output boundary (``cli.common.echo``/``warn``/``fail``, the hooks'
stderr, the steer hook) passes text through.

Standard library only: the hooks import it.
"""

from __future__ import annotations

#: bidi overrides/isolates and marks that reorder how a line reads (Trojan Source), plus the
#: line/paragraph separators some terminals treat as newlines
_INVISIBLE = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"


def _escape(code: int) -> str:
    if code == 0x1b:
        return "\\e"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


# str.translate tables (no `re`: the hooks import this module on every commit): C0 controls,
# DEL, C1 controls and the characters above; \n and \t kept or not per table
_BASE = {c: _escape(c) for c in [*range(0x00, 0x20), *range(0x7f, 0xa0), *map(ord, _INVISIBLE)]}
_TABLES = {
    (nl, tab): {c: e for c, e in _BASE.items() if not (nl and c == 0x0a) and not (tab and c == 0x09)}
    for nl in (True, False) for tab in (True, False)
}
_JSON = {c: f"\\u{c:04x}" for c in [*range(0x7f, 0xa0), *map(ord, _INVISIBLE)]}


def clean(text: object, *, newlines: bool = True, tabs: bool = True) -> str:
    """``text`` with every control character visible as an escape (``\\e``, ``\\x07``, ``\\u202e``).

    Newlines and tabs are kept unless the format has no room for them
    (``newlines=False`` for a one-line field such as a status table cell).
    """
    s = text if isinstance(text, str) else str(text)
    return s.translate(_TABLES[(newlines, tabs)])


def clean_line(text: object) -> str:
    """One line: newlines and tabs escaped too (a table cell, a one-line summary)."""
    return clean(text, newlines=False, tabs=False)


def clean_styled(text: str) -> str:
    """Like :func:`clean`, but the exact colour sequences our own ``style()`` emits (click.style:
    SGR 0, 1, 2, 22, 30-39, 49, 90-97) survive; nothing that moves the cursor, conceals text or
    talks to the terminal. Used only when colour is on (a terminal without NO_COLOR)."""
    if "\x1b" not in text:
        return clean(text)
    import re

    out, last = [], 0
    for m in re.finditer(r"\x1b\[(?:0|1|2|22|39|49|3[0-7]|9[0-7])m", text):
        out.append(clean(text[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(clean(text[last:]))
    return "".join(out)


def json_safe(encoded: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the characters JSON leaves raw
    (DEL, C1 controls, bidi overrides) written as ``\\uXXXX`` escapes: the same JSON value."""
    return encoded.translate(_JSON)


__all__ = ["clean", "clean_line", "clean_styled", "json_safe"]
