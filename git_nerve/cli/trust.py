"""`git nerve trust`: see and allow the committed settings that run a command or widen what agents are handed."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, echo, echo_json, style


@click.command("trust", context_settings=CONTEXT_SETTINGS)
@click.option("--show", is_flag=True, help="Only list what is not trusted yet (and what it holds); record nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def trust(show: bool, as_json: bool) -> None:
    """Trust this repository's settings that run commands, as they are now.

    Shows exactly what each one holds: nerve.toml [worktree] setup,
    include and clone_dirs, .worktreeinclude, [run] test_command and
    adapter, [adapters.*] extra_args, the [extract] and
    [knowledge.embeddings] endpoints, .nerve/workflows/*.py, the agent
    CLIs' project settings (opencode.json and .opencode/, .claude/ and
    .mcp.json, .gemini/, .qwen/, .codex/ and .agents/skills/,
    .github/hooks/, .github/agents/, .github/skills/,
    .github/copilot/settings.json and .github/mcp.json). Then records
    the hash of that content for this user on this machine (outside the
    repository). What is read is the main checkout's, from wherever you
    run it. A setting whose content later differs (a merge, a pull, an
    agent's edit) is skipped by spawn, merge --check and git nerve run
    until you run this again.
    """
    from .. import trust as trust_mod
    from ..paths import discover

    from ..nerve_toml import home

    paths = discover()
    if paths.toplevel is None:
        raise click.UsageError("git nerve trust needs a checkout (its nerve.toml, .worktreeinclude, .nerve/workflows)")
    where = home(paths.toplevel)  # the main checkout's, wherever you stand (an agent's
    # worktree holds what the agent wrote: it is trusted by merging it, then trusting it here)
    before = trust_mod.report(paths.common_dir, where)
    recorded = [] if show else trust_mod.trust_shown(paths.common_dir, before)  # exactly what is shown below
    listed = [s for s in before["settings"] if not (show and s["trusted"])]
    if as_json:
        echo_json({**before, "settings": listed, "trusted_now": recorded})
        return
    if not before["settings"]:
        echo("Nothing here runs a command or widens what agents get (nerve.toml, .worktreeinclude, .nerve/workflows)")
        return
    if show and not listed:
        echo("Everything that runs here is trusted on this machine")
        return
    for s in listed:
        state = "trusted" if s["trusted"] else ("changed" if s["seen_before"] else "new")
        if s["setting"] in recorded:
            state += ", trusted now"
        echo(f"{style(s['setting'], bold=True)}  ({state})")
        echo(f"  it will {s['does']}:")
        for text in s["shown"]:
            echo(f"    {text}")
    echo(f"Record: {before['record']}" if recorded or not show else "Not trusted yet: run `git nerve trust` to allow them")


COMMANDS = [trust]
