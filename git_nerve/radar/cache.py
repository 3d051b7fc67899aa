"""The radar's last result: ``<git-common-dir>/nerve/radar.json``, replaced atomically.

``sides``: per task, the inputs it was compared with (branch tip, the tree
compared: the tip's or a snapshot of uncommitted work). ``pairs``: per pair
key ``"a|b"`` (``"@integration"`` stands for the integration branch), the
inputs and the :class:`~git_nerve.git.overlap.Overlap`. Readers show ``at``
as the result's age; nothing waits for a recompute.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..paths import make_dirs, replace_file

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

FILE = "radar.json"
INTEGRATION = "@integration"


def path(common_dir: str | os.PathLike[str]) -> Path:
    return Path(common_dir) / "nerve" / FILE


def lock(common_dir: str | os.PathLike[str]) -> Path:
    return Path(common_dir) / "nerve" / "locks" / "radar.lock"


def key(a: str, b: str) -> str:
    return "|".join(sorted((a, b), key=lambda t: (t == INTEGRATION, t)))


def load(common_dir: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(path(common_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"sides": {}, "pairs": {}, "at": None}
    if not isinstance(data, dict):
        return {"sides": {}, "pairs": {}, "at": None}
    data.setdefault("sides", {})
    data.setdefault("pairs", {})
    data.setdefault("at", None)
    return data


def save(common_dir: str | os.PathLike[str], data: dict[str, Any]) -> None:
    target = path(common_dir)
    make_dirs(target.parent)
    replace_file(target, json.dumps(data, sort_keys=True).encode())


__all__ = ["FILE", "INTEGRATION", "key", "load", "lock", "path", "save"]
