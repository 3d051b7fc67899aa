"""A round's metadata: what may be stored (:func:`check_metadata`), and `git nerve post`'s ``--meta KEY=VALUE`` and
``--meta-json`` (re-exported by :mod:`.service`). yaml is imported only when a ``--meta`` value is read."""

from __future__ import annotations

import json

from ..errors import UsageError
from .format import RESERVED

TYPE_CHECKING = False  # `git nerve thread` is an agent's hot path: typing's names for readers only
if TYPE_CHECKING:
    from typing import Any


def check_metadata(metadata: Any) -> dict[str, Any]:
    """A JSON object with string keys, finite numbers and none of the reserved keys."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise UsageError(f"metadata must be a JSON object, got {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str) or not key:
            raise UsageError(f"metadata keys must be non-empty strings (got {key!r})")
        if key in RESERVED:
            raise UsageError(
                f"metadata key {key!r} is reserved ({', '.join(sorted(RESERVED))} are fields of the round itself)"
            )
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"metadata must be plain JSON: {exc}") from exc
    return metadata


# -- `--meta KEY=VALUE` and `--meta-json` --------------------------------------

_INT = r"[-+]?(0|[1-9][0-9]*)"
_FLOAT = r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?"
_BOOL = {"true", "True", "TRUE", "false", "False", "FALSE"}
_NULL = {"null", "Null", "NULL", "~"}


def parse_meta_value(raw: str) -> Any:
    """A ``--meta`` value as a YAML scalar, keeping only the unsurprising typings.

    ``yaml.safe_load`` parses it; the typed result is kept for the YAML 1.2
    core spellings only: ``true``/``false``, ``null``/``~``, decimal integers
    and finite decimal floats. Everything else stays the literal string,
    including YAML 1.1 surprises (``yes``/``no``/``on``/``off``, octal
    ``010``, sexagesimal ``1:30``), dates, ``.inf``/``.nan``, lists, maps and
    text after `` #``. A quoted value (``'"42"'``) is unquoted to a string.
    An empty value is the empty string.
    """
    import math
    import re

    import yaml

    if raw == "":
        return ""
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    if raw[0] in "'\"":
        return parsed if isinstance(parsed, str) else raw
    if isinstance(parsed, bool):
        return parsed if raw in _BOOL else raw
    if parsed is None:
        return None if raw in _NULL else raw
    if isinstance(parsed, int) and re.fullmatch(_INT, raw):
        return parsed
    if isinstance(parsed, float) and math.isfinite(parsed) and re.fullmatch(_FLOAT, raw):
        return parsed
    return raw


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_metadata(pairs: tuple[str, ...] | list[str] = (), meta_json: str | None = None) -> dict[str, Any]:
    """Metadata from ``--meta-json`` then ``--meta KEY=VALUE`` pairs (a pair overrides the same key)."""
    meta: dict[str, Any] = {}
    if meta_json is not None:
        try:
            loaded = json.loads(meta_json, parse_constant=_reject_constant)
        except ValueError as exc:
            raise UsageError(f"--meta-json is not valid JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise UsageError(f"--meta-json must be a JSON object, got {type(loaded).__name__}")
        meta.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--meta expects KEY=VALUE (got {pair!r})")
        meta[key.strip()] = parse_meta_value(value)
    return check_metadata(meta)
