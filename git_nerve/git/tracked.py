"""Which of some paths a checkout tracks, and what git ignores there (for the files a new worktree is given)."""

from __future__ import annotations

import os
from pathlib import Path

from . import cli


def tracked_among(checkout: Path, paths: list[str]) -> set[str]:
    """The paths of ``paths`` (relative, '/'-separated) that ``checkout``'s index tracks."""
    found: set[str] = set()
    for i in range(0, len(paths), 500):  # argv stays well under the system's limit
        batch = paths[i:i + 500]
        proc = cli.run(["ls-files", "-z", "--", *[f":(literal){p}" for p in batch]], cwd=checkout, check=False)
        if proc.returncode != 0:
            found |= set(batch)  # cannot tell: treat them as tracked (never copied over)
            continue
        found |= {p for p in proc.stdout.split("\0") if p}
    return found


def tracked_under(cwd, directory: str, *, env=None) -> list[str] | None:
    """The files the index of ``cwd``'s checkout tracks under ``directory`` (relative to ``cwd``, or absolute
    inside the checkout), as paths relative to ``cwd`` (names that are not UTF-8 with surrogate escapes, as
    ``os.walk`` gives them); None when git cannot tell."""
    proc = cli.run(["ls-files", "-z", "--", f":(literal){directory}"], cwd=cwd, env=env, check=False, text=False)
    if proc.returncode != 0:
        return None
    return [p.decode("utf-8", "surrogateescape") for p in proc.stdout.split(b"\0") if p]


def ignored_under(cwd, paths: list[str], *, glob: bool = False) -> list[str] | None:
    """The untracked files git ignores in ``cwd``'s checkout at or under ``paths`` (relative to ``cwd``; ``glob``:
    git's glob patterns, ``**`` any depth), relative to ``cwd`` (names that are not UTF-8 with surrogate escapes);
    None when git cannot tell."""
    magic = "glob" if glob else "literal"
    proc = cli.run(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--",
                    *[f":({magic}){p}" for p in paths]], cwd=cwd, check=False, text=False)
    if proc.returncode != 0:
        return None
    return [p.decode("utf-8", "surrogateescape") for p in proc.stdout.split(b"\0") if p]


def nested_folders(cwd, folder: str) -> list[str] | None:
    """Every ``<dir>/<folder>`` below the top of ``cwd``'s checkout (``folder``: a '/'-separated path such as
    ``.claude/skills``; the top's own is not one) that holds a file, tracked or not (ignored ones too: an agent can
    write a .gitignore), or that a symlink on its way leads to; relative to ``cwd``, sorted (names that are not
    UTF-8 with surrogate escapes); None when git cannot tell. One ``git ls-files``."""
    parts = folder.split("/")
    specs = [f":(glob)**/{folder}/**"] + [f":(glob)**/{'/'.join(parts[:i])}" for i in range(1, len(parts) + 1)]
    proc = cli.run(["ls-files", "-z", "--cached", "--others", "--", *specs], cwd=cwd, check=False, text=False)
    if proc.returncode != 0:
        return None
    found: set[str] = set()
    for raw in proc.stdout.split(b"\0"):
        path = "/" + raw.decode("utf-8", "surrogateescape")
        at = path.find(f"/{folder}/")
        if at > 0:  # a file inside one (at 0: the top's own folder)
            found.add(path[1:at + len(folder) + 1])
            continue
        for i in range(len(parts), 0, -1):  # an entry named like the folder or a part of it: a symlink (a file)
            tail = "/" + "/".join(parts[:i])
            if path.endswith(tail) and len(path) > len(tail):
                rel = path[1:] + "".join(f"/{p}" for p in parts[i:])
                if os.path.isdir(os.path.join(cwd, rel)):
                    found.add(rel)
                break
    return sorted(found)


def ignored_entries(checkout: Path) -> list[str] | None:
    """Ignored, untracked paths of ``checkout`` (a wholly ignored directory is one entry ending in '/');
    None when git cannot tell."""
    proc = cli.run(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
                   cwd=checkout, check=False)
    if proc.returncode != 0:
        return None
    return sorted(p for p in proc.stdout.split("\0") if p)


def is_tracked(cwd, path: str) -> bool:
    """``git ls-files --error-unmatch -- PATH``: True when the index tracks ``path``."""
    return cli.ok(["ls-files", "--error-unmatch", "--", path], cwd=cwd)


def is_ignored_no_index(cwd, path, *, env=None) -> bool:
    """``git check-ignore -q --no-index PATH``: True when git's ignore rules match ``path``, tracked or not."""
    return cli.ok(["check-ignore", "-q", "--no-index", os.fspath(path)], cwd=cwd, env=env)


def is_ignored(checkout: Path, rel: str) -> bool:
    """True when git ignores ``rel`` in ``checkout`` (and does not track it)."""
    return cli.ok(["check-ignore", "-q", "--", rel], cwd=checkout)


def files_not_ignored(toplevel: Path, only: list[str] | None = None) -> list[str]:
    """``git ls-files --cached --others --exclude-standard``: the files git does not ignore (tracked or not),
    relative to ``toplevel``; only those among ``only`` (literal paths) if given. Names that are not UTF-8 come
    back with surrogate escapes."""
    args = ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    if only is not None:
        if not only:
            return []
        args = ["--literal-pathspecs", *args, "--", *only]
    raw = cli.run(args, cwd=toplevel, text=False).stdout
    return list(dict.fromkeys(p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p))
