"""The sync a transition starts and never waits for (shared mode): ``python -m git_nerve.shared.background --cwd DIR``.

It publishes what this machine wrote (the transition's messages, the hooks' commits and heartbeats queued since
the last sync) and refreshes the cached view. One waits at a time behind the one running (the pending lock);
more triggers meanwhile are covered by the one waiting. ``[shared] background = false`` turns it off (then
only `git nerve sync` publishes). Signs of life start one too (:func:`renew`: a commit, a heartbeat), so that
this machine's leases hold while it works.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .. import detach, locks

LOG = "shared-sync.log"


def lock_paths(common_dir: Path) -> tuple[Path, Path]:
    """(the sync lock every sync holds, the lock of the one background sync waiting for it)."""
    base = Path(common_dir) / "nerve" / "locks"
    return base / "shared-sync.lock", base / "shared-sync-pending.lock"


def spawn(common_dir: Path, cwd: Path) -> None:
    """Start a background sync detached (new session, output to ``<common>/nerve/shared-sync.log``), unless one
    is already waiting to run. Never fails the command that asked for it."""
    from ..git.cli import clean_env

    if locks.is_held(lock_paths(common_dir)[1]):
        return  # one is waiting: it will see this machine's latest records too
    try:
        detach.start("git_nerve.shared.background", ["--cwd", os.fspath(cwd)], cwd=cwd,
                     log=Path(common_dir) / "nerve" / LOG, env=clean_env())
    except OSError as exc:
        print(f"git-nerve: background sync not started: {exc}", file=sys.stderr)


def renew(conn, common_dir: Path, cwd: Path | None = None) -> bool:
    """A sign of life of this machine (a commit, a heartbeat): start a background sync when its records have not
    reached the shared store for a tenth of the lease (:func:`git_nerve.bus.shared.renewal_due`, one read of the
    cache ``conn``), so that its leases hold while it works (:mod:`.lease`). Never waits, never fails the caller.
    ``cwd``: where the sync runs (default: the main checkout). Whether one was asked for."""
    from ..bus import shared as cache

    if not cache.renewal_due(conn):
        return False
    if cwd is None:
        from ..dotgit import main_checkout

        cwd = main_checkout(Path(common_dir))
        if cwd is None or not cwd.is_dir():
            return False
    spawn(Path(common_dir), Path(cwd))
    return True


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="git_nerve.shared.background")
    parser.add_argument("--cwd", required=True)
    args = parser.parse_args(argv)
    from ..errors import NerveError
    from ..paths import discover
    from .status import run_sync

    try:
        running, pending = lock_paths(discover(args.cwd).common_dir)
        held = locks.try_hold(pending)
        if held is None:
            return 0  # another background sync is waiting already
        try:  # (try_hold's lock is held already)
            with locks.hold(running, timeout=300, what="the sync lock"):
                pass  # the sync under way is over: what it missed is this one's
        finally:
            held.__exit__(None, None, None)
        # the pending lock is free again: a trigger from now on starts the next one
        report = run_sync(args.cwd)
        print(f"sync: {report.get('exported', 0)} published, {report.get('ingested', 0)} ingested")
    except NerveError as exc:
        print(f"sync: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
