"""What an install or an uninstall did, hook by hook (``HookChange``), and for the directory
(``InstallReport``, with its notes): what ``git nerve hooks install|uninstall`` prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path



@dataclass
class HookChange:
    name: str
    #: installed | updated | unchanged | conflict (install);
    #: removed | restored | absent | foreign (uninstall)
    action: str
    #: the kept hook (``<hook>.nerve-chained``) that runs first, if any
    chained: str | None = None
    message: str = ""

    def as_dict(self) -> dict:
        return {"hook": self.name, "action": self.action, "chained": self.chained, "message": self.message}


@dataclass
class InstallReport:
    hooks_dir: Path
    hooks_path: str | None  #: core.hooksPath as configured
    python: str | None
    hooks: list[HookChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def conflicts(self) -> list[HookChange]:
        return [h for h in self.hooks if h.action == "conflict"]

    def as_dict(self) -> dict:
        return {
            "hooks_dir": os.fspath(self.hooks_dir),
            "core_hooks_path": self.hooks_path,
            "python": self.python,
            "hooks": [h.as_dict() for h in self.hooks],
            "notes": list(self.notes),
            "ok": not self.conflicts,
        }
