"""Copied secrets stay out of git: the pre-commit guard of a task's worktree.

At the copy, the values (>= 8 characters) of each copied ``.env``-style file (KEY=VALUE lines) are kept
only as salted hashes (HMAC-SHA256 with a per-task salt) beside their length and file name: git-nerve never
writes a value anywhere. At a commit, :func:`check` refuses the commit when it adds a copied file, or adds
a line holding one of those values, with one line naming the file (never the value).

Standard library only (the hook path imports it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

MIN_VALUE = 8
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*[=:]\s*(.*?)\s*$")


def is_env_file(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name == ".env" or name.startswith(".env.") or name.endswith(".env")


def env_values(text: str) -> list[str]:
    """The values of KEY=VALUE lines (quotes and a trailing comment of an unquoted value removed)."""
    values = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
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


def digest(salt: bytes, value: str) -> str:
    import hashlib  # here: a spawn that copies no .env file never needs them (start-up)
    import hmac

    return hmac.new(salt, value.encode("utf-8"), hashlib.sha256).hexdigest()


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


def _starts(line: str) -> list[int]:
    """Where a value may begin: the start of the line and every change between word and other characters."""
    return [i for i in range(len(line)) if i == 0 or line[i - 1].isalnum() != line[i].isalnum()
            or not line[i].isalnum()]


def find_leak(line: str, salt: bytes, by_len: dict[int, dict[str, str]]) -> tuple[int, int, str] | None:
    """(where, length, copied file) of the first copied value ``line`` holds, or None."""
    for i in _starts(line):
        for n, table in by_len.items():
            if i + n <= len(line):
                found = table.get(digest(salt, line[i:i + n]))
                if found:
                    return i, n, found
    return None


def line_leaks(line: str, salt: bytes, by_len: dict[int, dict[str, str]]) -> str | None:
    """The copied file one of whose values ``line`` holds, or None."""
    found = find_leak(line, salt, by_len)
    return found[2] if found else None


def by_length(hashes: list[list]) -> dict[int, dict[str, str]]:
    table: dict[int, dict[str, str]] = {}
    for n, h, src in hashes:
        table.setdefault(int(n), {})[h] = src
    return table


def redact(line: str, salt_hex: str | None, hashes: list[list]) -> str:
    """``line`` with every copied value replaced by ``[value from <file> hidden by git-nerve]``."""
    if not hashes or not salt_hex:
        return line
    salt, table = bytes.fromhex(salt_hex), by_length(hashes)
    out = ""
    while (found := find_leak(line, salt, table)) is not None:
        i, n, src = found
        out += line[:i] + f"[value from {src} hidden by git-nerve]"
        line = line[i + n:]
    return out + line


def check(added_files: list[str], added_lines: list[tuple[str, str]], copied: list[str], salt_hex: str | None,
          hashes: list[list]) -> str | None:
    """The refusal line for a commit, or None. ``added_lines``: (file, text) of each line the commit adds."""
    copied_set = set(copied)
    for f in added_files:
        if f in copied_set:
            return (f"refused: this commit adds {f}, a file git-nerve copied into this worktree (ignored in the "
                    f"main checkout; it may hold secrets): `git rm --cached {f}`")
    if not hashes or not salt_hex:
        return None
    salt = bytes.fromhex(salt_hex)
    by_len = by_length(hashes)
    for f, text in added_lines:
        src = line_leaks(text, salt, by_len)
        if src:
            return f"refused: {f} adds a value from {src}, which git-nerve copied into this worktree (a secret stays out of git)"
    return None
