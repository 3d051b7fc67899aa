"""``nerve.toml`` at the top of a checkout, read once the same way for every feature.

Its tables belong to the features that use them: ``[extract]`` and
``[adapters.*]`` to :mod:`git_nerve.workflow.config`, ``[knowledge.embeddings]``
to :mod:`git_nerve.knowledge.config`. Each validates its own part.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

FILE = "nerve.toml"


def path_in(toplevel: str | os.PathLike[str]) -> Path:
    return Path(toplevel) / FILE


def read(toplevel: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The parsed file, or None when the checkout has none; one clear error when it cannot be read."""
    path = path_in(toplevel)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
