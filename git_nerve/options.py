"""The one table of the options of the commands that have a click-free path (issue 42): `git worker spawn`,
`start`, `done`, `status`, `show`, `conflicts`, `heartbeat`, `git nerve thread`, `knowledge query` and `mcp`.
Their click commands are built from it (:func:`git_nerve.cli.common.options` turns each row into the
``click.option``/``click.argument`` it was) and the click-free paths read it (:func:`plain`; heartbeat's own
parser, its names). Floor 0, standard library only and cheap to import: the hot paths (heartbeat, the agent's
verbs) read it without click.

A row names the parameter (the keyword the command's function takes), its spellings in click's order, what it is
(a flag, an option with a value, an argument), its default, type and help. ``fast``: the click-free path takes it
(an option it does not take, or anything it cannot read plainly, sends the command click's way, which reads and
reports it the documented way)."""

from __future__ import annotations

FLAG, VALUE, ARGUMENT = "flag", "value", "argument"


class Option:
    """One parameter of a command. ``type``: None (text), ``"int"``, or ``("float", min, max)`` (a bound may be
    None); ``multiple``: repeatable (an argument: any number of words, ``nargs=-1``)."""

    __slots__ = ("name", "flags", "kind", "default", "help", "metavar", "type", "choices", "show_default",
                 "required", "multiple", "fast")

    def __init__(self, name: str, *flags: str, kind: str = VALUE, default=None, help: str | None = None,  # noqa: A002
                 metavar: str | None = None, type=None, choices: tuple[str, ...] | None = None,  # noqa: A002
                 show_default: bool = False, required: bool = False, multiple: bool = False, fast: bool = True):
        self.name, self.flags, self.kind, self.help, self.metavar = name, flags, kind, help, metavar
        self.default = False if kind == FLAG and default is None else default
        self.type, self.choices, self.show_default = type, choices, show_default
        self.required, self.multiple, self.fast = required, multiple, fast


def _flag(name: str, *flags: str, help: str, fast: bool = True) -> Option:  # noqa: A002
    return Option(name, *flags, kind=FLAG, help=help, fast=fast)


def _task(help: str) -> Option:  # noqa: A002
    return Option("task", "--task", metavar="TASK", help=help)


def _json(help: str = "Print JSON.") -> Option:  # noqa: A002
    return _flag("as_json", "--json", help=help)


_ACT_ON = "Act on TASK instead of the worktree's own task."

#: command ("worker spawn", "nerve thread", ...) -> its parameters, in click's order (the order --help lists them)
COMMANDS: dict[str, tuple[Option, ...]] = {
    "worker spawn": (
        Option("task_id", kind=ARGUMENT, required=True),
        Option("description", "--description", "-d", default="", help="What the task is about."),
        Option("from_ref", "--from", metavar="REF", help="Branch from REF (default: the integration branch)."),
        _flag("no_fetch", "--no-fetch",
              help="Do not fetch the base from the remote first (nor ask it whether the branch exists)."),
        _flag("adopt", "--adopt", help="Work on the branch <prefix>TASK_ID that already exists (here or on the "
                                       "remote); git-nerve never deletes it."),
        _flag("wait", "--wait", help="Wait for nerve.toml's [worktree] setup command to end (exit 1 if it fails)."),
        _json(),
    ),
    "worker status": (
        Option("states", "--state", multiple=True, metavar="STATE", help="Only tasks in STATE (repeatable).",
               fast=False),
        _flag("stale", "--stale", help="Only stale tasks (no heartbeat or activity for too long)."),
        _flag("watch", "--watch", help="Redraw every 2 seconds until Ctrl-C.", fast=False),
        Option("interval", "--interval", default=2.0, show_default=True, type=("float", 0.2, None),
               help="Seconds between redraws.", fast=False),
        _json(),
    ),
    "worker show": (
        Option("task_id", kind=ARGUMENT, metavar="[TASK_ID]"),
        _json(),
    ),
    "worker start": (_task(_ACT_ON), _json()),
    "worker done": (
        _task(_ACT_ON),
        _flag("skip_rebase", "--skip-rebase",
              help="The rebase is done (after resolving a conflict): just push and ask for review."),
        _flag("allow_empty", "--allow-empty",
              help="Finish a task that has no commits of its own (it merges as nothing to merge)."),
        _flag("replace_remote", "--replace-remote",
              help="Overwrite commits someone else pushed onto the task's branch on the remote (archived under "
                   "refs/nerve/archive/<task> first); without it done refuses to (exit 4)."),
        _json(),
    ),
    "worker heartbeat": (
        _task(_ACT_ON),
        Option("status_text", "--status", metavar="TEXT", help="What the agent is doing."),
        Option("progress", "--progress", type=("float", 0, 1), help="Progress between 0 and 1."),
        _json(),
    ),
    "worker conflicts": (
        _flag("refresh", "--refresh", help="Recompute every pair now (looks at every worktree's uncommitted work).",
              fast=False),
        _json("Print the pairs as JSON."),
    ),
    "nerve thread": (
        Option("thread_id", kind=ARGUMENT, metavar="[THREAD_ID]"),
        Option("before", "--before", metavar="N", help="Show the rounds before round N (the next page back)."),
        # the default (thread.select.DEFAULT_BUDGET) is the command's to give: :func:`plain` leaves it None
        Option("budget", "--budget", metavar="CHARS", show_default=True,
               help="Characters of content and metadata to show; the round that reaches it is still shown."),
        _json("Print the selection as JSON."),
    ),
    "nerve knowledge query": (
        Option("text", kind=ARGUMENT, multiple=True, required=True),
        Option("limit", "--limit", "-n", type="int", default=10, show_default=True, metavar="N",
               help="How many results."),
        _json("Print the results (with each chunk's text) as JSON."),
        Option("repo", "--repo", metavar="PATH", help="Search the worktree at PATH instead of this one."),
        _flag("everywhere", "-g", "--global", help="Search every repository you have indexed."),
    ),
    "nerve mcp": (
        Option("task", "--task", metavar="TASK",
               help="Serve this task (default: the task of the worktree you are in)."),
    ),
}


