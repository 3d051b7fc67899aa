"""Installing git-nerve's hooks beside the hooks a repository already has.

The hooks go where git really looks: ``git rev-parse --git-path hooks``,
which honours ``core.hooksPath`` (set by husky and the like; a relative one
is resolved from the worktree's top, as git does) and is otherwise the common
dir's ``hooks/``, shared by every worktree.

Each hook is a copy of the one shim (top-level ``hooks/git-nerve-hook``,
shipped as ``git_nerve/hooks/shims/git-nerve-hook``) with the installing
interpreter and package location written in. A hook that is not ours is
never lost: it is renamed ``<hook>.nerve-chained`` (same inode, so the same
bytes and mode) and the shim runs it first. Uninstalling renames it back.
Installing again only refreshes our shims.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import NerveError
from ..git import cli
from ..paths import RepoPaths

#: The hooks git-nerve installs.
HOOKS = ("post-commit", "post-rewrite", "pre-push")
#: A hook that was there before ours is kept under ``<hook>`` + this suffix.
CHAINED_SUFFIX = ".nerve-chained"
#: Text that marks a hook file as one of our shims.
MARKER = b"git-nerve hook shim"
TEMPLATE = Path(__file__).resolve().parent / "shims" / "git-nerve-hook"

_PYTHON_LINE = re.compile(r"^nerve_python=(.*)$", re.MULTILINE)
_ROOT_LINE = re.compile(r"^nerve_root=(.*)$", re.MULTILINE)


# -- where ------------------------------------------------------------------------------


def _git_env(paths: RepoPaths) -> dict[str, str]:
    extra = {"GIT_DIR": os.fspath(paths.git_dir)}
    if paths.toplevel is not None:
        extra["GIT_WORK_TREE"] = os.fspath(paths.toplevel)
    return cli.clean_env(extra)


def hooks_dir(paths: RepoPaths) -> Path:
    """The directory git runs hooks from in the worktree ``paths`` describes."""
    cwd = paths.toplevel or paths.git_dir
    out = cli.out(["rev-parse", "--path-format=absolute", "--git-path", "hooks"], cwd=cwd, env=_git_env(paths))
    return Path(out)


def hooks_path_setting(paths: RepoPaths) -> str | None:
    """``core.hooksPath`` as configured, or None."""
    proc = cli.run(["config", "--get", "core.hooksPath"], cwd=paths.toplevel or paths.git_dir, env=_git_env(paths), check=False)
    value = proc.stdout.rstrip("\n")
    return value if proc.returncode == 0 and value else None


# -- the shim ---------------------------------------------------------------------------------


def package_root() -> Path:
    """The directory holding the ``git_nerve`` package this process runs."""
    return Path(__file__).resolve().parent.parent.parent


def render(python: str | None = None, root: Path | None = None) -> bytes:
    """The shim with ``python`` (default: this interpreter) and ``root`` written in."""
    python = sys.executable if python is None else python
    root = package_root() if root is None else root
    try:
        text = TEMPLATE.read_text(encoding="utf-8")
    except OSError as exc:
        raise NerveError(f"the hook shim {TEMPLATE} is missing from this installation ({exc.strerror or exc})") from exc
    text, n_python = _PYTHON_LINE.subn(lambda _: f"nerve_python={shlex.quote(python or '')}", text, count=1)
    text, n_root = _ROOT_LINE.subn(lambda _: f"nerve_root={shlex.quote(os.fspath(root))}", text, count=1)
    if not (n_python and n_root) or MARKER not in text.encode():
        raise NerveError(f"the hook shim {TEMPLATE} is not git-nerve's (reinstall git-nerve)")
    return text.encode("utf-8")


def _read(path: Path, limit: int | None = None) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read() if limit is None else fh.read(limit)
    except OSError:
        return None


def is_ours(path: Path) -> bool:
    """True when ``path`` is one of our shims (whatever version)."""
    head = _read(path, 4096)
    return head is not None and MARKER in head


def recorded(path: Path) -> tuple[str | None, str | None]:
    """The interpreter and package root written into an installed shim."""
    text = (_read(path) or b"").decode("utf-8", "replace")

    def value(pattern: re.Pattern) -> str | None:
        m = pattern.search(text)
        if not m:
            return None
        try:
            parts = shlex.split(m.group(1), comments=True)
        except ValueError:
            return None
        return parts[0] if parts and parts[0] else None

    return value(_PYTHON_LINE), value(_ROOT_LINE)


def _runnable(python: str | None, root: str | None) -> bool:
    return bool(
        python and root and os.access(python, os.X_OK)
        and (Path(root) / "git_nerve" / "hooks" / "run.py").is_file()
    )


def _same_file_content(a: Path, b: Path) -> bool:
    try:
        if a.is_symlink() or b.is_symlink():
            return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
        sa, sb = a.stat(), b.stat()
    except OSError:
        return False
    return sa.st_mode == sb.st_mode and _read(a) == _read(b)


def _write_executable(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.nerve-{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fs_error(action: str, path: Path, exc: OSError) -> NerveError:
    return NerveError(f"cannot {action} {path}: {exc.strerror or exc}")


# -- install ----------------------------------------------------------------------------------


@dataclass
class HookChange:
    name: str
    #: installed | updated | unchanged | conflict (install);
    #: removed | restored | absent | foreign (uninstall)
    action: str
    #: the kept hook (``<hook>.nerve-chained``) that runs first, if any
    chained: str | None = None
    message: str = ""

    def as_dict(self) -> dict:
        return {"hook": self.name, "action": self.action, "chained": self.chained, "message": self.message}


@dataclass
class InstallReport:
    hooks_dir: Path
    hooks_path: str | None  #: core.hooksPath as configured
    python: str | None
    hooks: list[HookChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def conflicts(self) -> list[HookChange]:
        return [h for h in self.hooks if h.action == "conflict"]

    def as_dict(self) -> dict:
        return {
            "hooks_dir": os.fspath(self.hooks_dir),
            "core_hooks_path": self.hooks_path,
            "python": self.python,
            "hooks": [h.as_dict() for h in self.hooks],
            "notes": list(self.notes),
            "ok": not self.conflicts,
        }


def _notes(paths: RepoPaths, directory: Path, setting: str | None) -> list[str]:
    notes = []
    if setting is not None and not os.path.isabs(os.path.expanduser(setting)):
        notes.append(
            f"core.hooksPath is relative ({setting}): git resolves it from each worktree's top, "
            "so other worktrees have their own hooks directory; run `git nerve hooks install` in each"
        )
    top = paths.toplevel
    inside_git = any(d == directory or d in directory.parents for d in (paths.git_dir, paths.common_dir))
    if top is not None and (directory == top or top in directory.parents) and not inside_git:
        notes.append(f"the hooks directory {directory} is inside the work tree, so `git status` shows the hook files")
    return notes


def install(paths: RepoPaths) -> InstallReport:
    """Install (or refresh) the hooks, keeping and chaining any hook that is not ours.

    Idempotent. A name where a foreign hook sits *and* a kept hook exists
    (someone wrote over our shim) is left alone and reported as a conflict:
    either file may be the one the user wants, and neither is ours to drop.
    """
    directory = hooks_dir(paths)
    setting = hooks_path_setting(paths)
    report = InstallReport(directory, setting, sys.executable or None, notes=_notes(paths, directory, setting))
    shim = render()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _fs_error("create the hooks directory", directory, exc) from exc
    for name in HOOKS:
        report.hooks.append(_install_one(directory, name, shim))
    return report


def _install_one(directory: Path, name: str, shim: bytes) -> HookChange:
    path = directory / name
    kept = directory / f"{name}{CHAINED_SUFFIX}"
    chained = kept.name if os.path.lexists(kept) else None
    try:
        if not os.path.lexists(path):
            _write_executable(path, shim)
            return HookChange(name, "installed", chained)
        if is_ours(path):
            if not path.is_symlink() and _read(path) == shim and os.access(path, os.X_OK):
                return HookChange(name, "unchanged", chained)
            path.unlink()
            _write_executable(path, shim)
            return HookChange(name, "updated", chained)
        if chained is not None:
            if not _same_file_content(path, kept):
                return HookChange(
                    name, "conflict", chained,
                    f"{path} is not git-nerve's and {kept.name} (a hook kept earlier) still exists; "
                    f"merge them into {kept.name} or remove one, then run `git nerve hooks install` again",
                )
            path.unlink()  # the same hook again: the kept copy already holds it
        else:
            os.rename(path, kept)
        _write_executable(path, shim)
        return HookChange(name, "installed", kept.name, f"kept the existing hook as {kept.name}; it runs first")
    except OSError as exc:
        raise _fs_error("install the hook", path, exc) from exc


# -- uninstall --------------------------------------------------------------------------------


def uninstall(paths: RepoPaths) -> InstallReport:
    """Remove our shims and put each kept hook back exactly as it was."""
    directory = hooks_dir(paths)
    setting = hooks_path_setting(paths)
    report = InstallReport(directory, setting, None)
    for name in HOOKS:
        report.hooks.append(_uninstall_one(directory, name))
    return report


def _uninstall_one(directory: Path, name: str) -> HookChange:
    path = directory / name
    kept = directory / f"{name}{CHAINED_SUFFIX}"
    has_kept = os.path.lexists(kept)
    try:
        if os.path.lexists(path) and is_ours(path):
            if has_kept:
                os.replace(kept, path)
                return HookChange(name, "restored", None, f"put back the hook kept as {kept.name}")
            path.unlink()
            return HookChange(name, "removed")
        if os.path.lexists(path):
            message = f"{path} is not git-nerve's; left as it is"
            if has_kept:
                message += f" (and so is {kept.name})"
            return HookChange(name, "foreign", kept.name if has_kept else None, message)
        if has_kept:
            os.rename(kept, path)
            return HookChange(name, "restored", None, f"put back the hook kept as {kept.name}")
        return HookChange(name, "absent")
    except OSError as exc:
        raise _fs_error("uninstall the hook", path, exc) from exc


# -- status -----------------------------------------------------------------------------------


@dataclass
class HookStatus:
    name: str
    #: installed | outdated (works; `install` refreshes it) | broken (its interpreter
    #: or package is gone) | foreign (a hook that is not ours) | missing
    state: str
    chained: str | None = None
    python: str | None = None

    def as_dict(self) -> dict:
        return {"hook": self.name, "state": self.state, "chained": self.chained, "python": self.python}


@dataclass
class Status:
    hooks_dir: Path
    hooks_path: str | None
    hooks: list[HookStatus]

    @property
    def installed(self) -> bool:
        return all(h.state == "installed" for h in self.hooks)

    def as_dict(self) -> dict:
        return {
            "hooks_dir": os.fspath(self.hooks_dir),
            "core_hooks_path": self.hooks_path,
            "installed": self.installed,
            "hooks": [h.as_dict() for h in self.hooks],
        }


def _template_body(data: bytes) -> bytes:
    """The shim without the lines install fills in, to compare versions."""
    return b"\n".join(ln for ln in data.splitlines() if not ln.startswith((b"nerve_python=", b"nerve_root=")))


def status(paths: RepoPaths) -> Status:
    directory = hooks_dir(paths)
    current = None
    hooks = []
    for name in HOOKS:
        path = directory / name
        kept = directory / f"{name}{CHAINED_SUFFIX}"
        chained = kept.name if os.path.lexists(kept) else None
        if not os.path.lexists(path):
            hooks.append(HookStatus(name, "missing", chained))
            continue
        if not is_ours(path):
            hooks.append(HookStatus(name, "foreign", chained))
            continue
        python, root = recorded(path)
        if not _runnable(python, root):
            state = "broken"
        else:
            if current is None:
                current = _template_body(render())
            same = _template_body(_read(path) or b"") == current
            state = "installed" if same and os.access(path, os.X_OK) else "outdated"
        hooks.append(HookStatus(name, state, chained, python))
    return Status(directory, hooks_path_setting(paths), hooks)


def installed(paths: RepoPaths) -> bool:
    """True when every hook is our current shim and can start its interpreter."""
    try:
        return status(paths).installed
    except (NerveError, OSError):
        return False


__all__ = [
    "CHAINED_SUFFIX",
    "HOOKS",
    "HookChange",
    "HookStatus",
    "InstallReport",
    "Status",
    "hooks_dir",
    "install",
    "installed",
    "is_ours",
    "render",
    "status",
    "uninstall",
]
