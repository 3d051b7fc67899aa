"""What the start-up cost tests share: which modules a fresh interpreter has loaded after importing a hot path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def loaded_after(imports: list[str], watched: tuple[str, ...]) -> list[str]:
    """Those of ``watched`` in ``sys.modules`` of a fresh interpreter (``-S``: no site packages' start-up hooks; this
    tree's git_nerve first on the path) once it has imported ``imports``."""
    probe = ("import sys; sys.path.insert(0, sys.argv[1]);" + "".join(f"import {m};" for m in imports)
             + f"print(' '.join(m for m in {watched!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-S", "-c", probe, str(ROOT)], capture_output=True, text=True, check=True)
    return proc.stdout.split()
