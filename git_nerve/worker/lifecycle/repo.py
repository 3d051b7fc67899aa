"""The repository handle and the helpers every lifecycle verb shares.

Holds :class:`Repo` (one command's view of a repository: paths, bus, settings), ``open_repo`` /
``refuse_bare``, ``integration_ref``, ``repair_leftovers``, ``door_scope`` (what the door for destruction
proves against), ``_require_tip``, ``_publish`` (one bus message), ``_archived_tip``; the fetch and task
locks (``fetch_branches``, ``task_lock``) live in :mod:`..locking` (the package re-exports them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ... import clock
from ...bus import messages, workers
from ...bus.connection import Bus
from ...errors import GitError
from ...git import config as gitconfig
from ...git import refs
from ...paths import RepoPaths, discover
from ..settings import Settings
from ..settings import load as load_settings
from ..states import State

TYPE_CHECKING = False  # the door (git/destroy.py), the repair and the locks: imported where used, not by a reader
if TYPE_CHECKING:
    from ...git import destroy


class Repo:
    """One command's view of a repository: where it lives, its bus, its settings."""

    def __init__(self, paths: RepoPaths, bus: Bus):
        self.paths = paths
        self.bus = bus
        self._config: gitconfig.GitConfig | None = None
        self._settings: Settings | None = None
        #: what installs missing hooks (spawn), set by the front end that opened the repository
        #: (``hooks.install.install_missing``): (paths[, that worktree's GitConfig]) -> None when installed already,
        #: else what could not be
        self.hook_installer: Callable[..., list[str] | None] | None = None

    @property
    def cwd(self) -> Path:
        """Where repository-wide git commands run.

        The common dir once this worktree is gone (``merge`` or ``cancel
        --cleanup`` run from inside the task's own worktree removes it).
        """
        top = self.paths.toplevel
        return top if top is not None and top.is_dir() else self.paths.common_dir

    @property
    def config(self) -> gitconfig.GitConfig:
        if self._config is None:
            self._config = gitconfig.read(self.cwd)
        return self._config

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.paths, self.config)
        return self._settings

    def lock_path(self, name: str) -> Path:
        return self.paths.nerve_dir / "locks" / f"{name}.lock"

    def close(self) -> None:
        self.bus.close()

    def __enter__(self) -> Repo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def refuse_bare(cwd: str | os.PathLike[str] | None = None) -> None:
    """UsageError in a bare repository, before a command creates anything there (its bus)."""
    paths = discover(cwd)
    if paths.toplevel is None:
        gitconfig.refuse_bare(gitconfig.read(paths.common_dir), None, "spawn workers")


def open_repo(cwd: str | os.PathLike[str] | None = None, *, create: bool = True, ingest: bool = True,
              bare: str = "run git-nerve") -> Repo:
    """``ingest=False``: for a reader whose answer does not depend on the commits the hooks spooled (the
    radar's pairs): it does not wait for the bus's write lock to record them. ``bare``: what a bare repository
    refuses to do (the message; ``spawn workers`` for spawn)."""
    paths = discover(cwd)
    if paths.toplevel is None:  # a bare repository is a remote: refused before anything is read or made there
        gitconfig.refuse_bare(gitconfig.read(paths.common_dir), None, bare)
    return Repo(paths, Bus(paths.bus_path, create=create, ingest=ingest))


def integration_ref(repo: Repo, integration: str, *, fetch: bool) -> str:
    """The ref that holds the integration branch's current tip, fetching first when there is a remote."""
    remote = repo.settings.remote
    if remote:
        if fetch:
            from ..locking import fetch_branches

            fetch_branches(repo, remote, [integration])
        ref = f"refs/remotes/{remote}/{integration}"
        if refs.exists(repo.cwd, ref):
            return ref
    ref = f"refs/heads/{integration}"
    if not refs.exists(repo.cwd, ref):
        raise GitError(f"the integration branch {integration!r} does not exist (set `git config nerve.integration <branch>`)")
    return ref


def repair_leftovers(repo: Repo) -> list[str]:
    """Remove what killed git processes left (dead `git worktree add`s, stale lock files); one line each."""
    from ..leftovers import clean_git_leftovers
    from ..locking import add_lock

    return clean_git_leftovers(repo.paths.common_dir, cwd=repo.cwd, worktree_lock=repo.lock_path("worktrees"),
                                      scope=lambda: door_scope(repo), add_lock=lambda path: add_lock(repo, path))


def door_scope(repo: Repo) -> destroy.Scope:
    """What the door for destruction (:mod:`..git.destroy`) proves against: the roots, every task's worktree."""
    from ...git import destroy

    final = (State.COMPLETED.value, State.FAILED.value)
    rows = [(w.task_id, w.worktree, w.state not in final) for w in workers.all_workers(repo.bus.conn)]
    return destroy.scope(repo.paths.common_dir, repo.paths.main_checkout, repo.settings.worktree_root, rows)


def _require_tip(cwd: Path, rev: str, what: str) -> str:
    sha = refs.resolve(cwd, rev)
    if sha is None:
        raise GitError(f"{what} {rev!r} does not name a commit")
    return sha


def _publish(bus: Bus, task_id: str, kind: str, payload: dict) -> None:
    with bus.write() as conn:
        messages.publish(conn, task_id, kind, payload, clock.now())


def _archived_tip(repo: Repo, task_id: str) -> str:
    """The branch tip kept in the archive (a snapshot's parent, when uncommitted work was archived)."""
    ref = refs.archive_name(task_id)
    sha = _require_tip(repo.cwd, ref, "archive")
    if refs.commit_subject(repo.cwd, sha).startswith("nerve snapshot"):
        return refs.rev_parse(repo.cwd, f"{sha}^1")
    return sha


def trust_flags(repo: Repo, w: workers.Worker) -> list[str]:
    """One line per committed setting that runs a command (or widens what agents get) the task's branch changes
    against the integration branch (:mod:`git_nerve.trust.changes`): `show`, merge and the console say it first."""
    from ...errors import NerveError
    from ...trust import changes

    if w.state in ("COMPLETED", "FAILED") or not w.branch:
        return []  # merged or given up: nothing left to approve
    try:
        integration = w.integration or repo.settings.integration
        remote = repo.settings.remote
    except NerveError:  # cannot tell the integration branch: nothing to compare with
        return []
    candidates = ([f"refs/remotes/{remote}/{integration}"] if remote else []) + [f"refs/heads/{integration}"]
    return changes.of_branch(repo.cwd, candidates, f"refs/heads/{w.branch}")


def show(repo: Repo, task_id: str) -> tuple[workers.Worker, list[messages.Message]]:
    """A task's row and its whole message history (`git worker show`): here, not beside cancel, so that a reader
    imports no verb."""
    w = workers.get(repo.bus.conn, task_id)
    if w is None:
        from ..transitions import unknown

        raise unknown(task_id)
    return w, messages.for_task(repo.bus.conn, task_id)
