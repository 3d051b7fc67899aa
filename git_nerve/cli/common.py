"""What every command shares: error mapping, JSON output, colour (NO_COLOR), repo lookup."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import click

from ..errors import ExitCode, NerveError
from ..text import clean, clean_styled, json_safe
from .plain import color_enabled

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def options(command: str, **defaults: Any) -> Callable:
    """The click parameters of ``command``, built from the one table its click-free path reads too
    (:data:`git_nerve.options.COMMANDS`), in its order; ``defaults``: a default the table leaves to the command."""
    from ..options import COMMANDS

    def decorate(f: Callable) -> Callable:
        for opt in reversed(COMMANDS[command]):
            f = _param(opt, defaults.get(opt.name, opt.default))(f)
        return f

    return decorate


def option(command: str, name: str) -> Callable:
    """One row of ``command``'s table as a click decorator: the same option for a command that has no click-free
    path (`--task`, `--json` of fail, approve, ...), spelled once."""
    from ..options import COMMANDS

    return _param(next(o for o in COMMANDS[command] if o.name == name), None)


def _param(opt, default: Any) -> Callable:
    from ..options import ARGUMENT, FLAG

    if opt.kind == ARGUMENT:
        return click.argument(opt.name, required=opt.required, nargs=-1 if opt.multiple else 1,
                              **({"metavar": opt.metavar} if opt.metavar else {}))
    kw: dict[str, Any] = {"help": opt.help}
    if opt.kind == FLAG:
        kw["is_flag"] = True
    else:  # only what the row sets, as the decorators written by hand said it
        kind = click.Choice(list(opt.choices)) if opt.choices else _click_type(opt.type)
        given = {"metavar": opt.metavar, "multiple": opt.multiple, "show_default": opt.show_default,
                 "default": default, "type": kind}
        kw.update({k: v for k, v in given.items() if v is not None and v is not False})
    return click.option(*opt.flags, opt.name, **kw)


def _click_type(kind: Any) -> Any:
    if kind == "int":
        return int
    if isinstance(kind, tuple):
        return click.FloatRange(min=kind[1], max=kind[2])
    return None


def style(text: str, **kw: Any) -> str:
    return click.style(text, **kw) if color_enabled() else text


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print a line; control characters in it (from descriptions, commits, notes, ...) are shown
    escaped (:mod:`git_nerve.text`), except the colours our own :func:`style` added."""
    color = color_enabled(sys.stderr if err else sys.stdout)
    click.echo(clean_styled(text) if color else clean(text), err=err, nl=nl, color=color)


def warn(text: str) -> None:
    prefix = click.style("warning:", fg="yellow") if color_enabled(sys.stderr) else "warning:"
    click.echo(f"{prefix} {clean(text)}", err=True)


def echo_json(data: Any) -> None:
    """JSON escapes C0 controls itself; DEL, C1 controls and bidi overrides become \\uXXXX too."""
    click.echo(json_safe(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def fail(exc: NerveError) -> None:
    prefix = click.style("error:", fg="red", bold=True) if color_enabled(sys.stderr) else "error:"
    click.echo(f"{prefix} {clean(exc.message)}", err=True)
    for line in exc.details:
        click.echo(clean(line), err=True)
    sys.exit(int(exc.exit_code))


def run_mapped(call: Callable[[], Any]) -> Any:
    """Run ``call``; our exceptions become one clear line on stderr and the documented exit code (the one place
    where errors meet the user: :meth:`NerveGroup.invoke`)."""
    from ..stopping import Stopped, raise_on_stop_signals

    raise_on_stop_signals()  # SIGTERM/SIGHUP unwind like Ctrl-C: what the command started is stopped with it
    try:
        return call()
    except NerveError as exc:
        fail(exc)
    except Stopped as exc:
        click.echo(f"stopped by {exc}", err=True)
        sys.exit(128 + exc.signum)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except BrokenPipeError:
        # output piped into `head` and the like: not an error of ours
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        sys.exit(0)
    except OSError as exc:  # disk full, permission denied, ...: one line, not a traceback
        if os.environ.get("NERVE_DEBUG"):
            raise
        where = f": {exc.filename}" if exc.filename else ""
        fail(NerveError(f"{exc.strerror or exc}{where}"))
    except Exception as exc:
        from ..bus.driver import as_nerve_error  # the knowledge index's own database: "bus error: ..." (exit 5)

        mapped = as_nerve_error(exc)
        if mapped is None:
            raise
        fail(mapped)


class NerveGroup(click.Group):
    """A group whose usage errors exit 2 with one line (click's default), that lists commands in order, and that
    handles every error of its commands once (:func:`run_mapped`): a command just raises."""

    def invoke(self, ctx: click.Context) -> Any:
        return run_mapped(lambda: super(NerveGroup, self).invoke(ctx))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)
