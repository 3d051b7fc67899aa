"""Console-script entry points: ``git-worker`` and ``git-nerve``.

``git worker heartbeat`` is called every few seconds by agents and wrappers;
it takes a standard-library-only path (no click, no pygit2) unless help is
asked for.
"""

from __future__ import annotations

import os
import sys


def worker_main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["heartbeat"] and not {"-h", "--help"} & set(argv):
        from ..worker.heartbeat import main as heartbeat_main

        sys.exit(heartbeat_main(argv[1:]))
    if argv[:1] == ["help"]:
        sys.argv = [sys.argv[0], *argv[1:], "--help"]
    from .worker import worker

    if not _before_click(worker, "git-worker"):
        _enable_liveness()
    worker(prog_name="git worker", complete_var="_GIT_WORKER_COMPLETE")


def nerve_main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["notes"] and any(a == "--hook" or a.startswith("--hook=") for a in argv) \
            and not {"-h", "--help"} & set(argv):
        from ..steer.notes_hook import main as notes_main  # an agent CLI's hook: standard library + bus only

        sys.exit(notes_main(argv[1:]))
    if argv[:1] == ["mcp"] and _serve_mcp(argv[1:]):
        sys.exit(0)
    if argv[:1] == ["help"]:
        sys.argv = [sys.argv[0], *argv[1:], "--help"]
    from .nerve import nerve

    if not _before_click(nerve, "git-nerve") and argv[:1] != ["hook-run"]:
        _enable_liveness()
    nerve(prog_name="git nerve", complete_var="_GIT_NERVE_COMPLETE")


def _serve_mcp(args: list[str]) -> bool:
    """`git nerve mcp [--task TASK]` without click (an agent CLI waits for its first answer); False, having done
    nothing, for anything else or anything to report (click's path then says it, the documented way)."""
    if args[:1] == ["--task"] and len(args) == 2:
        task: str | None = args[1]
    elif len(args) == 1 and args[0].startswith("--task="):
        task = args[0].split("=", 1)[1]
    elif not args:
        task = None
    else:
        return False
    from ..mcptools import tools

    try:
        binding = tools.bind(None, task)
    except Exception:  # noqa: BLE001 - reported by click's path, which does it again
        return False
    _enable_liveness()
    from ..mcptools import front

    front.serve(binding)
    return True


def _enable_liveness() -> None:
    """What this command's git children hold is proven ours only through its liveness token (a TAB press, which
    only reads, takes none and writes nothing)."""
    from .. import liveness

    liveness.enable()


def _before_click(group, program: str) -> bool:
    """A TAB press (click's completion protocol): task arguments complete task ids from the bus; True.
    Otherwise: man pages linked where man finds them, when the install did not put them there (uv); False."""
    from ..completion import COMPLETE_VARS

    if COMPLETE_VARS[program] in os.environ:
        from ..completion import attach

        attach(group)
        return True
    from ..manlink import link_pages

    link_pages(sys.argv[0])
    return False
