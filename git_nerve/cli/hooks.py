"""`git nerve hooks install|uninstall|status`, and the hidden `git nerve hook-run`
the shims fall back to when the interpreter that installed them is gone."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..errors import NerveError
from ..paths import discover
from .common import CONTEXT_SETTINGS, NerveGroup, echo, echo_json, warn

if TYPE_CHECKING:
    from ..hooks.install import InstallReport


@click.group("hooks", cls=NerveGroup, context_settings=CONTEXT_SETTINGS)
def hooks_group() -> None:
    """Install, remove or inspect git-nerve's git hooks.

    The hooks (post-commit, post-merge, post-rewrite, pre-push) go where git
    looks for hooks: `git rev-parse --git-path hooks`, which honours
    core.hooksPath and is shared by all worktrees. A hook that is already
    there (another manager's: pre-commit, lefthook, husky, git-lfs) is kept
    and still runs, first:

    \b
        <hooks dir>/post-commit                 git-nerve's shim
        <hooks dir>/post-commit.nerve-chained   the hook that was there
        <hooks dir>/post-commit.nerve-chained-2 a hook put over ours later

    In a worker's worktree under a relative core.hooksPath (husky's
    .husky/_, inside the work tree), the worker's hooks live in its git dir
    (core.hooksPath set for that worktree only) and run husky's first.
    """


def _print_changes(report: InstallReport, verb: str) -> None:
    echo(f"{verb} {report.hooks_dir}" + (f" (core.hooksPath={report.hooks_path})" if report.hooks_path else ""))
    width = max(len(h.name) for h in report.hooks)
    for h in report.hooks:
        extra = f"; {h.message}" if h.message and h.action != "conflict" else ""
        if h.chained and not h.message:
            extra = f"; runs {h.chained} first"
        echo(f"  {h.name:<{width}}  {h.action}{extra}")
    for note in report.notes:
        warn(note)


@hooks_group.command("install", context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def install_command(as_json: bool) -> None:
    """Install or refresh the hooks; existing hooks keep running.

    Idempotent. Also run by `git nerve init`, and by `git worker spawn` when
    the hooks are missing. A hooks directory outside this repository (a global
    core.hooksPath, which other repositories may share) is refused (exit 2):
    nothing is written there.
    """
    from ..hooks import install as hooks

    report = hooks.install(discover())
    if as_json:
        echo_json(report.as_dict())
    else:
        _print_changes(report, "hooks in")
    if report.conflicts:
        raise NerveError(
            f"{len(report.conflicts)} hook(s) not installed",
            details=[h.message for h in report.conflicts],
        )


@hooks_group.command("uninstall", context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.option("--shared", is_flag=True,
              help="Uninstall even from an absolute core.hooksPath outside this repository (other repositories lose them too).")
def uninstall_command(as_json: bool, shared: bool) -> None:
    """Remove the hooks; kept hooks go back as they were.

    A hook that was chained is renamed back, byte for byte, with its mode;
    where another tool renamed our shim (pre-commit's <hook>.legacy) the
    hook we kept goes back under that name. A hooks directory outside this
    repository (an absolute core.hooksPath, maybe shared by other
    repositories) is left alone unless --shared.
    """
    from ..hooks import install as hooks

    report = hooks.uninstall(discover(), shared=shared)
    if as_json:
        echo_json(report.as_dict())
    else:
        _print_changes(report, "hooks in")


_STATE_TEXT = {
    "installed": "installed",
    "outdated": "installed, older version (run `git nerve hooks install` to refresh)",
    "broken": "installed, but its interpreter or package is gone (run `git nerve hooks install`)",
    "foreign": "another tool's hook; git-nerve's is not there (run `git nerve hooks install` to chain it)",
    "displaced": "NOT RUN: displaced by another tool (run `git nerve hooks install` to restore the chain)",
    "disabled": "NOT RUN: not executable (run `git nerve hooks install`)",
    "missing": "not installed",
}


@hooks_group.command("status", context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_command(as_json: bool) -> None:
    """Show which hooks are installed, where, and what they chain."""
    from ..hooks import install as hooks

    st = hooks.status(discover())
    if as_json:
        echo_json(st.as_dict())
        return
    echo(f"hooks directory: {st.hooks_dir}" + (f" (core.hooksPath={st.hooks_path})" if st.hooks_path else ""))
    width = max(len(h.name) for h in st.hooks)
    for h in st.hooks:
        line = f"  {h.name:<{width}}  {_STATE_TEXT[h.state]}"
        if h.message:
            line += f" ({h.message})"
        if h.chained:
            line += f"; runs {h.chained} first" if h.state not in ("missing", "displaced", "foreign") else f"; {h.chained} is waiting to be chained"
        echo(line)
    for note in st.notes:
        warn(note)
    pythons = sorted({h.python for h in st.hooks if h.python})
    if pythons:
        echo(f"interpreter: {', '.join(pythons)}")


@click.command(
    "hook-run", hidden=True,
    context_settings={**CONTEXT_SETTINGS, "ignore_unknown_options": True, "help_option_names": []},
)
@click.argument("hook")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def hook_run(hook: str, args: tuple[str, ...]) -> None:
    """Run one hook (what the shims do when their interpreter is gone)."""
    from ..hooks.run import main

    sys.exit(main([hook, *args]))


COMMANDS = [hooks_group, hook_run]