def plain(command: str, args: list[str]) -> dict | None:
    """The keyword arguments of ``command``'s click-free path from plain arguments: each option the table marks
    ``fast``, at most once (a value as ``--opt=VALUE`` or ``--opt VALUE``, never empty nor looking like an option,
    of its type); the arguments, words not looking like options. None for anything else (help, an unknown option,
    a repeated one, a value click must read): click's path reads those and reports them the documented way."""
    table = COMMANDS[command]
    by_flag = {f: o for o in table if o.fast for f in o.flags}
    kw: dict = {o.name: o.default for o in table if o.fast}
    seen: set[str] = set()
    words = [o for o in table if o.kind == ARGUMENT]
    it = iter(args)
    for a in it:
        name, eq, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        opt = by_flag.get(name)
        if opt is not None and opt.name not in seen:
            seen.add(opt.name)
            if opt.kind == FLAG:
                if eq:
                    return None
                kw[opt.name] = True
                continue
            value = inline if eq else next(it, None)
            if not value or (not eq and value.startswith("-")):
                return None
            kw[opt.name] = _typed(opt, value)
            if kw[opt.name] is None:
                return None
        elif not a or a.startswith("-") or not _word(a, words, kw, seen):
            return None
    if any(o.required and o.name not in seen for o in words):
        return None
    return kw


def _word(a: str, words: list[Option], kw: dict, seen: set[str]) -> bool:
    """``a`` given to the first argument still free (one that takes any number keeps taking them)."""
    for o in words:
        if o.multiple:
            kw[o.name] = (*(kw[o.name] or ()), a)
            seen.add(o.name)
            return True
        if o.name not in seen:
            kw[o.name] = a
            seen.add(o.name)
            return True
    return False


def _typed(opt: Option, value: str):
    """``value`` as ``opt``'s type; None when click must read it (a choice not listed, not a number, out of range)."""
    if opt.choices is not None:
        return value if value in opt.choices else None
    if opt.type == "int":
        return int(value) if value.isascii() and value.isdigit() else None
    if isinstance(opt.type, tuple):
        try:
            number = float(value)
        except ValueError:
            return None
        low, high = opt.type[1:]
        return number if (low is None or number >= low) and (high is None or number <= high) else None
    return value


def names(command: str, *, kind: str | None = None) -> tuple[str, ...]:
    """The spellings of ``command``'s options (of one ``kind``), in the table's order."""
    return tuple(f for o in COMMANDS[command] if kind in (None, o.kind) for f in o.flags)
