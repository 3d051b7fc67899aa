"""The trust record: which exact contents this user trusted on this machine, for one repository.

Outside the repository, per user (as direnv's allow files and mise's trusted paths): one JSON file per
repository under ``$XDG_STATE_HOME/git-nerve/trust/`` (``~/.local/state/git-nerve/trust/`` without it), named
after the repository's common dir, written whole (:func:`..fs.replace_file`), 0600 in a 0700 directory, under
a lock. Nothing an agent or a commit writes can reach it. A record that is not this user's own file, or does
not parse, trusts nothing ("cannot tell" means not trusted).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..fs import replace_file

VERSION = 1
KEEP = 16  #: digests kept per setting (a branch's version and main's both stay trusted)


def state_home() -> Path:
    xdg = os.environ.get("XDG_STATE_HOME", "")
    return Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"


def path_for(common_dir: str | os.PathLike[str]) -> Path:
    real = os.path.realpath(os.fspath(common_dir))
    name = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return state_home() / "git-nerve" / "trust" / f"{name}.json"


def load(common_dir: str | os.PathLike[str]) -> dict[str, list[str]]:
    """setting key -> the digests trusted (empty when there is no record, or it cannot be trusted itself)."""
    path = path_for(common_dir)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return {}
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError):
        return {}
    finally:
        if fd >= 0:
            os.close(fd)
    settings = data.get("settings") if isinstance(data, dict) else None
    if not isinstance(settings, dict):
        return {}
    return {k: [d for d in v if isinstance(d, str)] for k, v in settings.items() if isinstance(v, list)}


def add(common_dir: str | os.PathLike[str], digests: dict[str, str]) -> Path:
    """Record ``digests`` (setting key -> digest) as trusted, keeping what was trusted before; the record's path."""
    from ..locks import hold

    path = path_for(common_dir)
    _private_dirs(path.parent)
    with hold(path.with_suffix(".lock"), timeout=30, what="the trust record's lock"):
        settings = load(common_dir)
        for key, d in digests.items():
            settings[key] = ([d] + [x for x in settings.get(key, []) if x != d])[:KEEP]
        body = {"version": VERSION, "repository": os.path.realpath(os.fspath(common_dir)), "settings": settings}
        replace_file(path, json.dumps(body, indent=1, sort_keys=True) + "\n", create_mode=0o600, mode=0o600)
    return path


def _private_dirs(path: Path) -> None:
    """``mkdir -p`` with 0700 for what it makes; the trust directory itself always 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
