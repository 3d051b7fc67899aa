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
    """(THREAD_ID, --before, --budget, --json) of plain `git nerve thread` arguments, as the one table of options
    reads them (:func:`git_nerve.options.plain`: each at most once); None for anything else (help, a completion
    request, an unknown option): click's path reads those, the documented way."""
    from ..options import plain

    kw = plain("nerve thread", args)
    return None if kw is None else (kw["thread_id"], kw["before"], kw["budget"], kw["as_json"])
