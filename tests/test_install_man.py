"""The man pages behind `git worker --help`: complete, current, and only pointing at pages that exist;
`--version` on both programs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from conftest import ROOT, run
from git_nerve import __version__, manpages

SHIPPED = ROOT / "man" / "man1"


def _render(page, width: int = 2000) -> str:
    """The page as man shows it (very wide, so no line is broken), or its roff with markup stripped."""
    if shutil.which("man"):
        env = {**os.environ, "MANWIDTH": str(width), "MANPAGER": "cat", "PAGER": "cat", "MAN_KEEP_FORMATTING": ""}
        proc = subprocess.run(["man", "-l", str(page)], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return re.sub(r".\x08", "", proc.stdout)
    raise AssertionError("man is needed to render")  # callers skip first


def _words(text: str) -> str:
    return " ".join(text.replace("\u2010", "-").replace("\u2011", "-").split())


def test_the_shipped_pages_are_what_the_commands_generate():
    generated = manpages.pages()
    shipped = {p.name: p.read_text() for p in SHIPPED.glob("*.1")}
    stale = sorted(n for n in generated if shipped.get(n) != generated[n])
    extra = sorted(set(shipped) - set(generated))
    assert not stale and not extra, (
        f"man/man1 is out of date (stale {stale}, no longer generated {extra}); "
        "run: python -m git_nerve.manpages man/man1 (and delete the extra pages)"
    )


def _commands():
    from git_nerve.cli.nerve import nerve
    from git_nerve.cli.worker import worker

    out = []

    def walk(page, command, ctx):
        out.append((page, command, ctx))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if not sub.hidden:
                    walk(f"{page}-{name}", sub, click.Context(sub, info_name=name, parent=ctx, **sub.context_settings))

    for page, group in (("git-worker", worker), ("git-nerve", nerve)):
        walk(page, group, click.Context(group, info_name=page.replace("-", " "), **group.context_settings))
    return out


def test_every_visible_command_has_a_page_and_hidden_ones_are_named_nowhere():
    commands = _commands()
    pages = manpages.pages()
    assert {f"{page}.1" for page, _, _ in commands} == set(pages)
    hidden = []
    for _, command, ctx in commands:
        if isinstance(command, click.Group):
            hidden += [n for n in command.list_commands(ctx) if command.get_command(ctx, n).hidden]
    assert "hook-run" in hidden  # the page git-nerve(1) used to point at
    for text in pages.values():
        for name in re.findall(r"\\fB([a-z\\-]+)\\fR\(1\)", text):
            assert f"{name.replace(chr(92) + '-', '-')}.1" in pages, f"a reference to a page that does not exist: {name}"
        assert "hook\\-run" not in text


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed: the pages are checked as roff only")
def test_each_page_holds_the_whole_help():
    for page, command, ctx in _commands():
        shown = _words(_render(SHIPPED / f"{page}.1"))
        # NAME: the whole first paragraph of the help, never cut short with "..."
        name_line = shown.split("NAME", 1)[1].split("SYNOPSIS", 1)[0]
        assert "..." not in name_line, page
        assert _words(manpages.summary(command)) in _words(name_line), page
        # every line of the help text (\b blocks line for line, not run together)
        help_text = (command.help or "").split("\f", 1)[0]
        for line in help_text.splitlines():
            if line.strip() and line.strip() != "\b":
                assert _words(line) in shown, (page, line)
        # every option with its help
        for param in command.get_params(ctx):
            record = param.get_help_record(ctx) if isinstance(param, click.Option) else None
            if record:
                assert _words(record[0]) in shown, (page, record[0])
                if record[1]:
                    assert _words(record[1]) in shown, (page, record[1])
        for line in (command.epilog or "").splitlines():
            if line.strip() and line.strip() != "\b":
                assert _words(line) in shown, (page, line)


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed on this machine")
def test_git_worker_help_keeps_the_lines_of_a_verbatim_block_apart():
    shown = _render(SHIPPED / "git-worker.1", width=120)
    orchestrator = [line for line in shown.splitlines() if "Orchestrator:" in line]
    agent = [line for line in shown.splitlines() if "Agent:" in line]
    assert len(orchestrator) == 1 and len(agent) == 1 and orchestrator != agent
    assert "Agent:" not in orchestrator[0]


@pytest.mark.parametrize("program", ["git-worker", "git-nerve"])
def test_version(tmp_path, program):
    res = run([program, "--version"], tmp_path)
    assert res.code == 0, res
    assert res.out.strip() == f"{program.replace('-', ' ')}, version {__version__}"
    via_git = run(["git", program.split("-")[1], "--version"], tmp_path)
    assert via_git.out == res.out


def test_the_version_is_the_packages_and_the_changelog_names_it():
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert f"## {__version__}" in (ROOT / "CHANGELOG.md").read_text()
    assert "the git-nerve authors" in (ROOT / "LICENSE").read_text()
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text()
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert sys.version_info >= (3, 10)


def test_manlink_links_missing_pages_beside_the_bin_dir_and_overwrites_nothing(tmp_path):
    from git_nerve.manlink import link_pages

    def tool_venv(where):
        prefix = tmp_path / "tools" / where  # a uv tool virtualenv
        shipped = prefix / "share" / "man" / "man1"
        shipped.mkdir(parents=True)
        for name in ("git-worker.1", "git-worker-spawn.1", "git-nerve.1", "git-add.1"):
            (shipped / name).write_text(f"{name} of {where}")
        (prefix / "bin").mkdir()
        return prefix

    prefix = tool_venv("git-nerve")
    bin_dir = tmp_path / "local" / "bin"
    bin_dir.mkdir(parents=True)
    man1 = tmp_path / "local" / "share" / "man" / "man1"
    man1.mkdir(parents=True)
    (man1 / "git-nerve.1").write_text("the user's own")
    # a person's own dead link, even one that looks like a page link: no record says git-nerve made it
    persons = tmp_path / "gone" / "share" / "man" / "man1" / "git-worker-spawn.1"
    (man1 / "git-worker-spawn.1").symlink_to(persons)

    assert link_pages(str(prefix / "bin" / "git-worker"), str(prefix)) == []  # run from the venv itself
    made = link_pages(str(bin_dir / "git-worker"), str(prefix))
    assert [Path(p).name for p in made] == ["git-worker.1"]
    assert (man1 / "git-worker.1").read_text() == "git-worker.1 of git-nerve"
    assert os.readlink(man1 / "git-worker-spawn.1") == str(persons)  # the person's dead link is kept
    assert (man1 / "git-nerve.1").read_text() == "the user's own"  # kept
    assert not (man1 / "git-add.1").exists()  # only git-nerve's own pages
    assert link_pages(str(bin_dir / "git-worker"), str(prefix)) == []  # the next run: nothing to do

    # the tool virtualenv is removed and made again elsewhere: the link git-nerve recorded making is dead now,
    # and only that one is replaced
    shutil.rmtree(prefix)
    again = tool_venv("git-nerve-2")
    assert not (man1 / "git-worker.1").exists() and (man1 / "git-worker.1").is_symlink()
    made = link_pages(str(bin_dir / "git-worker"), str(again))
    assert [Path(p).name for p in made] == ["git-worker.1"]
    assert (man1 / "git-worker.1").read_text() == "git-worker.1 of git-nerve-2"
    assert os.readlink(man1 / "git-worker-spawn.1") == str(persons)

    (man1 / "git-worker.1").unlink()
    (man1 / "git-worker.1").symlink_to(tmp_path / "elsewhere")  # the person's own link now: not recorded as ours
    link_pages(str(bin_dir / "git-worker"), str(again))
    assert os.readlink(man1 / "git-worker.1") == str(tmp_path / "elsewhere")


def test_uninstall_links_removes_only_the_links_git_nerve_recorded_making(tmp_path):
    """`git nerve uninstall-links` (manlink.unlink_pages): the recorded links that still point where they were made
    to point go; a person's link, a recorded link re-pointed since, and a file at a recorded name are kept."""
    from git_nerve.manlink import link_pages, unlink_pages

    prefix = tmp_path / "tool"
    shipped = prefix / "share" / "man" / "man1"
    shipped.mkdir(parents=True)
    for name in ("git-worker.1", "git-worker-spawn.1", "git-nerve.1", "git-nerve-demo.1"):
        (shipped / name).write_text(name)
    (prefix / "bin").mkdir()
    bin_dir = tmp_path / "local" / "bin"
    bin_dir.mkdir(parents=True)
    man1 = tmp_path / "local" / "share" / "man" / "man1"
    man1.mkdir(parents=True)
    (man1 / "mine.1").symlink_to(shipped / "git-worker.1")  # the person's own link
    made = link_pages(str(bin_dir / "git-worker"), str(prefix))
    assert len(made) == 4
    (man1 / "git-nerve.1").unlink()
    (man1 / "git-nerve.1").symlink_to(tmp_path / "theirs")  # re-pointed by someone since
    (man1 / "git-nerve-demo.1").unlink()
    (man1 / "git-nerve-demo.1").write_text("a file now")  # replaced by a file
    removed, kept = unlink_pages(str(bin_dir))
    assert sorted(Path(p).name for p in removed) == ["git-worker-spawn.1", "git-worker.1"]
    assert len(kept) == 2 and all(line.startswith("kept ") for line in kept)
    assert os.readlink(man1 / "mine.1") == str(shipped / "git-worker.1")
    assert os.readlink(man1 / "git-nerve.1") == str(tmp_path / "theirs")
    assert (man1 / "git-nerve-demo.1").read_text() == "a file now"
    assert not (man1 / "git-worker.1").exists() and not (man1 / "git-worker.1").is_symlink()
    assert unlink_pages(str(bin_dir)) == ([], [])  # nothing more to remove, and the kept ones are not ours any more

