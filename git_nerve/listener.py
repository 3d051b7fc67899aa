"""Each clone's listener on PostgreSQL (issue 29): ``python -m git_nerve.listener --cwd DIR``.

Started by the commands themselves (:func:`ensure`: every `git worker` command opening the repository, `git
nerve sync`, `tell`, `console`) when nerve.toml puts the shared state in PostgreSQL, ``[shared] listen`` is not
false and none runs for this clone (one lock test; nothing is started while one runs). It runs detached
(:mod:`git_nerve.detach`, output to ``<common>/nerve/listen.log``), one per clone (``nerve/locks/listen.lock``,
taken by the command that starts it and handed to it: the listener runs, by its lock, from the moment that
command goes on, so the next command starts none and a stop of the pid the lock names stops it),
and keeps this clone's cache fresh through LISTEN/NOTIFY (:func:`git_nerve.shared.listen.serve`): a sync within
a moment of another machine's transition or published events, so `git worker status` and `show`, a note told
from another machine (the notes hook's pending marker, set by the sync's ingest) and the console's page (its
watcher sees the bus change) follow at once; footprints of other machines' tasks that change the radar's
inputs ask for a radar recompute here. It stops by itself after ``[shared] listen_idle`` seconds without a live
task of this clone or an open console, and within seconds of this clone's configuration naming another store
(another database in ``git config nerve.database``, another schema or backend in nerve.toml, ``listen = false``):
the next command starts one on the new store. A front end: it reaches the radar (a feature) as well as shared mode.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

MODULE = "git_nerve.listener"


def ensure(common_dir, *, say=None) -> bool:
    """Start this clone's listener when it should have one and none runs; True when one was started. Never fails
    the command (``say`` gets a line when it could not start)."""
    from .shared import listen

    if not listen.wanted(common_dir) or listen.running(common_dir):
        return False
    from . import detach, locks
    from .git.cli import clean_env
    from .dotgit import main_checkout

    common = Path(common_dir)
    main = main_checkout(common)
    cwd = main if main is not None and main.is_dir() else common
    try:
        lock = locks.take(listen.lock_path(common))  # held for it from now: running() says so when we return
        if lock is None:
            return False  # another command started it meanwhile
        try:
            child = detach.start(MODULE, ["--cwd", os.fspath(cwd), "--lock-fd", str(lock)], cwd=cwd,
                                 log=common / "nerve" / listen.LOG, env=clean_env(), pass_fds=(lock,))
            locks.name_holder(lock, child.pid)
        finally:
            os.close(lock)  # the listener has its own copy of the lock (or, not started, nobody holds it)
    except OSError as exc:
        (say or _stderr)(f"the listener was not started: {exc}")
        return False
    return True


def _stderr(line: str) -> None:
    print(f"git-nerve: {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import time

    parser = argparse.ArgumentParser(prog=MODULE)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--lock-fd", type=int, help="the lock the command that started it took for it")
    args = parser.parse_args(argv)
    from . import locks
    from .bus.connection import Bus
    from .errors import NerveError
    from .paths import discover
    from .shared import listen, open_state

    try:
        paths = discover(args.cwd)
        held = locks.try_hold(listen.lock_path(paths.common_dir), handed=args.lock_fd)
        if held is None:
            return 0  # this clone's listener runs already
        try:
            state = open_state(paths.common_dir)
            if state.config.backend != "postgres" or not state.config.listen:
                return 0
            bus = Bus(paths.bus_path)
            try:
                cfg = state.config
                life = listen.Idle(bus, paths.common_dir, cfg.listen_idle, cfg.lease / 3,
                                   store=lambda: _store(paths.common_dir))
                print(f"listener {time.time():.3f}: started as {cfg.machine} (pid {os.getpid()})", flush=True)
                listen.serve(state, bus, _After(bus, paths.common_dir, args.cwd), life=life)
                why = ("this clone's configuration names another store now (nerve.toml [shared], git config "
                       "nerve.database): the next command starts a listener on it" if life.moved else
                       f"nothing live here for {cfg.listen_idle:g} s")
                print(f"listener {time.time():.3f}: {why}: stopped", flush=True)
            finally:
                bus.close()
        finally:
            held.__exit__(None, None, None)
    except NerveError as exc:
        print(f"listener: {exc.message}", file=sys.stderr, flush=True)
        return 1
    return 0


def _store(common_dir) -> tuple:
    """Which store this clone's configuration names now: (backend, schema, listen, the database's address), or
    what stops it from being read (then too the listener leaves it to the next command)."""
    from .errors import NerveError
    from .shared import open_state

    try:
        state = open_state(common_dir)
        cfg = state.config
        return (cfg.backend, cfg.schema, cfg.listen, state.url() if cfg.backend == "postgres" else None)
    except NerveError as exc:
        return ("unreadable", exc.message)


class _After:
    """What follows each sync: a line in the log only for the first sync of each connection and for errors (the
    log stays small however long the listener runs); other machines' footprints or claims that changed the
    radar's inputs: a recompute here (when this clone has a live task to compare)."""

    def __init__(self, bus, common_dir, cwd):
        self.bus, self.common_dir, self.cwd = bus, common_dir, cwd
        self.connected = False

    def __call__(self, report: dict) -> None:
        import time

        if "error" in report:
            print(f"listener {time.time():.3f}: {report['error']}", flush=True)
            self.connected = False
            return
        if not self.connected:
            print(f"listener {time.time():.3f}: listening; {report.get('exported', 0)} published, "
                  f"{report.get('ingested', 0)} ingested, {report.get('claims', 0)} claims", flush=True)
            self.connected = True
        if report.get("ingested") or report.get("claims"):
            self.radar()

    def radar(self) -> None:
        from .bus import workers
        from .radar import background, remote
        from .shared.listen import LIVE

        try:
            if remote.stale(self.common_dir, self.bus.conn) and workers.all_workers(self.bus.conn, states=LIVE):
                background.request(self.common_dir, self.cwd, None)
        except (OSError, ValueError) as exc:
            print(f"listener: the radar was not asked: {exc}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
