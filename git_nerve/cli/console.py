"""`git nerve console`: the live web console (the server lives in git_nerve/console/)."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, echo, echo_json


@click.command("console", context_settings=CONTEXT_SETTINGS)
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
@click.option("--open", "open_browser", is_flag=True, help="Also open the page in your web browser.")
@click.option("--json", "as_json", is_flag=True, help="Print the address as one JSON object (url, port, token).")
def console(port: int, open_browser: bool, as_json: bool) -> None:
    """Serve a live web page of every worker on 127.0.0.1, until Ctrl-C.

    \b
    Open the URL it prints (it carries a random token; requests without it
    are refused). The page shows every worker (state, staleness, heartbeat,
    progress, last commit), the conflict radar, the merge queue, the outbox
    and, for the task you pick, its thread, message history and what was
    told about it; it updates itself within a second of the bus changing.
    From it you can tell a task (note, stop, skip, add), approve, request
    changes with a comment and merge, exactly as the commands do.
    """
    import sys

    from ..errors import UsageError
    from ..paths import discover

    paths = discover()
    if not paths.bus_path.exists():
        raise UsageError("no bus yet: run `git nerve init` or `git worker spawn <task-id>` first")
    from ..console.app import serve
    from .opening import listen

    listen(paths.common_dir)  # PostgreSQL shared mode: the listener keeps the page fresh (it stays while we serve)

    def ready(url: str, bound: int, token: str) -> None:
        if as_json:
            echo_json({"url": url, "port": bound, "token": token})
        else:
            echo(f"git nerve console: {url}")
            echo("(only this machine can reach it; Ctrl-C stops it)", err=True)
        sys.stdout.flush()
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    try:
        serve(paths, port=port, on_ready=ready)
    except OSError as exc:
        if exc.filename is None and exc.errno is not None:
            raise UsageError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
        raise


COMMANDS = [console]
