"""What the bench scripts share: timing one command, and start-up figures that mean something.

The scripts put the repository root on ``sys.path`` and import this as ``bench.common``.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path


def timed(argv: list[str], cwd: Path, env: dict, ok: tuple[int, ...] = (0,)) -> float:
    """Seconds ``argv`` took; stops the benchmark with git's message when it exits outside ``ok``."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, check=False, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return elapsed


def bytecode_cache(env: dict, cache_dir: Path) -> None:
    """Let the processes a benchmark starts keep their bytecode (in ``cache_dir``), as after
    ``pip install``, even where PYTHONDONTWRITEBYTECODE is set: otherwise every command
    compiles git_nerve from source and its start-up figures mean nothing."""
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache_dir)


@contextlib.contextmanager
def postgres_bench(prefix: str):
    """A temporary root with a hermetic environment (this process's: the clones' commands inherit it, no
    connection setting of the person leaks in) and a real PostgreSQL (tests/pg_support.py) for a bench: (root,
    server); afterwards every clone's listener under root is stopped and the server removed."""
    import os
    import sys
    import tempfile

    from fixtures.repos import build
    from tests.pg_support import Server, stop_listeners

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = Path(tmp)
        os.environ.update(build.hermetic_env(root / "home"))
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        for key in [k for k in os.environ if k == "NERVE_DATABASE_URL" or k.startswith("PG")]:
            del os.environ[key]
        server = Server()
        server.start()
        try:
            yield root, server
        finally:
            for sub in [root, *[d for d in root.iterdir() if d.is_dir()]]:
                stop_listeners(sub)
            server.remove()
