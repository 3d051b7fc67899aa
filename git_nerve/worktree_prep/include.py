"""`.worktreeinclude` (gitignore syntax, read as Claude Code, Conductor, Codex, ccmanager and
git-worktreeinclude read it) and ``[worktree] include``: the ignored files of the main checkout a new
worktree is given.

A file is copied when a pattern matches it *and* git ignores it in the main checkout (git says which:
never reimplemented here). Never a tracked file, never over anything in the new worktree (a file it
tracks, or any file already there), regular files only, never through a symlink (on either side), never
from a path whose real location leaves the main checkout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
import stat
from pathlib import Path


from ..git import tracked as gittracked

FILE = ".worktreeinclude"
ALREADY = "the new worktree already has it"


@dataclass
class CopyReport:
    copied: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def patterns(main: Path, extra: tuple[str, ...], *, file_text: str | None = None) -> tuple[list[str], list[str]]:
    """(usable patterns, warnings): the main checkout's .worktreeinclude (``file_text``: its content as the caller
    already read and trusted it), then ``extra``. A pattern with a ``..`` part can never name a file of the
    checkout: it is dropped with a warning."""
    lines: list[str] = []
    try:
        lines = (main / FILE).read_text(encoding="utf-8").splitlines() if file_text is None else file_text.splitlines()
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        return [], [f"cannot read {main / FILE}: {exc}; nothing copied"]
    usable, warnings = [], []
    for line in [*lines, *extra]:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if ".." in text.lstrip("!").replace("\\", "/").split("/"):
            warnings.append(f"{FILE}: pattern {text!r} leaves the checkout; ignored")
            continue
        usable.append(text)
    return usable, warnings


def candidates(main: Path, pats: list[str], skip_dirs: tuple[str, ...] = ()) -> list[str]:
    """Relative paths of the ignored regular files of ``main`` that ``pats`` match (sorted)."""
    if not pats:
        return []
    import pathspec  # here: a spawn with nothing to include never loads it (~15 ms)

    spec = pathspec.GitIgnoreSpec.from_lines(pats)
    entries = gittracked.ignored_entries(main) or []
    skip = {d.strip("/") for d in skip_dirs}
    found: list[str] = []
    for entry in entries:
        if entry.rstrip("/") in skip:
            continue
        if not entry.endswith("/"):
            if spec.match_file(entry):
                found.append(entry)
            continue
        if _may_match_under(pats, entry):
            found += _walk_matches(main, entry, spec, skip)
    return sorted(set(found))


def _may_match_under(pats: list[str], directory: str) -> bool:
    """False only when no pattern can match below ``directory`` (every pattern anchored elsewhere)."""
    for p in pats:
        if p.startswith("!"):
            continue
        body = p.lstrip("/")
        if "/" not in body.rstrip("/") and not p.startswith("/"):
            return True  # a bare name matches at any depth
        literal = []
        for part in body.split("/"):
            if any(c in part for c in "*?[\\"):
                break
            literal.append(part)
        prefix = "/".join(literal)
        if not prefix or prefix.startswith(directory.rstrip("/")) or directory.startswith(prefix.rstrip("/") + "/") \
                or directory.rstrip("/") == prefix.rstrip("/"):
            return True
    return False


def _walk_matches(main: Path, directory: str, spec, skip: set[str]) -> list[str]:
    out = []
    for root, dirs, files in os.walk(main / directory, followlinks=False):
        rel_root = Path(root).relative_to(main).as_posix()
        dirs[:] = [d for d in dirs if d != ".git" and f"{rel_root}/{d}" not in skip]  # not a nested repository's
        out += [f"{rel_root}/{f}" for f in files if spec.match_file(f"{rel_root}/{f}")]
    return out


def copy_files(main: Path, worktree: Path, rels: list[str]) -> CopyReport:
    """Copy each of ``rels`` from ``main`` to the same path in ``worktree``, each refusal one warning."""
    report = CopyReport()
    tracked_here = gittracked.tracked_among(worktree, rels)
    main_real, wt_real = os.path.realpath(main), os.path.realpath(worktree)
    for rel in rels:
        why = _refusal(main, worktree, rel, main_real, wt_real, tracked_here)
        if why == ALREADY and _same_regular_file(main / rel, worktree / rel):
            report.copied.append(rel)  # an earlier copy (a killed spawn, a kept worktree at retry): still guarded
            continue
        if why:
            report.warnings.append(f"not copied: {rel} ({why})")
            continue
        try:
            _copy_one(main / rel, worktree / rel)
        except OSError as exc:
            report.warnings.append(f"not copied: {rel} ({exc.strerror or exc})")
            continue
        report.copied.append(rel)
    return report


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def _refusal(main: Path, worktree: Path, rel: str, main_real: str, wt_real: str, tracked_here: set[str]) -> str | None:
    if os.path.isabs(rel) or ".." in rel.split("/"):
        return "leaves the checkout"
    if rel in tracked_here:
        return "the new worktree tracks it"
    src = main / rel
    try:
        st = os.lstat(src)
    except OSError:
        return "gone"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not _inside(os.path.realpath(src), main_real) or os.path.realpath(src) != os.path.join(main_real, *rel.split("/")):
        return "its real path leaves the main checkout"
    dst = worktree / rel
    if os.path.lexists(dst):
        return ALREADY
    cur = worktree
    for part in rel.split("/")[:-1]:
        cur = cur / part
        if os.path.islink(cur):
            return "a symlink on its way in the new worktree"
        if os.path.lexists(cur) and not cur.is_dir():
            return "a file on its way in the new worktree"
    if not _inside(os.path.realpath(worktree / rel), wt_real):
        return "its place in the new worktree leaves it"
    return None


def _same_regular_file(src: Path, dst: Path) -> bool:
    try:
        a, b = os.lstat(src), os.lstat(dst)
        if not (stat.S_ISREG(a.st_mode) and stat.S_ISREG(b.st_mode)) or a.st_size != b.st_size:
            return False
        return src.read_bytes() == dst.read_bytes()
    except OSError:
        return False


def _copy_one(src: Path, dst: Path) -> None:
    """A regular file, opened without following a symlink, written to a new file (never over one)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd_in = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        mode = stat.S_IMODE(os.fstat(fd_in).st_mode)
        fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
        try:
            while chunk := os.read(fd_in, 1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd_out, view):]
        finally:
            os.close(fd_out)
    finally:
        os.close(fd_in)
