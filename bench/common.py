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


def plain_env(root: Path) -> dict:
    """This process's environment with a fresh HOME under ``root`` (made), no system git config, no colour, a fixed
    identity, the venv's scripts first on PATH and bytecode kept under ``root``/pycache (:func:`bytecode_cache`)."""
    import os
    import sys

    env = {**os.environ, "HOME": str(root / "home"), "GIT_CONFIG_NOSYSTEM": "1", "NO_COLOR": "1",
           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    bytecode_cache(env, root / "pycache")
    (root / "home").mkdir()
    return env


def spawned_workers(root: Path, workers: int) -> tuple[Path, list[str], float]:
    """This process's environment made hermetic (fixtures' ``build.hermetic_env``, the venv's scripts first on PATH),
    the small repository of ``build.simple`` under ``root``, and ``workers`` tasks spawned in it: (its main checkout,
    the task ids, the perf_counter instant the spawns began)."""
    import os
    import sys

    from fixtures.repos import build

    env = build.hermetic_env(root / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    os.environ.clear()
    os.environ.update(env)
    work = build.simple(root).work
    t0 = time.perf_counter()
    tasks = [f"t{i:02d}" for i in range(workers)]
    for t in tasks:
        subprocess.run(["git", "worker", "spawn", t, "--no-fetch", "-d", f"bench task {t}"], cwd=work, check=True,
                       stdout=subprocess.DEVNULL)
    return work, tasks, t0


def worktrees_of(work: Path) -> dict[str, Path]:
    """Each task's worktree, from `git worker status --json` in ``work``."""
    import json

    rows = json.loads(subprocess.run(["git", "worker", "status", "--json"], cwd=work, check=True,
                                     capture_output=True, text=True).stdout)
    return {r["task_id"]: Path(r["worktree"]) for r in rows}


def hermetic(root: Path, *, keep_bytecode: bool = True) -> dict:
    """fixtures' hermetic environment with HOME under ``root``, the venv's scripts first on PATH and (unless not
    ``keep_bytecode``) bytecode kept under ``root``/pycache (:func:`bytecode_cache`)."""
    import os
    import sys

    from fixtures.repos import build

    env = build.hermetic_env(root / "home")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if keep_bytecode:
        bytecode_cache(env, root / "pycache")
    return env


def median_seconds(fn, runs: int) -> float:
    """The median time of ``runs`` calls of ``fn()``, in seconds."""
    import statistics

    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
