"""One table of command options (issue 42, git_nerve/options.py): the click commands that have a click-free path are
built from it, and that path reads it. Checked against the real click commands: each option the fast path accepts is
one click accepts, spelled alike, with the same default, type and choices, and plain arguments read the same both
ways; whatever the fast path does not read plainly (an unknown option, a repeated one) goes to click, which reports
it once for both."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import click
import pytest

from git_nerve import options as table
from git_nerve.cli.entry import _query_args
from git_nerve.cli.nerve import nerve
from git_nerve.cli.spawning import plain_args as spawn_args
from git_nerve.cli.thread_print import thread_args
from git_nerve.cli.verbs import plain_args as verb_args
from git_nerve.cli.worker import worker
from git_nerve.thread.select import DEFAULT_BUDGET
from git_nerve.worker import heartbeat

#: what the command gives for a default the table leaves to it
GIVEN = {("nerve thread", "budget"): str(DEFAULT_BUDGET)}


def _command(key: str) -> click.Command:
    group, *names = key.split()
    cmd: click.Command = {"worker": worker, "nerve": nerve}[group]
    for name in names:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return cmd


def _default(param: click.Parameter):
    """click's default, None when there is none (click 8.2+ says so with a sentinel)."""
    value = param.default
    if value is None or type(value).__name__ in ("Sentinel", "_Missing") or value == ():
        return False if getattr(param, "is_flag", False) else None  # a flag's is off (click 8.5 says nothing)
    return value


def _type(param: click.Parameter):
    t = param.type
    if isinstance(t, click.FloatRange):
        return ("float", t.min, t.max)
    if isinstance(t, click.types.IntParamType):
        return "int"
    return None


@pytest.mark.parametrize("key", sorted(table.COMMANDS))
def test_the_click_command_is_the_table(key):
    """Names, order, spellings, kind, default, type, choices, metavar, help: click's parameters are the table's rows."""
    params = _command(key).params
    rows = table.COMMANDS[key]
    assert [p.name for p in params] == [o.name for o in rows]
    for p, o in zip(params, rows):
        assert (() if isinstance(p, click.Argument) else tuple(p.opts + p.secondary_opts)) == o.flags, o.name
        assert isinstance(p, click.Argument) == (o.kind == table.ARGUMENT), o.name
        assert getattr(p, "is_flag", False) == (o.kind == table.FLAG), o.name
        assert _default(p) == GIVEN.get((key, o.name), o.default), o.name
        assert _type(p) == o.type, o.name
        assert getattr(p.type, "choices", None) == (list(o.choices) if o.choices else None), o.name
        assert p.required == o.required, o.name
        assert p.multiple == (o.multiple and o.kind != table.ARGUMENT), o.name
        if isinstance(p, click.Option):
            assert (p.help, bool(p.show_default), p.metavar) == (o.help, o.show_default, o.metavar), o.name


def _value(o: table.Option) -> str:
    return "3" if o.type == "int" else "0.5" if o.type else o.choices[0] if o.choices else "v-1"


def _spellings(o: table.Option, word: str):
    """Each way to write ``o`` plainly: a flag; an option's value separate or (long spelling) after ``=``."""
    if o.kind == table.FLAG:
        return [[f] for f in o.flags]
    out = [[f, word] for f in o.flags]
    return out + [[f"{f}={word}"] for f in o.flags if f.startswith("--")]


def _plain_cases(key: str):
    rows = [o for o in table.COMMANDS[key] if o.fast]
    words = [w for o in rows if o.kind == table.ARGUMENT for w in (["w1", "w2"] if o.multiple else ["w1"])]
    opts = [o for o in rows if o.kind != table.ARGUMENT]
    for n in range(len(opts) + 1):
        for chosen in itertools.combinations(opts, n):
            for spelled in itertools.product(*[_spellings(o, _value(o)) for o in chosen]):
                flat = [a for s in spelled for a in s]
                yield flat + words
                if words and flat:
                    yield words + flat


