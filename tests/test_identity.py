"""A person whose git has no identity (a fresh machine: no user.name / user.email).

git-nerve's own bookkeeping commits (the archive snapshots a cancel keeps) still work, under
git-nerve's own name; a commit made on the person's behalf (merge's merge commit) is refused as git
would refuse it, in one line that says how to set an identity, with nothing moved.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures.repos import worker as wk
from fixtures.repos.build import git


def forget_identity(monkeypatch, *, name: str | None = None) -> None:
    """From here on git has no identity: no GIT_AUTHOR_* / GIT_COMMITTER_*, a global config without [user]
    (or with only ``name``), and no guessing from the host name (user.useConfigOnly), whatever the machine."""
    for role in ("AUTHOR", "COMMITTER"):
        for key in ("NAME", "EMAIL"):
            monkeypatch.delenv(f"GIT_{role}_{key}", raising=False)
    config = Path(os.environ["GIT_CONFIG_GLOBAL"])
    text = config.read_text(encoding="utf-8").replace("\tname = Nerve Test\n\temail = nerve@example.invalid\n", "")
    assert "[user]\n[" in text, text  # the hermetic identity was there and is gone
    config.write_text(text.replace("[user]\n", "[user]\n\tuseConfigOnly = true\n"
                                   + (f"\tname = {name}\n" if name else "")), encoding="utf-8")
    probe = git(config.parent, "var", "GIT_AUTHOR_IDENT", check=False)
    assert probe == "", f"git still has an identity: {probe}"


def author_of(cwd: Path, rev: str) -> str:
    return git(cwd, "log", "-1", "--format=%an <%ae> / %cn <%ce>", rev)


@pytest.mark.parametrize("name", [None, "Pat Person"], ids=["no-identity", "name-only"])
def test_cancel_keeps_uncommitted_work_in_the_archive_without_a_git_identity(repo, gw, monkeypatch, name):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    (wt / "notes.txt").write_text("unsaved thoughts\n")
    forget_identity(monkeypatch, name=name)

    res = gw("cancel t1 --cleanup --force", work)

    assert res.code == 0, res
    archived = git(work, "rev-parse", "refs/nerve/archive/t1")
    assert git(work, "show", f"{archived}:notes.txt") == "unsaved thoughts"
    who = name or "git-nerve"
    assert author_of(work, archived) == f"{who} <git-nerve@localhost> / {who} <git-nerve@localhost>"
    assert wk.state(work, "t1") == "FAILED"


def test_a_configured_identity_is_the_one_a_snapshot_carries(repo, gw):
    work = repo.work
    wt = wk.drive(work, "t1", "WORKING")
    (wt / "notes.txt").write_text("unsaved thoughts\n")
    assert gw("cancel t1 --cleanup --force", work).code == 0
    archived = git(work, "rev-parse", "refs/nerve/archive/t1")
    assert author_of(work, archived) == "Nerve Test <nerve@example.invalid> / Nerve Test <nerve@example.invalid>"


def test_merge_without_a_git_identity_is_one_line_saying_how_to_set_one_and_moves_nothing(repo, gw, monkeypatch):
    work = repo.work
    wk.drive(work, "t1", "APPROVED")
    main_before = git(work, "rev-parse", "main")
    forget_identity(monkeypatch)

    res = gw("merge t1", work)

    assert res.code == 4, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res
    assert "git has no identity" in lines[0] and "git config --global user.email" in lines[0], res
    assert git(work, "rev-parse", "main") == main_before
    assert wk.state(work, "t1") == "APPROVED"
