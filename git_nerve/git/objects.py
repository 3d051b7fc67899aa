"""Object-level git through pygit2: in-memory rebases and merges that never
touch a work tree, and the commits they create.

Nothing here moves a reference or writes a checkout: callers publish the
result with a compare-and-set (:func:`git_nerve.git.refs.update`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import pygit2

from ..errors import GitError
from . import cli


def open_repo(path: str | os.PathLike[str]) -> pygit2.Repository:
    try:
        return pygit2.Repository(os.fspath(path))
    except (pygit2.GitError, KeyError) as exc:
        raise GitError(f"cannot open repository at {path}: {exc}") from exc


def ref_tip(repo: pygit2.Repository, ref: str) -> str | None:
    """The commit a full ref name points at (peeled), read in process; None when there is none."""
    try:
        found = repo.references.get(ref)
        return str(found.peel(pygit2.Commit).id) if found is not None else None
    except (pygit2.GitError, KeyError, ValueError):
        return None


_IDENT = re.compile(r"^(?P<name>.*) <(?P<email>[^>]*)> (?P<time>-?\d+) (?P<offset>[+-]\d{4})$")


def identity(cwd, which: str = "GIT_COMMITTER_IDENT") -> pygit2.Signature:
    """The identity git itself would use (config, ``-c``, GIT_* env), as a signature.

    For commits made on the person's behalf (a rebase, a merge commit): without an identity this is
    git's refusal, as one line saying how to set one (git-nerve's own snapshots use :mod:`.ident`)."""
    from . import ident

    try:
        line = cli.out(["var", which], cwd=cwd)
    except GitError as exc:
        if ident.is_missing(exc.message):
            raise GitError(ident.missing_message("this commit", exc.message)) from exc
        raise
    m = _IDENT.match(line)
    if not m:
        raise GitError(f"cannot parse git identity {line!r}; set user.name and user.email")
    off = int(m["offset"])
    minutes = (abs(off) // 100) * 60 + abs(off) % 100
    return pygit2.Signature(m["name"], m["email"], int(m["time"]), minutes if off >= 0 else -minutes)


@dataclass
class RebaseResult:
    tip: str  #: the rebased tip (== onto when every commit was already applied)
    rewritten: list[tuple[str, str]] = field(default_factory=list)  #: (old sha, new sha)
    conflicts: list[str] = field(default_factory=list)  #: files, when the rebase stopped

    @property
    def clean(self) -> bool:
        return not self.conflicts


def rebase_in_memory(repo_path, branch_tip: str, upstream: str, onto: str, committer: pygit2.Signature) -> RebaseResult:
    """Replay ``upstream..branch_tip`` onto ``onto`` without touching any work tree or ref.

    On the first conflicting commit the rebase is aborted and the result
    names the conflicting files; nothing is left behind in the repository.
    """
    repo = open_repo(repo_path)
    try:
        rebase = repo.rebase_init(
            branch=pygit2.Oid(hex=branch_tip), upstream=pygit2.Oid(hex=upstream), onto=pygit2.Oid(hex=onto), inmemory=True
        )
    except pygit2.GitError as exc:
        raise GitError(f"cannot start the rebase: {exc}") from exc
    result = RebaseResult(tip=onto)
    last = onto
    try:
        for op in rebase:
            index = rebase.inmemory_index
            if index.conflicts is not None:
                files = sorted({e.path for entry in index.conflicts for e in entry if e is not None})
                rebase.abort()
                return RebaseResult(tip=onto, conflicts=files)
            original = repo[op.id]
            new = rebase.commit(committer=committer, author=original.author, message=original.message)
            if new is None:
                continue  # the change is already upstream: drop it, as git rebase does
            last = str(new)
            result.rewritten.append((str(op.id), last))
        rebase.finish(committer)
    except pygit2.GitError as exc:
        try:
            rebase.abort()
        except pygit2.GitError:
            pass
        raise GitError(f"in-memory rebase failed: {exc}") from exc
    result.tip = last
    return result


@dataclass
class MergeResult:
    commit: str | None
    conflicts: list[str] = field(default_factory=list)


def merge_conflicts(repo_path, ours: str, theirs: str) -> list[str]:
    """Files that would conflict if ``theirs`` were merged into ``ours`` (in memory)."""
    repo = open_repo(repo_path)
    index = repo.merge_commits(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
    if index.conflicts is None:
        return []
    return sorted({e.path for entry in index.conflicts for e in entry if e is not None})


def merge_commit(repo_path, ours: str, theirs: str, message: str, author: pygit2.Signature, committer: pygit2.Signature) -> MergeResult:
    """Build the ``--no-ff`` merge commit of ``theirs`` into ``ours``; no ref or checkout moves."""
    repo = open_repo(repo_path)
    index = repo.merge_commits(pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs))
    if index.conflicts is not None:
        return MergeResult(None, sorted({e.path for entry in index.conflicts for e in entry if e is not None}))
    tree = index.write_tree(repo)
    oid = repo.create_commit(None, author, committer, message, tree, [pygit2.Oid(hex=ours), pygit2.Oid(hex=theirs)])
    return MergeResult(str(oid))
