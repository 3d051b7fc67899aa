"""Man pages generated from the click commands (``git worker --help`` is
``man git-worker``, since git turns ``--help`` into ``git help worker``).

Usage: ``python -m git_nerve.manpages DIR`` writes ``git-worker.1``,
``git-nerve.1`` and one page per subcommand (``git-worker-spawn.1``,
``git-nerve-hooks-install.1``, ...). The pages the package ships (``man/man1``
in the source tree, installed as ``share/man/man1`` by pip, pipx and uv) are
this output; ``tests/test_install_man.py`` fails when they fall behind the
commands. Hidden commands (internal plumbing) get no page and are named nowhere.

Each page holds everything ``--help`` prints: the whole help text (``\\b``
blocks kept line for line), every option with its help, default and choices,
the commands of a group with their whole first paragraph, and the epilog.
No date is written, so the same commands always give the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .fs import replace_file

PROGRAMS = ("git-worker", "git-nerve")


def _escape(text: str) -> str:
    """Roff-escape one line of text (backslashes, hyphens, a leading dot or quote)."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def _help_text(command: click.Command) -> str:
    text = command.help or ""
    return text.split("\f", 1)[0].strip()


def _paragraphs(text: str) -> list[tuple[bool, list[str]]]:
    """(verbatim?, lines) per paragraph; click's ``\\b`` marks a paragraph to keep line for line."""
    out: list[tuple[bool, list[str]]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        while lines and not lines[0].strip():
            lines.pop(0)
        if not lines:
            continue
        if lines[0].strip() == "\b":
            out.append((True, [line.rstrip() for line in lines[1:]]))
        else:
            out.append((False, [line.strip() for line in lines if line.strip()]))
    return out


def _roff_paragraphs(text: str) -> list[str]:
    lines: list[str] = []
    for verbatim, para in _paragraphs(text):
        lines.append(".PP")
        if verbatim:
            lines.append(".nf")
            lines.extend(_escape(line) if line.strip() else "" for line in para)
            lines.append(".fi")
        else:
            lines.extend(_escape(line) for line in para)
    return lines


def summary(command: click.Command) -> str:
    """The whole first paragraph of a command's help, on one line (never cut short)."""
    paras = _paragraphs(_help_text(command))
    if not paras:
        return (command.short_help or "").strip()
    return " ".join(line.strip() for line in paras[0][1] if line.strip())


def _visible(group: click.Group, ctx: click.Context) -> list[tuple[str, click.Command]]:
    out = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is not None and not cmd.hidden:
            out.append((name, cmd))
    return out


def _page(page: str, words: str, command: click.Command, ctx: click.Context, version: str,
          parent: str | None) -> str:
    lines = [
        f'.TH "{page.upper()}" "1" "" "git-nerve {version}" "git-nerve Manual"',
        ".SH NAME",
        f"{_escape(page)} \\- {_escape(summary(command))}",
        ".SH SYNOPSIS",
        ".nf",
        f"\\fB{_escape(words)}\\fR {_escape(' '.join(command.collect_usage_pieces(ctx)))}",
        ".fi",
    ]
    body = _help_text(command)
    if body:
        lines.append(".SH DESCRIPTION")
        lines.extend(_roff_paragraphs(body))
    records = [p.get_help_record(ctx) for p in command.get_params(ctx) if isinstance(p, click.Option)]
    records = [r for r in records if r]
    if records:
        lines.append(".SH OPTIONS")
        for names, help_text in records:
            lines.append(".TP")
            lines.append(f"\\fB{_escape(names)}\\fR")
            lines.append(_escape(" ".join(help_text.split())) if help_text else "")
    children: list[str] = []
    if isinstance(command, click.Group):
        lines.append(".SH COMMANDS")
        for name, sub in _visible(command, ctx):
            child = f"{page}-{name}"
            children.append(child)
            lines.append(".TP")
            lines.append(f"\\fB{_escape(name)}\\fR")
            lines.append(_escape(summary(sub)))
            lines.append(f"See \\fB{_escape(child)}\\fR(1).")
    if command.epilog:
        lines.append(".SH NOTES")
        lines.extend(_roff_paragraphs(command.epilog))
    see = [p for p in (parent, *(name for name in PROGRAMS if name != page)) if p]
    see = list(dict.fromkeys([*see, *children]))
    lines.append(".SH SEE ALSO")
    lines.append(", ".join(f"\\fB{_escape(name)}\\fR(1)" for name in see))
    return "\n".join(lines) + "\n"


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    return click.Context(command, info_name=name, parent=parent, **command.context_settings)


def pages() -> dict[str, str]:
    """Every page by file name (``git-worker-spawn.1``) -> its roff text."""
    from . import __version__
    from .cli.nerve import nerve
    from .cli.worker import worker

    out: dict[str, str] = {}

    def walk(page: str, words: str, command: click.Command, ctx: click.Context, parent: str | None) -> None:
        out[f"{page}.1"] = _page(page, words, command, ctx, __version__, parent)
        if isinstance(command, click.Group):
            for name, sub in _visible(command, ctx):
                walk(f"{page}-{name}", f"{words} {name}", sub, _context(sub, name, ctx), page)

    for program, group in (("git-worker", worker), ("git-nerve", nerve)):
        words = program.replace("-", " ")
        walk(program, words, group, _context(group, words, None), None)
    return out


def write(target: Path) -> list[Path]:
    """Write every page into ``target`` (created); the paths written."""
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in pages().items():
        path = target / name
        if not path.exists() or path.read_text() != text:
            replace_file(path, text, tmp_name=f".{name}.tmp", create_mode=0o666)
        written.append(path)
    return sorted(written)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m git_nerve.manpages DIR", file=sys.stderr)
        return 2
    written = write(Path(argv[0]))
    print(f"wrote {len(written)} man pages to {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
