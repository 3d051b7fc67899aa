"""What `git worker spawn` does and prints, without click: called by its click command (cli/worker.py) and by
the click-free path entry.py takes for plain arguments (a spawn then pays neither click's import nor the
commands' registration). Errors are raised: the caller reports them (common.run_mapped, the one place)."""

from __future__ import annotations

from .opening import _repo
from .plain import json_out as echo_json
from .plain import line as echo
from .plain import warning as warn
from .prep import prep_fields, print_prep, refuse_failed_setup


def run_spawn(task_id: str, description: str, from_ref: str | None, no_fetch: bool, adopt: bool, wait: bool,
              as_json: bool) -> None:
    from ..worker import ids, lifecycle

    ids.validate(task_id)  # before the bus is created: bad input leaves nothing behind
    ids.validate_description(description)
    with _repo(bare="spawn workers") as repo:  # a bare repository is refused before the bus is created
        res = lifecycle.spawn(repo, task_id, description=description, from_ref=from_ref, fetch=not no_fetch, adopt=adopt,
                              wait=wait)
        if res.created:  # knowledge fresh by default: the new worktree's view, in the background
            from ..knowledge.trigger import after_spawn

            warning = after_spawn(repo.config.get("nerve.knowledge"), res.worker.worktree, repo.paths.common_dir)
            res.warnings += [warning] if warning else []
        for w in res.warnings:
            warn(w)
        if as_json:
            from .verbs import row

            echo_json({**row(repo, task_id), **prep_fields(repo, res.worker, measure=False)})
            return
        w = res.worker
        echo(f"{'Created' if res.created else 'Exists'} worker: {w.task_id}")
        echo(f"  Branch:   {w.branch}" + ("  (adopted: git-nerve never deletes it)" if w.adopted else ""))
        echo(f"  Worktree: {w.worktree}")
        echo(f"  Base:     {w.base}")
        echo(f"  State:    {w.state}")
        if res.hooks_installed:
            echo("  Hooks:    installed (post-commit, post-rewrite, pre-push)")
        print_prep(res.prep)
    refuse_failed_setup(res.prep)


def plain_args(args: list[str]) -> dict | None:
    """The keyword arguments of :func:`run_spawn` from plain `spawn` arguments, as the one table of options reads
    them (:func:`git_nerve.options.plain`: one task id; each option at most once, a value never looking like an
    option); None for anything else (help, an unknown option): click's path reads those, the documented way."""
    from ..options import plain

    return plain("worker spawn", args)
