"""`git nerve hooks status`: what runs when git runs each of our hooks, told as it is (``status``,
``installed``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NerveError
from ..paths import RepoPaths
from .managers import LFS_HOOKS, _lfs_chained, displaced_copies, kept_hooks, lfs_configured, manager_of
from .shim import HOOKS, _read, _runnable, is_ours, recorded, render
from .where import _worktree_hooks_dir, chains_us, forward_dir, hooks_dir, hooks_path_setting


@dataclass
class HookStatus:
    name: str
    #: installed | outdated (works; `install` refreshes it) | broken (its interpreter
    #: or package is gone) | displaced (another tool put its hook over ours and our
    #: shim does not run) | foreign (a hook that is not ours) | missing
    state: str
    chained: str | None = None
    python: str | None = None
    #: the file our shim runs as when it is not ``<name>`` (pre-commit's ``<name>.legacy``)
    runs_as: str | None = None
    message: str = ""

    def as_dict(self) -> dict:
        return {"hook": self.name, "state": self.state, "chained": self.chained, "python": self.python,
                "runs_as": self.runs_as, "message": self.message}


@dataclass
class Status:
    hooks_dir: Path
    hooks_path: str | None
    hooks: list[HookStatus]
    notes: list[str] = field(default_factory=list)

    @property
    def installed(self) -> bool:
        return all(h.state == "installed" for h in self.hooks)

    def as_dict(self) -> dict:
        return {
            "hooks_dir": os.fspath(self.hooks_dir),
            "core_hooks_path": self.hooks_path,
            "installed": self.installed,
            "hooks": [h.as_dict() for h in self.hooks],
            "notes": list(self.notes),
        }


def _template_body(data: bytes) -> bytes:
    """The shim without the lines install fills in, to compare versions."""
    return b"\n".join(ln for ln in data.splitlines()
                      if not ln.startswith((b"nerve_python=", b"nerve_root=", b"nerve_hook=", b"nerve_forward=")))


def _shim_state(path: Path, current: bytes) -> tuple[str, str | None]:
    python, root = recorded(path)
    if not _runnable(python, root):
        return "broken", python
    same = _template_body(_read(path) or b"") == current
    return ("installed" if same and os.access(path, os.X_OK) else "outdated"), python


def status(paths: RepoPaths, config=None) -> Status:
    """What runs when git runs each of our hooks, told as it is (a displaced shim is not "chained").
    ``config``: the worktree's configuration, when the caller has it (where.py: fewer git processes)."""
    forward = forward_dir(paths, config)
    directory = hooks_dir(paths, config)
    current = _template_body(render())
    hooks = []
    notes = []
    if forward is not None and directory != _worktree_hooks_dir(paths):
        notes.append(f"this worker's worktree runs the hooks in {forward} (inside the work tree); "
                     "`git nerve hooks install` moves git-nerve's to its git dir")
    lfs = lfs_configured(paths, config) and forward is None
    for name in HOOKS:
        path = directory / name
        kept = kept_hooks(directory, name)
        chained = kept[0].name if kept else None
        if forward is not None and directory == _worktree_hooks_dir(paths):
            chained = f"{forward}/{name}" if (paths.toplevel / forward / name).is_file() else None
        displaced = displaced_copies(directory, name)
        if os.path.lexists(path) and is_ours(path):
            state, python = _shim_state(path, current)
            h = HookStatus(name, state, chained, python)
        elif forward is None and os.path.isfile(path) and chains_us(path):  # a team's hook calling `hook-run`
            h = HookStatus(name, "installed", None, None, None, "the hook runs git-nerve's part itself (hook-run)")
        elif os.path.lexists(path):
            manager = manager_of(path)
            who = manager[0] if manager else "another tool"
            runs = [p for p in displaced if manager and manager[3] and p.name == name + manager[2]]
            if runs:
                state, python = _shim_state(runs[0], current)
                h = HookStatus(name, state, chained, python, runs[0].name, f"{who}'s hook runs it as {runs[0].name}")
            elif displaced:
                h = HookStatus(name, "displaced", chained, None, None,
                               f"{who} put its hook here and moved git-nerve's to {displaced[0].name}, which nothing runs")
            else:
                h = HookStatus(name, "foreign", chained, None, None, f"{who}'s hook, not git-nerve's")
        else:
            h = HookStatus(name, "missing", chained)
        if h.state == "installed" and not os.access(h.runs_as and directory / h.runs_as or path, os.X_OK):
            h.state = "disabled"
        if lfs and name in LFS_HOOKS and not _lfs_chained(directory, name) and h.state in ("installed", "outdated"):
            h.state = "outdated"
            h.message = (h.message + "; " if h.message else "") + "git-lfs is set up but its hook is not chained"
        hooks.append(h)
    return Status(directory, hooks_path_setting(paths, config), hooks, notes)


def installed(paths: RepoPaths, config=None) -> bool:
    """True when every hook is our current shim and can start its interpreter."""
    try:
        return status(paths, config).installed
    except (NerveError, OSError):
        return False
