"""Whose name a commit git-nerve writes carries, when git has no identity (no user.email on a fresh machine).

Two kinds of commit, two rules:

* commits made for the person (``done``'s rebase, ``merge``'s merge commit, ``merge --check``'s
  trial merge) carry the person's identity, as ``git commit`` would: without one git's error stands,
  as one line that says how to set it (:func:`missing_message`);
* git-nerve's own bookkeeping commits (the snapshots kept under ``refs/nerve/archive/``) carry the
  person's identity when git has one and :data:`FALLBACK` otherwise: losing an archive, or refusing
  a cancel, because no user.email is set would cost the person their work.

Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import GitError
from . import cli

#: git-nerve's own name on its bookkeeping commits when git has no identity
FALLBACK = ("git-nerve", "git-nerve@localhost")

#: what git says when it has no identity to write a commit with
_MISSING = ("unable to auto-detect email address", "auto-detection is disabled", "empty ident name",
            "tell me who you are")


def is_missing(said: str) -> bool:
    """True when git's error ``said`` is that it has no identity (user.name / user.email)."""
    return any(phrase in said for phrase in _MISSING)


def missing_message(what: str, said: str) -> str:
    """One line: git has no identity for ``what``, and how to give it one."""
    cause = next((p for p in _MISSING if p in said), "no identity")
    return (f"git has no identity for {what} ({cause}): set one with "
            f"`git config --global user.email you@example.com` and `git config --global user.name \"Your Name\"`")


def var(cwd, name: str) -> str | None:
    """``git var NAME`` (``GIT_AUTHOR_IDENT``, ``GIT_COMMITTER_IDENT``): its value, or None when git has none."""
    proc = cli.run(["var", name], cwd=cwd, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def commit_tree(args: Sequence[str], *, cwd, env: Mapping[str, str] | None = None) -> str:
    """``git commit-tree ARGS`` for a bookkeeping commit of git-nerve's own: the sha.

    With the person's identity where git has one; where it has none, the parts git lacks
    (name, email; author, committer) are :data:`FALLBACK`'s, and git's own settings win wherever set.
    """
    try:
        return cli.out(["commit-tree", *args], cwd=cwd, env=env)
    except GitError as exc:
        if not is_missing(exc.message):
            raise
    filled = dict(env if env is not None else cli.clean_env())
    configured = {key: cli.out(["config", f"user.{key}"], cwd=cwd, env=env, check=False) for key in ("name", "email")}
    for role in ("AUTHOR", "COMMITTER"):
        for key, fallback in zip(("name", "email"), FALLBACK):
            var = f"GIT_{role}_{key.upper()}"
            if not filled.get(var) and not configured[key]:
                filled[var] = fallback
    return cli.out(["commit-tree", *args], cwd=cwd, env=filled)


__all__ = ["FALLBACK", "commit_tree", "is_missing", "missing_message"]
