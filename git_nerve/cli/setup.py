"""`git nerve init` and `git nerve demo`."""

from __future__ import annotations

from pathlib import Path

import click

from .common import CONTEXT_SETTINGS, echo, echo_json, warn


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--shared", "shared", type=click.Choice(["git", "postgres"]), is_flag=False, flag_value="git",
              default=None, metavar="[git|postgres]",
              help="Several machines coordinate through the git remote (probed first), or through PostgreSQL "
                   "(--shared postgres: this machine's git config nerve.database or NERVE_DATABASE_URL; the schema "
                   "is created there); recorded in nerve.toml.")
@click.option("--remote", "shared_remote", metavar="NAME", help="With --shared: the coordination remote (default: nerve.remote, else origin).")
@click.option("--move", "move", is_flag=True,
              help="With --shared: move the shared state from the store nerve.toml names now to this one (every "
                   "claim and every machine's events; the old store then refuses clones still on the old nerve.toml). "
                   "Rerun it after an interruption.")
def init(as_json: bool, shared: str | None, shared_remote: str | None, move: bool) -> None:
    """Set up this repository: the bus, the hooks, the integration branch, nerve.toml."""
    from ..init import init as do_init

    if shared_remote and shared != "git":
        raise click.UsageError("--remote goes with --shared (the git remote)")
    if move and not shared:
        raise click.UsageError("--move goes with --shared git|postgres (the store to move to)")
    joining = [] if move else _join(shared, shared_remote)  # this machine's name claimed: before anything is written
    report = do_init()
    report.warnings += joining
    if move:
        _print_move(report, _move(shared, shared_remote), as_json)
        return
    joined = _init_shared(report, shared_remote, shared) if shared else None
    if as_json:
        echo_json({**report.as_dict(), **({"shared": joined} if joined else {})})
        return
    for w in report.warnings:
        warn(w)
    echo(f"Bus:         {report.bus}")
    if report.integration:
        echo(f"Integration: {report.integration}" + ("  (pinned: git config nerve.integration)" if report.integration_pinned else ""))
    echo(f"Hooks:       {report.hooks}")
    if report.nerve_toml:
        echo(f"Config:      {report.nerve_toml}" + ("  (created)" if report.nerve_toml_created else "  (kept)"))
        if not report.nerve_toml_tracked:
            echo("             not committed yet: every worktree's run reads this file from the main checkout;")
            echo("             commit it so task branches carry it too: git add nerve.toml && git commit -m 'git-nerve config'")
    if joined:
        recorded = "; recorded in nerve.toml: commit it so every clone takes part)" if joined["written"] else ")"
        if joined["backend"] == "postgres":
            echo(f"Shared:      through PostgreSQL at {joined['database']} (schema {joined['schema']}) as machine "
                 f"{joined['machine']} (schema ready{recorded}")
        else:
            echo(f"Shared:      through {joined['remote']} as machine {joined['machine']} (probe passed{recorded}")


def _join(backend: str | None, remote: str | None) -> list[str]:
    from ..paths import discover
    from ..shared.setup import join

    paths = discover()
    return join(paths.toplevel, backend, remote) if paths.toplevel is not None else []


def _init_shared(report, remote: str | None, backend: str) -> dict:
    from ..paths import discover
    from ..shared.setup import enable, enable_postgres

    paths = discover()
    top = paths.toplevel or paths.common_dir
    if backend == "postgres":
        done = enable_postgres(paths.common_dir, top)
        return {"backend": "postgres", "database": done.remote, "schema": done.schema, "machine": done.machine,
                "nerve_toml": str(done.nerve_toml), "written": done.written}
    done = enable(paths.common_dir, top, remote, probed=True)
    return {"backend": "git", "remote": done.remote, "machine": done.machine, "nerve_toml": str(done.nerve_toml),
            "written": done.written}


def _move(backend: str, remote: str | None) -> dict:
    from ..paths import discover
    from ..shared.move import move

    paths = discover()
    done = move(paths.common_dir, paths.toplevel or paths.common_dir, backend, remote)
    return {"from": done.source, "to": done.target, "machine": done.machine, "nerve_toml": str(done.nerve_toml),
            "written": done.written, "already": done.already, **done.counts}


