"""Console-script entry points: ``git-worker`` and ``git-nerve``.

``git worker heartbeat`` is called every few seconds by agents and wrappers;
it takes a standard-library-only path (no click, no pygit2) unless help is
asked for.
"""

from __future__ import annotations

import sys


def worker_main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["heartbeat"] and not {"-h", "--help"} & set(argv):
        from ..worker.heartbeat import main as heartbeat_main

        sys.exit(heartbeat_main(argv[1:]))
    if argv[:1] == ["help"]:
        sys.argv = [sys.argv[0], *argv[1:], "--help"]
    from .. import liveness

    liveness.enable()  # what this command's git children hold is proven ours only through its token
    from .worker import worker

    worker(prog_name="git worker")


def nerve_main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["notes"] and any(a == "--hook" or a.startswith("--hook=") for a in argv) \
            and not {"-h", "--help"} & set(argv):
        from ..steer.notes_hook import main as notes_main  # an agent CLI's hook: standard library + bus only

        sys.exit(notes_main(argv[1:]))
    if argv[:1] == ["help"]:
        sys.argv = [sys.argv[0], *argv[1:], "--help"]
    if argv[:1] != ["hook-run"]:
        from .. import liveness

        liveness.enable()
    from .nerve import nerve

    nerve(prog_name="git nerve")
