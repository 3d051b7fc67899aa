"""References: resolving, compare-and-set updates, archives. Through the git
binary: ``git update-ref <ref> <new> <old>`` is git's own atomic CAS."""

from __future__ import annotations

import os
import time

from ..errors import GitError
from . import cli

ZERO = "0" * 40


def resolve(cwd, rev: str) -> str | None:
    """The commit a revision names, or None."""
    proc = cli.run(["rev-parse", "-q", "--verify", "--end-of-options", f"{rev}^{{commit}}"], cwd=cwd, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def full_name(cwd, rev: str) -> str | None:
    """``origin/main`` -> ``refs/remotes/origin/main``; None for a plain sha or unknown name."""
    # --verify: without it rev-parse echoes "--end-of-options" as an output line
    proc = cli.run(["rev-parse", "--symbolic-full-name", "--verify", "-q", "--end-of-options", rev], cwd=cwd, check=False)
    name = proc.stdout.strip() if proc.returncode == 0 else ""
    return name or None


def tips(cwd, prefixes: list[str]) -> dict[str, str]:
    """Every ref under ``prefixes`` (``refs/heads/``, ...) and the object it points at, in one git call."""
    out = cli.run(["for-each-ref", "--format=%(objectname) %(refname)", *prefixes], cwd=cwd, check=False).stdout
    return {name: sha for sha, _, name in (line.partition(" ") for line in out.splitlines()) if name}


def verify(cwd, rev: str) -> str | None:
    """``git rev-parse -q --verify REV``: the object name (any type: ``HEAD``, ``<rev>:<path>``), or None."""
    proc = cli.run(["rev-parse", "-q", "--verify", rev], cwd=cwd, check=False)
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def set_symbolic(cwd, name: str, target: str) -> bool:
    """``git symbolic-ref NAME TARGET``; True when it did."""
    return cli.run(["symbolic-ref", name, target], cwd=cwd, check=False).returncode == 0


def rev_list_count(cwd, since: str, until: str) -> int | None:
    """``git rev-list --count SINCE..UNTIL``; None when git cannot tell."""
    proc = cli.run(["rev-list", "--count", f"{since}..{until}"], cwd=cwd, check=False)
    return int(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip().isdigit() else None


def reflog_shas(cwd, ref: str, limit: int = 200) -> list[str]:
    """``git reflog show -n LIMIT --format=%H REF``: where ``ref`` has been, newest first ([] when it has no reflog)."""
    return cli.run(["reflog", "show", "-n", str(limit), "--format=%H", ref, "--"], cwd=cwd, check=False).stdout.split()


def rev_parse(cwd, rev: str) -> str:
    """``git rev-parse REV`` (GitError when git cannot)."""
    return cli.out(["rev-parse", rev], cwd=cwd)


#: characters a reference name's components may be made of for :func:`plainly_valid` (git allows more: those
#: names are left to git)
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def plainly_valid(ref: str) -> bool:
    """True only for names git's rules (git-check-ref-format(1)) plainly accept: two or more components of
    letters, digits, ``_``, ``-`` and ``.``, none empty, none starting with ``.`` or ``-``, none ending in
    ``.lock`` or ``.``, no ``..``. False says nothing (git decides)."""
    parts = ref.split("/")
    return len(parts) >= 2 and ".." not in ref and all(
        p and _PLAIN.issuperset(p) and p[0] not in ".-" and not p.endswith((".", ".lock")) for p in parts)


def check_ref_format(cwd, ref: str) -> bool:
    """``git check-ref-format REF``: True when ``ref`` is a valid reference name (plain names without git)."""
    return plainly_valid(ref) or cli.ok(["check-ref-format", ref], cwd=cwd)


def exists(cwd, ref: str) -> bool:
    return cli.ok(["show-ref", "--verify", "--quiet", ref], cwd=cwd)


def update(cwd, ref: str, new: str, old: str | None, message: str) -> bool:
    """Move ``ref`` to ``new`` only if it still points at ``old`` (None: must not exist).

    Returns False when the ref moved under us (the CAS lost), True on success.
    """
    proc = cli.run(
        ["update-ref", "-m", message, ref, new, old if old is not None else ZERO],
        cwd=cwd,
        check=False,
    )
    if proc.returncode == 0:
        return True
    err = proc.stderr
    lock = cli.lock_file_in(err)
    if lock and stale_lock(lock):
        # not a concurrent update (git drops its lock within milliseconds): a killed git left it
        raise GitError(f"cannot update {ref}: {cli.stale_lock_message(lock)}")
    if "cannot lock ref" in err or "is at" in err or "but expected" in err or "reference already exists" in err:
        return False
    raise GitError(f"cannot update {ref}: {cli.message(err)}")


def stale_lock(path: str | os.PathLike[str], wait: float = 1.0) -> bool:
    """True when git's lock file ``path`` exists and is still there after ``wait`` seconds
    (a running git holds one for milliseconds; one that stays was left by a killed git)."""
    deadline = time.monotonic() + wait
    while os.path.exists(path):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.05)
    return False


def is_ancestor(cwd, ancestor: str, descendant: str) -> bool:
    proc = cli.run(["merge-base", "--is-ancestor", ancestor, descendant], cwd=cwd, check=False)
    if proc.returncode in (0, 1):
        return proc.returncode == 0
    raise GitError(f"cannot compare {ancestor[:12]} and {descendant[:12]}: {cli.message(proc.stderr)}")


def is_ancestor_quiet(cwd, ancestor: str, descendant: str, *, inherit_location: bool = False) -> bool:
    """``git merge-base --is-ancestor``; False when it is not or git cannot tell (no error)."""
    return cli.ok(["merge-base", "--is-ancestor", ancestor, descendant], cwd=cwd, inherit_location=inherit_location)


def symbolic(cwd, name: str) -> str | None:
    proc = cli.run(["symbolic-ref", "-q", name], cwd=cwd, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def commit_subject(cwd, rev: str) -> str:
    return cli.out(["log", "-1", "--format=%s", rev], cwd=cwd)


def commits_between(cwd, base: str, tip: str) -> list[str]:
    out = cli.out(["rev-list", "--reverse", f"{base}..{tip}"], cwd=cwd)
    return out.split() if out else []


def archive_name(task_id: str) -> str:
    return f"refs/nerve/archive/{task_id}"


def reflog_commits(git_dir, ref: str, *, since: float | None = None) -> list[str]:
    """The commits a reflog names (each entry's old and new value), newest first, from entries written at
    or after ``since`` (epoch seconds; None: all). Read from ``<git_dir>/logs/<ref>`` itself: ``git reflog``
    needs a ref that resolves, which a deleted or unborn branch's HEAD does not. [] when there is none."""
    try:
        with open(os.path.join(os.fspath(git_dir), "logs", *ref.split("/")), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out: list[str] = []
    for line in reversed(lines):
        head, _, _msg = line.partition("\t")
        parts = head.split(" ")
        if len(parts) < 4:
            continue
        try:
            when = int(parts[-2])
        except ValueError:
            when = None
        if since is not None and when is not None and when < since:
            continue
        for sha in (parts[1], parts[0]):
            if len(sha) >= 40 and sha != ZERO and sha not in out:
                out.append(sha)
    return out
