"""The recompute a commit starts and never waits for: ``python -m git_nerve.radar.background --cwd WORKTREE --task T``.

One runs at a time per repository (the radar lock); a commit landing while
one runs is picked up by the next.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def spawn(worktree: str | os.PathLike[str], task_id: str, log: str | os.PathLike[str]) -> subprocess.Popen:
    """Start the recompute detached (new session, no terminal, output to ``log``)."""
    from ..git.cli import clean_env
    from ..paths import create_file, make_dirs

    make_dirs(Path(log).parent)
    env = clean_env()
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = create_file(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "git_nerve.radar.background", "--cwd", os.fspath(worktree), "--task", task_id],
            cwd=os.fspath(worktree), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            start_new_session=True, close_fds=True,
        )
    finally:
        os.close(out)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="git_nerve.radar.background")
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--task", action="append", default=[])
    args = parser.parse_args(argv)
    from ..errors import NerveError
    from ..worker.lifecycle import open_repo
    from . import notify, scan

    try:
        with open_repo(args.cwd) as repo:
            result = scan.recompute(repo, changed=args.task)
            notify.tell(repo, result.new_conflicts, result.integration)
    except NerveError as exc:
        print(f"radar: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
