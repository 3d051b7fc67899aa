"""`git nerve completion bash|zsh|fish`: the completion scripts, for people who manage their own."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS


@click.command("completion", context_settings=CONTEXT_SETTINGS)
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion for git worker and git nerve.

    \b
    bash:  source <(git nerve completion bash)           in ~/.bashrc
    zsh:   source <(git nerve completion zsh)            in ~/.zshrc, after compinit
    fish:  git nerve completion fish | source            in ~/.config/fish/config.fish

    install.sh installs them where each shell finds them by itself; with the bash form,
    git's own completion completes `git worker <TAB>` and `git nerve <TAB>` too.
    """
    from ..completion import scripts

    click.echo(scripts(shell), nl=False)


COMMANDS = [completion]