@pytest.mark.parametrize("key", sorted(table.COMMANDS))
def test_plain_arguments_read_alike_on_both_paths(key):
    """Every option the fast path accepts, in every plain spelling and combination: click reads it too, to the same
    values (a repeated option, an unknown one, help: the fast path leaves them to click)."""
    cmd = _command(key)
    cases = 0
    for args in _plain_cases(key):
        fast = table.plain(key, args)
        assert fast is not None, args
        with cmd.make_context(key, list(args)) as ctx:  # its context_settings (click caches the help option)
            by_click = ctx.params
        for name, value in fast.items():
            given = GIVEN.get((key, name))
            assert (given if value is None and given else value) == by_click[name], (args, name)
        cases += 1
    assert cases > 1
    for extra in (["--bogus"], ["-h"], ["--help"], ["--"]):
        assert table.plain(key, [*next(_plain_cases(key)), *extra]) is None, extra
    for o in table.COMMANDS[key]:
        if o.kind != table.ARGUMENT:
            once = _spellings(o, _value(o))[0]
            assert table.plain(key, [*once, *once, *next(_plain_cases(key))]) is None, o.flags  # repeated: click's


def test_the_fast_parsers_are_the_table():
    """The click-free readers of each command read the table (a spelling added there is read everywhere)."""
    assert spawn_args(["t1", "-d", "x", "--from=main", "--wait"]) == {
        "task_id": "t1", "description": "x", "from_ref": "main", "no_fetch": False, "adopt": False, "wait": True,
        "as_json": False}
    assert verb_args("done", ["--task=t1", "--allow-empty"]) == {
        "task": "t1", "skip_rebase": False, "allow_empty": True, "replace_remote": False, "as_json": False}
    assert verb_args("status", ["--stale", "--json"]) == {"stale": True}
    assert verb_args("status", ["--stale"]) is None and verb_args("status", ["--watch", "--json"]) is None
    assert verb_args("conflicts", ["--json"], served=True) == {"refresh": False, "as_json": True, "recompute": False}
    assert verb_args("conflicts", ["--json", "--refresh"]) is None
    assert thread_args(["t1", "--budget", "9"]) == ("t1", None, "9", False)
    assert _query_args(["--limit=2", "-g", "a", "b"]) == (["a", "b"], 2, False, None, True)
    assert _query_args(["-g", "--repo", ".", "a"]) is None  # refused by click, the documented way
    assert heartbeat._parse(["--status=x", "--progress", "0.5", "--json"]) == {
        "task": None, "status_text": "x", "progress": 0.5, "as_json": True}


@pytest.mark.parametrize("argv", [["worker", "start", "--bogus"], ["worker", "spawn", "t1", "--bogus"],
                                  ["worker", "status", "--json", "--bogus"], ["nerve", "thread", "--bogus"],
                                  ["nerve", "knowledge", "query", "x", "--bogus"]])
def test_an_unknown_option_is_clicks_error_line_and_exit_code(tmp_path, argv):
    """The console script (fast path first) says what click says in-process: one error line, exit 2."""
    from click.testing import CliRunner

    proc = subprocess.run([f"git-{argv[0]}", *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NO_COLOR": "1"})
    res = CliRunner().invoke({"worker": worker, "nerve": nerve}[argv[0]], argv[1:], prog_name=f"git {argv[0]}")
    last = proc.stderr.splitlines()[-1]
    assert proc.returncode == 2 and last.startswith("Error: No such option") and "--bogus" in last, proc.stderr
    assert res.exit_code == 2 and res.output.splitlines()[-1] == proc.stderr.splitlines()[-1]


def test_the_table_loads_nothing_but_itself():
    """Read by the hot paths: standard library only, no click, no typing, no dataclasses (tests/test_agent_command_imports.py
    checks the commands themselves)."""
    code = ("import sys\nbefore = set(sys.modules)\nfrom git_nerve import options\n"
            "options.plain('worker done', ['--json'])\n"
            "print(' '.join(sorted(set(sys.modules) - before)))\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) <= {"__future__", "git_nerve", "git_nerve.options"}
    assert "git_nerve.options" in proc.stdout


def test_what_the_warm_reader_is_asked_is_what_the_fast_path_reads():
    """The warm client (git_nerve/warm/client.py) asks its server only for what the click-free path would run: the
    same table read it, so a spelling it sends is one the server's `_fast` accepts."""
    from git_nerve.warm import client

    words = ["--json", "--stale", "T", "--refresh", "--task=T", "-h", ""]
    for command in ("status", "show", "conflicts"):
        for n in range(4):
            for rest in itertools.product(words, repeat=n):
                if client.plain([command, *rest]):
                    assert verb_args(command, list(rest), served=True) is not None, (command, rest)
    assert client.plain(["show", "T", "--json"]) and client.plain(["status", "--stale", "--json"])
    assert not client.plain(["show", "--json"])  # the task of the worktree: the command answers itself
