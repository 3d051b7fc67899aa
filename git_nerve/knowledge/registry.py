"""The per-user list of indexed worktrees, searched by ``git nerve knowledge query -g``.

A JSON file under the user's data directory (XDG: ``$XDG_DATA_HOME/git-nerve/``,
by :func:`platformdirs.user_data_dir`), rewritten atomically under a lock.
Every sync adds its worktree; entries whose index is gone are dropped when
the list is read.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import locks
from ..paths import RepoPaths, make_dirs, replace_file
from .store import index_path

FILE = "knowledge-repos.json"


@dataclass(frozen=True)
class Entry:
    toplevel: str
    git_dir: str
    common_dir: str
    synced: float

    @property
    def index(self) -> Path:
        return index_path(Path(self.common_dir))

    def paths(self) -> RepoPaths:
        return RepoPaths(Path(self.git_dir), Path(self.common_dir), Path(self.toplevel))


def directory() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("git-nerve", appauthor=False))


def path() -> Path:
    return directory() / FILE


def _read(file: Path) -> list[Entry]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        return [Entry(**item) for item in data["repos"]]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError):
        return []  # unreadable: the next sync writes a clean list


def _write(file: Path, entries: list[Entry]) -> None:
    replace_file(file, json.dumps({"version": 1, "repos": [asdict(e) for e in entries]}, indent=1).encode())


def register(paths: RepoPaths) -> None:
    """Add (or refresh) this worktree."""
    file = path()
    make_dirs(file.parent)
    entry = Entry(str(paths.toplevel), str(paths.git_dir), str(paths.common_dir), time.time())
    with locks.hold(file.with_suffix(".lock"), timeout=10, what="the knowledge registry"):
        entries = [e for e in _read(file) if e.git_dir != entry.git_dir]
        _write(file, [*entries, entry])


def entries() -> list[Entry]:
    """The registered worktrees whose index still exists (the others are dropped from the list)."""
    file = path()
    listed = _read(file)
    alive = [e for e in listed if e.index.is_file() and Path(e.toplevel).is_dir()]
    if len(alive) != len(listed):
        with locks.hold(file.with_suffix(".lock"), timeout=10, what="the knowledge registry"):
            current = _read(file)
            _write(file, [e for e in current if e.index.is_file() and Path(e.toplevel).is_dir()])
    return alive