def _print_move(report, moved: dict, as_json: bool) -> None:
    if as_json:
        echo_json({**report.as_dict(), "moved": moved})
        return
    for w in report.warnings:
        warn(w)
    where = moved["to"].get("schema") or moved["to"].get("remote")
    if moved["already"]:
        echo(f"Shared:      already on {moved['to']['backend']} ({where}) in {moved['nerve_toml']}: nothing to move")
        return
    echo(f"Moved:       {moved['claims']} claims and {moved['events']} events of {moved['machines']} machines from "
         f"{moved['from']['backend']} to {moved['to']['backend']} ({where}); the old store now refuses clones on the "
         "old nerve.toml")
    if moved["written"]:
        echo(f"Config:      {moved['nerve_toml']} rewritten: commit and push it; every other machine: git pull"
             + (" (and git config nerve.database <url>)" if moved["to"]["backend"] == "postgres" else ""))


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Build the demo here (default: a new temporary directory, kept so you can look around).")
@click.option("--fast", is_flag=True, help="Only the worker lifecycle (scripted commits, a real rebase conflict): a few seconds.")
@click.option("--agent", "agent", metavar="NAME",
              help="Use the real agent CLI NAME (claude, codex, gemini, ...; your own install and login) instead of "
                   "git-nerve's agent on the scripted model.")
@click.option("--console", is_flag=True, help="Also start `git nerve console` and print its URL, to watch it live; it keeps serving after the demo until Ctrl-C.")
def demo(directory: Path | None, fast: bool, agent: str | None, console: bool) -> None:
    """Show the whole product at work on a throw-away repository (kept; its path is printed).

    Needs only python3 and git: no network, no API key. A scripted model
    starts on 127.0.0.1 and real agent processes (git-nerve's own agent,
    one per role) run three tasks' develop workflows at once: commits appear in
    `git worker status`, the conflict radar catches two tasks changing the same
    line and tells both, a person's `git nerve tell` note reaches a running
    agent (see `git nerve outbox`), a stop ends one run with its work kept,
    `git nerve knowledge query` answers a question, and the merge queue merges
    what passes its check. Every step prints the command it runs.

    --fast: the worker lifecycle only (spawn, commit, done, a real rebase
    conflict resolved with git, approve, merge), in a few seconds.
    """
    from ..errors import UsageError

    if fast and (agent or console):
        raise UsageError("--fast runs no agents: it cannot be combined with --agent or --console")
    if fast:
        from ..demo.fast import run

        run(directory)
        return
    from ..demo.agents import run as run_agents

    run_agents(directory, agent=agent, console=console)


@click.command("uninstall-links", context_settings=CONTEXT_SETTINGS)
@click.option("--bin", "bindir", type=click.Path(file_okay=False, path_type=Path),
              help="The bin directory whose links to remove (default: the one this command ran from).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def uninstall_links(bindir: Path | None, as_json: bool) -> None:
    """Remove the man page links git-nerve made beside a bin directory.

    Installed with `uv tool install`, the first command links git-nerve's man
    pages into <bin>/../share/man/man1 (uv does not install them); run this
    before `uv tool uninstall git-nerve` so none is left pointing nowhere.
    Only links git-nerve recorded making, still pointing where it made them
    point, are removed; anything else is kept and named.
    """
    import os
    import sys

    from ..manlink import unlink_pages

    where = os.fspath(bindir) if bindir is not None else os.path.dirname(os.path.abspath(sys.argv[0]))
    removed, kept = unlink_pages(where)
    if as_json:
        echo_json({"bin": where, "removed": removed, "kept": kept})
        return
    for link in removed:
        echo(f"removed {link}")
    for line in kept:
        echo(line)
    if not removed and not kept:
        echo(f"no man page links of git-nerve's beside {where}")


COMMANDS = [init, demo, uninstall_links]
