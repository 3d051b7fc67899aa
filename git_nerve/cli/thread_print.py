"""What `git nerve thread` prints (click-free: the command and :mod:`.entry`'s fast path share it)."""

from __future__ import annotations

from . import plain


def print_view(view, before, as_json: bool) -> None:
    """The view as JSON, or its text; a thread with nothing to show says so on stderr (then the hint line, if any)."""
    if as_json:
        plain.json_out(view.as_dict())
    elif not view.empty:
        plain.line(view.render())
    else:
        from ..thread.service import nothing_before

        plain.line(nothing_before(view.thread, before), err=True)
        if view.hints:
            plain.line(view.render())


def thread_args(args: list[str]) -> tuple[str | None, str | None, str | None, bool] | None:
    """(THREAD_ID, --before, --budget, --json) of plain `git nerve thread` arguments, each at most once; None for
    anything else (help, a completion request, an unknown option): click's path reads those, the documented way."""
    thread_id = before = budget = None
    as_json = False
    it = iter(args)
    for a in it:
        name, eq, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if a == "--json" and not as_json:
            as_json = True
        elif name in ("--before", "--budget"):
            value = inline if eq else next(it, None)
            if value is None or (not eq and value.startswith("-")) or (before if name == "--before" else budget) is not None:
                return None
            if name == "--before":
                before = value
            else:
                budget = value
        elif a and not a.startswith("-") and thread_id is None:
            thread_id = a
        else:
            return None
    return thread_id, before, budget, as_json
