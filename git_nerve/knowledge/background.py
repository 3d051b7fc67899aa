"""The detached sync the post-commit trigger starts (``python -m git_nerve.knowledge.background``).

It takes the knowledge lock without waiting (another sync running: it exits
and that one picks the queued lists up), syncs the files of every queued list
until none is left, lets the lock go and looks once more (see :mod:`.trigger`).
Each run appends one line to ``<git-dir>/nerve/knowledge-sync.log`` and
records its outcome for ``git nerve knowledge status``. A list whose sync
failed is dropped (the failure is recorded) so a broken ``knowledge.yaml``
cannot keep it busy; the next manual sync catches up.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .. import locks
from ..paths import RepoPaths
from . import trigger


def log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    sys.stdout.write(f"{stamp} {message}\n")
    sys.stdout.flush()


#: tries to take the lock: a query's probe (:func:`locks.is_held`) holds it for an instant, a sync for as long as
#: it runs; one refusal alone must not leave the queue to a holder that takes nothing
TAKE_TRIES = 5


def _take(path):
    """The knowledge lock, or None when a sync holds it (refused :data:`TAKE_TRIES` times, 0.1 s apart)."""
    for attempt in range(TAKE_TRIES):
        held = locks.try_hold(path)
        if held is not None or attempt == TAKE_TRIES - 1:
            return held
        time.sleep(0.1)
    return None


def run(paths: RepoPaths) -> int:
    """Drain the queue of this worktree; 0 unless the last sync failed."""
    from .status import record_background
    from .sync import sync

    status = 0
    while True:
        held = _take(trigger.lock_path(paths.git_dir))
        if held is None:
            return status  # the holder takes our list (it looks again after letting go)
        try:
            while lists := trigger.queued(paths.git_dir):
                files = trigger.read_pending(lists)
                try:
                    report = sync(paths, files=files, lock=False)
                except Exception as exc:  # noqa: BLE001 - logged and recorded; a detached process has no one to tell
                    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                    log(f"sync of {len(files)} files failed: {message}")
                    record_background(paths.git_dir, False, message, len(files))
                    status = 1
                else:
                    summary = (
                        f"{'whole-tree' if report.scope == 'all' else 'committed files'} sync: {report.added} added, {report.changed} changed, {report.removed} removed, "
                        f"{report.skipped_total} skipped; {report.chunks_written} chunk{'' if report.chunks_written == 1 else 's'} written "
                        f"in {report.seconds:.2f}s"
                    )
                    log(summary + "".join(f"; warning: {w}" for w in report.warnings))
                    record_background(paths.git_dir, True, summary, len(files))
                    status = 0
                finally:
                    trigger.clear_pending(lists)
        finally:
            held.__exit__(None, None, None)
        if not trigger.queued(paths.git_dir):
            return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m git_nerve.knowledge.background", description=__doc__.splitlines()[0])
    parser.add_argument("--toplevel", required=True, type=Path)
    parser.add_argument("--git-dir", required=True, type=Path)
    parser.add_argument("--common-dir", required=True, type=Path)
    args = parser.parse_args(argv)
    return run(RepoPaths(args.git_dir, args.common_dir, args.toplevel))


if __name__ == "__main__":
    sys.exit(main())
