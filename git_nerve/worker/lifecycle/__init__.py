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

* :mod:`.repo`: ``Repo``, ``open_repo``, ``refuse_bare``, ``integration_ref``, ``repair_leftovers``,
  ``door_scope`` and the small shared helpers (the fetch and task locks are :mod:`..locking`'s).
* :mod:`.worktree`: a live task's worktree followed, recreated, verified.
* :mod:`.guards`: the refusals several verbs share.
* :mod:`.spawn`: ``spawn``.
* :mod:`.work`: ``start``, ``fail``, ``heartbeat``, ``done`` (and its rebase).
* :mod:`.review`: ``approve``, ``request_changes``.
* :mod:`.advance`: moving the local integration branch (fast-forward, sync).
* :mod:`.check`: ``parse_check``, a check run in a temporary checkout, ``check_combination``.
* :mod:`.cleanup`: the one cleanup of a task (merge and ``cancel --cleanup``).
* :mod:`.merge`: ``merge``, ``unfinished_cleanups``.
* :mod:`.cancel`: ``cancel``, ``retry``, ``show``.
"""

from __future__ import annotations

from ..locking import fetch_branches, task_lock
from ..transitions import get
from .cancel import CancelResult, cancel, retry, show
from .check import check_combination, parse_check
from .merge import MERGE_ATTEMPTS, MergeResult, merge, unfinished_cleanups
from .advance import FF_MARKER
from .repo import Repo, door_scope, integration_ref, open_repo, refuse_bare, repair_leftovers
from .review import approve, request_changes
from .spawn import SpawnResult, spawn
from .work import REBASE_STEPS, DoneResult, done, fail, heartbeat, start
from .worktree import follow_moved_worktree

__all__ = [
    "Repo", "open_repo", "spawn", "start", "done", "fail", "approve", "request_changes", "merge", "cancel",
    "retry", "show", "heartbeat", "SpawnResult", "DoneResult", "MergeResult", "CancelResult",
]

#: the other names modules, tests and benchmarks import from here (kept importable as before the split)
_ALSO = (fetch_branches, task_lock, get, check_combination, parse_check, MERGE_ATTEMPTS, unfinished_cleanups,
         FF_MARKER, door_scope, integration_ref, refuse_bare, repair_leftovers, REBASE_STEPS, follow_moved_worktree)
