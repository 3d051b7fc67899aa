"""The one door for destruction (issue 21): nothing outside git_nerve/git/destroy.py removes a tree, a worktree,
a branch or a ref; the door proves a target is git-nerve's own before it acts, and keeps it otherwise."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from fixtures.repos import build
from fixtures.repos import worker as wfx
from git_nerve.git import destroy

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "git_nerve"
DOOR = PACKAGE / "git" / "destroy.py"

#: what only the door may do
FORBIDDEN = {
    "shutil.rmtree": re.compile(r"\brmtree\s*\("),
    "os.rmdir": re.compile(r"\bos\.rmdir\s*\(|\bos\.removedirs\s*\("),
    "git worktree remove": re.compile(r"[\"']worktree[\"']\s*,\s*[\"']remove[\"']"),
    "git worktree prune": re.compile(r"[\"']worktree[\"']\s*,\s*[\"']prune[\"']"),
    "git branch -d/-D": re.compile(r"[\"']branch[\"']\s*,\s*(?:[^\]\n]*,\s*)?[\"'](?:-d|-D|--delete)[\"']"),
    "git update-ref -d": re.compile(r"[\"']update-ref[\"']\s*,\s*(?:[^\]\n]*,\s*)?[\"'](?:-d|--delete)[\"']"),
    "a ref's delete()": re.compile(r"\bdelete_reference\s*\(|\b(?:ref|reference|branch|refs?\[[^\]]*\])\.delete\s*\("),
    "a push of :refs/": re.compile(r"[\"']:refs/|f[\"']:\{|[\"']--delete[\"']"),
}


def test_nothing_outside_the_door_destroys():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == DOOR:
            continue
        text = path.read_text(encoding="utf-8")
        for what, pattern in FORBIDDEN.items():
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not found, "destruction outside git_nerve/git/destroy.py:\n" + "\n".join(found)


def test_the_patterns_catch_what_they_forbid():
    """The grep above must be able to fail: each pattern matches the call it forbids."""
    samples = {
        "shutil.rmtree": "shutil.rmtree(path, ignore_errors=True)",
        "os.rmdir": "os.rmdir(d)",
        "git worktree remove": 'cli.run(["worktree", "remove", "--force", p])',
        "git worktree prune": 'cli.run(["worktree", "prune"], cwd=cwd)',
        "git branch -d/-D": 'cli.run(["branch", "-D", name])',
        "git update-ref -d": 'cli.run(["update-ref", "-d", ref])',
        "a ref's delete()": "repo.references.delete_reference(name)",
        "a push of :refs/": 'cli.run(["push", remote, f":{ref}"])',
    }
    for what, sample in samples.items():
        assert FORBIDDEN[what].search(sample), what
