"""Finding leftover conflict blocks in the commits a push would carry (git_nerve.git.conflicts)."""

from __future__ import annotations

import pytest

from fixtures.repos.build import commit_file, git
from git_nerve.git import conflicts

BLOCK = b"a\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> topic\nz\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BLOCK, True),
        (BLOCK.replace(b"\n", b"\r\n"), True),
        (b"<<<<<<< ours\nx\n||||||| base\ny\n=======\nz\n>>>>>>> theirs\n", True),  # diff3 style
        (b"Title\n=======\n\nbody\n", False),  # a reStructuredText heading
        (b"<<<<<<< HEAD\nonly an opening line\n", False),
        (b"=======\n>>>>>>> x\n<<<<<<< y\n", False),  # out of order
        (b"<<<<<<<HEAD\n=======\n>>>>>>> x\n", False),  # git always writes the space
        (b"  <<<<<<< HEAD\n=======\n>>>>>>> x\n", False),  # markers start a line
        (b"<<<<<<< HEAD\n======= not alone\n>>>>>>> x\n", False),
    ],
)
def test_has_conflict_block(text, expected):
    assert conflicts.has_conflict_block(text) is expected


def test_conflict_blocks_names_files_added_or_changed_with_a_block_once(repo):
    work = repo.work
    base = git(work, "rev-parse", "HEAD")
    first = commit_file(work, "src/app.py", BLOCK.decode(), "markers")
    commit_file(work, "src/app.py", BLOCK.decode() + "more\n", "still markers")
    (work / "blob.bin").write_bytes(b"\0binary\n" + BLOCK)
    (work / "link").symlink_to("src/app.py")
    git(work, "add", "blob.bin", "link")
    git(work, "commit", "-q", "-m", "binary and a symlink")
    commit_file(work, "docs/fixed.md", BLOCK.decode(), "markers in docs")
    commit_file(work, "docs/fixed.md", "fixed\n", "fixed")

    commits = conflicts.pushed_commits(work, [git(work, "rev-parse", "HEAD")], [base])

    assert len(commits) == 5
    found = conflicts.conflict_blocks(work, commits)
    assert [m.path for m in found] == ["docs/fixed.md", "src/app.py"]  # each commit's version counts
    assert next(m for m in found if m.path == "src/app.py").commit == first  # the commit that brought the block in


def test_pushed_commits_ignores_unknown_exclusions(repo):
    work = repo.work
    tip = commit_file(work, "a.txt", "a\n", "a")
    missing = "1" * 40

    assert conflicts.pushed_commits(work, [tip], ["--remotes", missing, "HEAD~1"]) == [tip]
