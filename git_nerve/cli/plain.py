"""Output without click, byte for byte what :mod:`.common`'s ``echo``/``warn``/``echo_json`` print.

The click-free fast paths of :mod:`.entry` (`git nerve knowledge query`) print through these, and so do
their click commands, so both ways print the same. Colour only on a terminal and never with NO_COLOR set
(no-color.org); the colour codes are click.style's.
"""

from __future__ import annotations

import json
import os
import sys

from ..text import clean, clean_styled, json_safe

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

#: click.style's codes for the styles these commands use
_CODES = {"cyan": "36", "yellow": "33", "red": "31"}
RESET = "\x1b[0m"


def color_enabled(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to a non-empty value (no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def paint(text: str, *, fg: str | None = None, bold: bool = False, dim: bool = False, stream=None) -> str:
    """``text`` in colour as click.style writes it, when :func:`color_enabled` for ``stream`` (stdout)."""
    if not color_enabled(stream):
        return text
    codes = ([f"\x1b[{_CODES[fg]}m"] if fg else []) + (["\x1b[1m"] if bold else []) + (["\x1b[2m"] if dim else [])
    return f"{''.join(codes)}{text}{RESET}"


def line(text: str = "", *, err: bool = False) -> None:
    """A line; control characters shown escaped except the colours :func:`paint` added (as common.echo)."""
    stream = sys.stderr if err else sys.stdout
    stream.write((clean_styled(text) if color_enabled(stream) else clean(text)) + "\n")
    stream.flush()


def warning(text: str) -> None:
    sys.stderr.write(f"{paint('warning:', fg='yellow', stream=sys.stderr)} {clean(text)}\n")
    sys.stderr.flush()


def json_out(data: Any) -> None:
    sys.stdout.write(json_safe(json.dumps(data, indent=2, ensure_ascii=False, default=str)) + "\n")
    sys.stdout.flush()
