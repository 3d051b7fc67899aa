"""`--check CMD`: parsed (``parse_check``), run on a merge result in a temporary checkout (``_run_check``),
and on a batch of the merge queue (``check_combination``).
"""

from __future__ import annotations

import shlex
import subprocess

from ...errors import CheckFailed, ConflictError, UsageError
from ...git import cli, worktrees
from ..transitions import get
from .repo import Repo, _require_tip, integration_ref


def _parse_check(check: str | None) -> list[str] | None:
    """``--check CMD`` as an argv; None only when no --check was given. An empty or blank
    command (a script's ``--check "$CHECK"`` with CHECK unset) is a usage error, not "no check"."""
    if check is None:
        return None
    try:
        argv = shlex.split(check)
    except ValueError as exc:
        raise UsageError(f"--check: {exc}") from None
    if not argv:
        raise UsageError("--check needs a command (it was given an empty one); nothing was merged")
    return argv


parse_check = _parse_check

from ...trust import DEFAULT_CHECK  # noqa: E402,F401  (a bare --check: [run] test_command, once trusted)


def check_command(repo: Repo, check: str | None) -> str | None:
    """``check`` as given, or for a bare ``--check`` the repository's test command when this user trusted its
    content (else :class:`~git_nerve.trust.Untrusted`, exit 7, nothing merged). A command typed on the command
    line is the person's own: it runs as typed."""
    if check != DEFAULT_CHECK:
        return check
    from ... import trust

    return trust.default_check(repo.paths.common_dir, repo.paths.toplevel or repo.cwd)


def _run_check(repo: Repo, commit: str, argv: list[str]) -> None:
    # a temporary checkout of ours (recorded, under <common>/nerve/tmp/): one a killed merge leaves is removed
    # by the next command, never left registered
    with worktrees.checkout_at(repo.cwd, repo.paths.common_dir, commit, what="check") as path:
        try:
            proc = subprocess.run(argv, cwd=path, env=cli.clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except FileNotFoundError:
            raise CheckFailed(f"--check: command not found: {argv[0]}; nothing was merged") from None
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.splitlines()[-15:])
            raise CheckFailed(
                f"--check `{shlex.join(argv)}` failed with exit {proc.returncode}; nothing was merged",
                details=[tail] if tail else [],
            )


def check_combination(repo: Repo, task_ids: list[str], check: str, *, fetch: bool = False) -> str | None:
    """Run ``check`` once on the integration tip with ``task_ids`` merged onto it in order (in memory,
    then in a temporary detached worktree, as `merge --check` does); None when it passes, else its output.

    A task that does not merge cleanly onto the ones before it raises :class:`ConflictError`
    naming it (its own `merge` then sends it back). Nothing is published and no state changes.
    """
    from ...git import objects

    argv = _parse_check(check)
    assert argv is not None
    integration = repo.settings.integration
    ours = _require_tip(repo.cwd, integration_ref(repo, integration, fetch=fetch), "the integration branch")
    committer = objects.identity(repo.cwd)
    author = objects.identity(repo.cwd, "GIT_AUTHOR_IDENT")
    for task_id in task_ids:
        w = get(repo.bus, task_id)
        tip = _require_tip(repo.cwd, f"refs/heads/{w.branch}", f"the branch of {task_id}")
        mr = objects.merge_commit(repo.paths.common_dir, ours, tip, f"Merge {w.branch} ({task_id}) [queue check]", author, committer)
        if mr.commit is None:
            raise ConflictError(f"{task_id} does not merge onto the tasks before it in the batch", files=mr.conflicts,
                                details=[task_id])
        ours = mr.commit
    try:
        _run_check(repo, ours, argv)
    except CheckFailed as exc:
        return "\n".join([exc.message, *exc.details])
    return None
