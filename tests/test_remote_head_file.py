"""The remote's default branch read from refs/remotes/<remote>/HEAD's own file (issue 27: one git process fewer
for every command that reads the settings) agrees with `git symbolic-ref`, and whatever is not that file's
plain form is still git's to answer."""

from __future__ import annotations

import os
import subprocess

from fixtures.repos import build
from git_nerve.git import remote as gitremote
from git_nerve.paths import discover


def _git_says(work) -> str | None:
    proc = subprocess.run(["git", "symbolic-ref", "-q", "refs/remotes/origin/HEAD"], cwd=work, capture_output=True, text=True)
    return proc.stdout.strip()[len("refs/remotes/origin/"):] if proc.returncode == 0 else None


def test_the_file_read_agrees_with_git(remote_repo):
    work = remote_repo.work
    common = discover(work).common_dir
    assert gitremote._symref_file(common, "origin") == "main" == _git_says(work)
    build.git(work, "push", "-q", "origin", "main:feat/next")
    build.git(work, "fetch", "-q", "origin")
    build.git(work, "remote", "set-head", "origin", "feat/next")
    assert gitremote.default_branch(work, "origin", common) == "feat/next" == _git_says(work)
    build.git(work, "remote", "set-head", "-d", "origin")  # no file: git is asked, and says there is none
    assert gitremote._symref_file(common, "origin") is None
    assert gitremote.default_branch(work, "origin", common) is None is _git_says(work)


def test_anything_but_the_plain_form_is_asked_of_git(remote_repo, monkeypatch):
    work = remote_repo.work
    common = discover(work).common_dir
    head = common / "refs" / "remotes" / "origin" / "HEAD"
    asked = []
    real = gitremote.cli.run
    monkeypatch.setattr(gitremote.cli, "run", lambda args, **kw: asked.append(args) or real(args, **kw))
    assert gitremote.default_branch(work, "origin", common) == "main" and asked == []
    head.write_text("ref:  refs/remotes/origin/main \n")  # git reads this too (its own parser's business)
    assert gitremote.default_branch(work, "origin", common) == _git_says(work) and len(asked) == 1
    head.unlink()
    os.symlink("main", head)  # an old-style symlink ref
    assert gitremote.default_branch(work, "origin", common) == _git_says(work) and len(asked) == 2
    assert gitremote._symref_file(common, "../../x") is None
