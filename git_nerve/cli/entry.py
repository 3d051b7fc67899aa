"""Console-script entry points: ``git-worker`` and ``git-nerve``.

``git worker heartbeat`` is called every few seconds by agents and wrappers;
it takes a standard-library-only path (no click, no pygit2) unless help is
asked for. A plain `git worker spawn`, `start`, `done`, `status --json`,
`show T --json` and `conflicts --json` skip click too (:func:`_fast`); the
last three first ask the clone's warm reader, when one runs
(:mod:`git_nerve.warm`). ``git nerve knowledge query`` (an agent's
"where is X") takes a click-free path too when its arguments are plain;
anything else, and any error, goes the click way, which reports it as
documented.
"""

from __future__ import annotations

import os
import sys


def worker_main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["heartbeat"] and not {"-h", "--help"} & set(argv):
        from ..worker.heartbeat import main as heartbeat_main

        sys.exit(heartbeat_main(argv[1:]))
    if argv[:1] in (["status"], ["show"], ["conflicts"]):
        from ..warm.client import answer  # the clone's warm reader first (os, sys, _socket, json only)

        code = answer(argv)
        if code is not None:
            sys.exit(code)
    if argv[:1] in (["spawn"], ["start"], ["done"], ["status"], ["show"], ["conflicts"]) and _fast(argv[0], argv[1:]):
        sys.exit(0)
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
    if argv[:2] == ["knowledge", "query"] and _query(argv[2:]):
        sys.exit(0)
    if argv[:1] == ["thread"] and _thread(argv[1:]):
        sys.exit(0)
    if argv[:1] == ["help"]:
        sys.argv = [sys.argv[0], *argv[1:], "--help"]
    from .nerve import nerve

    if not _before_click(nerve, "git-nerve") and argv[:1] != ["hook-run"]:
        _enable_liveness()
    nerve(prog_name="git nerve", complete_var="_GIT_NERVE_COMPLETE")


def _fast(command: str, args: list[str], *, served: bool = False) -> bool:
    """`git worker spawn`, `start`, `done`, `status --json`, `show T --json` and `conflicts --json` with plain
    arguments, without click (issue 27: an agent runs them often): the same body as their click commands
    (:mod:`.spawning`, :mod:`.verbs`), and any error reported by click's own handler (common.run_mapped, imported
    only then), so both ways print and exit alike. False, having done nothing, for anything else (help, a
    completion request, arguments click must read). ``served``: run by the warm reader, where `conflicts --json`
    raises :class:`.verbs.Recompute` (printing nothing) instead of recomputing the radar."""
    from ..completion import COMPLETE_VARS

    passed: tuple = (SystemExit,)  # what goes up as it is, not to the handler
    if command == "spawn":
        from .spawning import plain_args, run_spawn

        kw, run = plain_args(args), run_spawn
    else:
        from . import verbs

        kw, run = verbs.plain_args(command, args, served=served), verbs.RUN[command]
        passed = (SystemExit, verbs.Recompute)
    if kw is None or COMPLETE_VARS["git-worker"] in os.environ:
        return False
    _before_click(None, "git-worker")  # the man pages, as click's path does first
    _enable_liveness()
    _reported(lambda: run(**kw), passed)
    if command in ("status", "show", "conflicts"):
        _warm_up()
    elif command == "spawn":
        from ..warm.start import after_spawn

        after_spawn()
    return True


def _reported(run, passed: tuple) -> None:
    """``run()``; an error other than ``passed`` is reported by the one handler every command's errors meet
    (common.run_mapped, imported only then), so a click-free path prints and exits as its click command does."""
    try:
        run()
    except BaseException as exc:  # noqa: BLE001 - handed to the one handler every command's errors meet
        if isinstance(exc, passed):
            raise
        from .common import run_mapped

        def again():
            raise exc

        run_mapped(again)
        raise


def _warm_up() -> None:
    """No warm reader answered for this clone (:mod:`git_nerve.warm.client`): one is started when it is worth it,
    after this command answered itself (never in the warm reader itself, which asks none)."""
    from ..warm import client

    if client.missing is not None:
        from ..warm.start import after_direct

        after_direct(client.missing)


def _serve_mcp(args: list[str]) -> bool:
    """`git nerve mcp [--task TASK]` without click (an agent CLI waits for its first answer); False, having done
    nothing, for anything else or anything to report (click's path then says it, the documented way)."""
    from ..options import plain

    kw = plain("nerve mcp", args)
    if kw is None:
        return False
    task = kw["task"]
    from ..mcptools import tools

    try:
        binding = tools.bind(None, task)
    except Exception:  # noqa: BLE001 - reported by click's path, which does it again
        return False
    _enable_liveness()
    from ..mcptools import front

    front.serve(binding)
    return True


def _query_args(args: list[str]) -> tuple[list[str], int, bool, str | None, bool] | None:
    """(words, limit, --json, --repo, -g) of plain `knowledge query` arguments, as the one table of options reads
    them (:func:`git_nerve.options.plain`); None for anything else (help, a completion request, an option click
    would refuse or spell differently: click's path says it)."""
    from ..options import plain

    kw = plain("nerve knowledge query", args)
    if kw is None or (kw["repo"] is not None and kw["everywhere"]) or "_GIT_NERVE_COMPLETE" in os.environ:
        return None
    return list(kw["text"]), kw["limit"], kw["as_json"], kw["repo"], kw["everywhere"]


def _query(args: list[str]) -> bool:
    """`git nerve knowledge query` without click (the same search, the same printing); False, having printed
    nothing, for anything to report or that is not plain."""
    parsed = _query_args(args)
    if parsed is None:
        return False
    words, limit, as_json, repo, everywhere = parsed
    from ..knowledge import query as kquery

    try:
        if everywhere:
            result = kquery.search_everywhere(" ".join(words), limit)
        else:
            result = kquery.search(kquery.open_paths(repo), " ".join(words), limit)
    except KeyboardInterrupt:
        from ..errors import ExitCode

        sys.stderr.write("interrupted\n")
        sys.exit(int(ExitCode.INTERRUPTED))
    except Exception:  # noqa: BLE001 - reported by click's path, which searches again (a query changes nothing)
        return False
    from .knowledge_print import print_query

    try:
        print_query(result, everywhere=everywhere, as_json=as_json)
    except BrokenPipeError:  # piped into `head`: not an error (as common.run_mapped)
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
    return True


def _thread(args: list[str]) -> bool:
    """`git nerve thread` without click (an agent reads its thread first, and often): the same view, the same
    printing (:mod:`.thread_print`); an error is reported by click's own handler (common.run_mapped, imported only
    then), as :func:`_fast` does. False, having done nothing, for anything that is not plain."""
    from .thread_print import print_view, thread_args

    parsed = thread_args(args)
    if parsed is None or "_GIT_NERVE_COMPLETE" in os.environ:
        return False
    thread_id, before, budget, as_json = parsed

    def run() -> None:
        from ..thread import service
        from ..thread.select import DEFAULT_BUDGET

        view = service.show(
            thread_id,
            before=None if before is None else service.parse_positive("--before", before, "a round id"),
            budget=DEFAULT_BUDGET if budget is None else service.parse_positive("--budget", budget, "a number of characters"),
        )
        print_view(view, before, as_json)

    _before_click(None, "git-nerve")  # the man pages, as click's path does first
    _reported(run, (SystemExit,))
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
