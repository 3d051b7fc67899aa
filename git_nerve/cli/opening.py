"""Opening the repository for a `git worker` command, without click: the repository, its tasks fenced off
(shared mode), spawn's hook installer. :mod:`.tasks` re-exports these for the click commands; `git worker
spawn`'s click-free path (:mod:`.entry`, :mod:`.spawning`) uses them directly."""

from __future__ import annotations

from .plain import warning as warn


def _repo(create: bool = True, bare: str = "run git-nerve"):
    return _repo_fenced(create, bare)[0]


def _repo_fenced(create: bool = True, bare: str = "run git-nerve") -> tuple:
    """(the repository, the tasks of it fenced off on opening it: see :func:`fence`)."""
    from ..worker.lifecycle import open_repo

    repo = open_repo(create=create, bare=bare)
    repo.hook_installer = _install_missing_hooks  # spawn installs missing hooks through the front end's installer
    listen(repo.paths.common_dir)
    return repo, fence(repo)


def listen(common_dir) -> None:
    """PostgreSQL shared mode: this clone's listener started when none runs (a lock test while one does)."""
    from ..listener import ensure

    ensure(common_dir, say=warn)


def fence(repo) -> list:
    """Shared mode: a task of this machine that another machine took over (as the last sync or refused claim
    showed) is fenced off before the command goes on (worker/fencing.py); one line each on stderr."""
    from ..errors import NerveError
    from ..worker.fencing import fence_returned

    try:
        return fence_returned(repo.bus, repo, say=warn)
    except NerveError as exc:
        warn(f"could not fence off the tasks taken over elsewhere: {exc.message}")
        return []


def _install_missing_hooks(paths, config=None):
    from ..hooks.status import installed  # the check alone: the installer's parts only when something is missing

    if installed(paths, config):
        return None
    from ..hooks.install import install_missing

    return install_missing(paths, config)
