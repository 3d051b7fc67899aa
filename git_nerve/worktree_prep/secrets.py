"""Copied secrets stay out of git: the guard of a task's worktree at every exit, and the masking of its values.

At the copy, the values (>= 8 characters) of each copied ``.env``-style file (KEY=VALUE lines) are kept
only as salted hashes (HMAC-SHA256 with a per-task salt) beside their length and file name: git-nerve never
writes a value anywhere. One rule (:func:`_finding`): a commit that adds a copied file, or adds a line holding
one of those values, is refused, in one line naming the file (never the value): at the commit (:func:`check`,
pre-commit) and at every exit, for every commit about to be published (:func:`published_refusal`: the pre-push
hook, `done`, `merge`), so `git commit --no-verify` publishes nothing. :func:`redactor` masks the values in what
an agent printed (:mod:`git_nerve.redact`).

Standard library only (the hook path imports it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from ..redact import Redactor, by_length, digest, env_secrets

MIN_VALUE = 8
_LINE = r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*[=:]\s*(.*?)\s*$"  # compiled on first use (start-up)


def is_env_file(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name == ".env" or name.startswith(".env.") or name.endswith(".env")


def env_values(text: str) -> list[str]:
    """The values of KEY=VALUE lines (quotes and a trailing comment of an unquoted value removed)."""
    values = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = re.match(_LINE, line)
        if not m:
            continue
        value = m.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
            value = value[1:-1]
        else:
            value = value.split(" #", 1)[0].strip()
        if len(value) >= MIN_VALUE:
            values.append(value)
    return values


def hashes_of(worktree: Path, copied: list[str], salt: bytes) -> list[list]:
    """[length, digest, file] for every value of the copied .env-style files."""
    out: list[list] = []
    for rel in copied:
        if not is_env_file(rel):
            continue
        try:
            text = (worktree / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        out += [[len(v), digest(salt, v), rel] for v in sorted(set(env_values(text)))]
    return out


def new_salt() -> str:
    return os.urandom(16).hex()


def _finding(added_files: list[str], added_lines: list[tuple[str, str]], copied: list[str],
             values: Redactor) -> tuple[str, str | None] | None:
    """THE rule: (the copied file a commit adds, None), or (the file that adds a line holding a copied value, the
    copied file the value is from), or None. ``values``: the task's copied values (literally or by hash)."""
    copied_set = set(copied)
    for f in added_files:
        if f in copied_set:
            return f, None
    if not values:
        return None
    for f, text in added_lines:
        found = values.find(text)
        if found:
            return f, found[2]
    return None


def check(added_files: list[str], added_lines: list[tuple[str, str]], copied: list[str], values: Redactor) -> str | None:
    """The refusal line for a commit being made (pre-commit), or None. ``added_lines``: (file, text) of each line
    the commit adds; ``values``: the task's copied values (:func:`redactor` with no environment)."""
    found = _finding(added_files, added_lines, copied, values)
    if found is None:
        return None
    f, src = found
    if src is None:
        return (f"refused: this commit adds {f}, a file git-nerve copied into this worktree (ignored in the "
                f"main checkout; it may hold secrets): `git rm --cached {f}`")
    return f"refused: {f} adds a value from {src}, which git-nerve copied into this worktree (a secret stays out of git)"


def published_refusal(conn, task_id: str, commits: Callable[[], list[str]], *, cwd=None,
                      inherit_location: bool = False) -> str | None:
    """The one check of every exit (the pre-push hook, `done`, `merge` and `merge --all`): the refusal line when
    one of the commits about to be published (``commits()``, oldest first) adds a file git-nerve copied into the
    task's worktree or a line holding a copied value, by the rule of pre-commit; it names the commit and the file,
    never the value. A task that was given no copies (the usual case) costs one read of its bus row, no git."""
    from ..bus import prep as busprep
    from ..git import staged

    row = busprep.get(conn, task_id)
    if row is None or not row.copied_paths:
        return None
    values = redactor(conn, task_id, env={})  # known literally from the worktree where it still holds them: fast
    for commit, files, lines in staged.commit_additions(cwd, commits(), inherit_location=inherit_location):
        found = _finding(files, lines, row.copied_paths, values)
        if found is None:
            continue
        f, src = found
        what = (f"adds {f}, a file git-nerve copied into the worktree of {task_id} (it may hold secrets)" if src is None
                else f"adds to {f} a value from {src}, which git-nerve copied into the worktree of {task_id}")
        return (f"commit {commit[:12]} {what}: a secret is never published; rewrite that commit without it "
                f"(`git rebase -i {commit[:12]}~1`, or `git reset --soft` and commit again), then retry")
    return None


def redactor(conn, task_id: str | None, worktree=None, env=None) -> Redactor:
    """The masking of what ``task_id``'s agent printed (:mod:`git_nerve.redact`): the secret environment values of
    ``env`` (default: this process's, the one agents started from here are given), and every value of the task's
    copied ``.env`` files, recovered from its worktree (``worktree``, else the row's) when the file there still holds
    it (checked against the recorded hash), else looked for by hash."""
    from ..bus import prep as busprep

    env_values_ = env_secrets(env)
    row = busprep.get(conn, task_id) if task_id else None
    if row is None or not row.hashes or not row.salt:
        return Redactor(env_values_)
    salt, table = bytes.fromhex(row.salt), by_length(row.hashes)
    if worktree is None:
        from ..bus import workers

        w = workers.get(conn, task_id)
        worktree = w.worktree if w is not None else None
    copied: dict[str, str] = {}
    for src in sorted({h[2] for h in row.hashes}):
        for value in _values_in(worktree, src):
            known, h = table.get(len(value)), digest(salt, value)
            if known is not None and known.get(h) == src:
                copied[value] = src
                del known[h]
    return Redactor(env_values_, copied, salt, table)


def redactor_at(common_dir, task_id: str | None, worktree=None, env=None) -> Redactor:
    """:func:`redactor` for a caller with no bus open: the bus opened for the read (its existing file only); the
    environment's values alone when it cannot be read."""
    from ..bus import Bus
    from ..errors import NerveError

    try:
        bus = Bus(Path(common_dir) / "nerve" / "bus.db", create=False)
    except (NerveError, OSError):
        return Redactor(env_secrets(env))
    try:
        return redactor(bus.conn, task_id, worktree, env)
    finally:
        bus.close()


def _values_in(worktree, rel: str) -> list[str]:
    if not worktree:
        return []
    try:
        return env_values((Path(worktree) / rel).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return []
