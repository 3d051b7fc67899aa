"""The task lifecycle: spawn, start, done, review, merge, cancel, retry, fail.

Rules every function here keeps:

* The bus is the only source of truth; every state change is a
  compare-and-set (:mod:`..transitions`).
* No git or subprocess work runs while a bus write transaction is open.
* Git work happens first, the bus row last, so a command killed half-way is
  finished by running it again (each command is idempotent).
* Nothing unmerged is ever destroyed: before a branch or worktree is removed
  its tip (and, with ``--force``, a snapshot of uncommitted work) is kept
  under ``refs/nerve/archive/<task-id>``.

The package re-exports every name other modules use from ``git_nerve.worker.lifecycle``;
its modules, lowest first:

* :mod:`.repo`: ``Repo``, ``open_repo``, ``refuse_bare``, ``integration_ref``, ``repair_leftovers``, ``show``,
  ``door_scope`` and the small shared helpers (the fetch and task locks are :mod:`..locking`'s).
* :mod:`.worktree`: a live task's worktree followed, recreated, verified.
* :mod:`.guards`: the refusals several verbs share.
* :mod:`.spawning`: ``spawn``.
* :mod:`.begin`: ``start``.
* :mod:`.work`: ``fail``, ``heartbeat``, ``done`` (and its rebase).
* :mod:`.review`: ``approve``, ``request_changes``.
* :mod:`.advance`: moving the local integration branch (fast-forward, sync).
* :mod:`.check`: ``parse_check``, a check run in a temporary checkout, ``check_combination``.
* :mod:`.cleanup`: the one cleanup of a task (merge and ``cancel --cleanup``).
* :mod:`.merging`: ``merge``, ``unfinished_cleanups``.
* :mod:`.cancelling`: ``cancel``, ``retry`` (``show``, a reader, is :mod:`.repo`'s).

Only :mod:`.repo` is imported with the package: a reader (``status``, ``conflicts``, the radar) opens the
repository and nothing else, and importing every verb cost it more than starting Python. The other names are
imported on first use (module ``__getattr__``). No module is named like a verb (``lifecycle.merge`` is the
function, its module :mod:`.merging`), so ``import git_nerve.worker.lifecycle.X as m`` is always the module X.
"""

from __future__ import annotations

import importlib

from .repo import Repo, door_scope, integration_ref, open_repo, refuse_bare, repair_leftovers, show, trust_flags

__all__ = [
    "Repo", "open_repo", "spawn", "start", "done", "fail", "approve", "request_changes", "merge", "cancel",
    "retry", "show", "trust_flags", "heartbeat", "SpawnResult", "DoneResult", "MergeResult", "CancelResult",
]

#: every other name modules, tests and benchmarks import from here, and the module (relative to this package)
#: that defines it, imported on first use
_LAZY = {
    "fetch_branches": "..locking", "task_lock": "..locking", "get": "..transitions",
    "CancelResult": ".cancelling", "cancel": ".cancelling", "retry": ".cancelling",
    "check_combination": ".check", "parse_check": ".check", "check_command": ".check", "DEFAULT_CHECK": ".check",
    "MERGE_ATTEMPTS": ".merging", "MergeResult": ".merging", "merge": ".merging", "unfinished_cleanups": ".merging",
    "merge_conflict_steps": ".merging",
    "FF_MARKER": ".advance",
    "approve": ".review", "request_changes": ".review",
    "SpawnResult": ".spawning", "spawn": ".spawning", "setup_again": ".spawning",
    "REBASE_STEPS": ".work", "DoneResult": ".work", "done": ".work", "fail": ".work", "heartbeat": ".work",
    "start": ".begin",
    "follow_moved_worktree": ".worktree",
}


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

