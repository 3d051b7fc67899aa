"""git-nerve's hook shim and the files it is written to.

The constants (which hooks, the ``.nerve-chained`` suffix, the marker, the template
``shims/git-nerve-hook``), :func:`render` (the shim with interpreter, package root, hook name and forward
dir written in), reading a hook (``is_ours``, ``recorded``), writing one (``_write_executable``, through an
flocked temporary) and removing the temporaries of an install killed mid-write.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

from ..errors import NerveError
from ..filedoor import HOOK_MARKER
from ..fs import locked_tmp_name, replace_file
from ..git.destroy import remove_dead_temporaries  # noqa: F401  (re-exported)


#: The hooks git-nerve installs.
HOOKS = ("post-commit", "post-merge", "post-rewrite", "pre-push", "pre-commit")
#: Every hook a manager (husky's list) may own: a worker's own hooks directory
#: forwards each of them to the manager's hook.
FORWARDED = (
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
    "pre-push", "post-rewrite", "pre-auto-gc",
)
#: A hook that was there before ours is kept under ``<hook>`` + this suffix
#: (later ones under ``-2``, ``-3``...); all run first, oldest first.
CHAINED_SUFFIX = ".nerve-chained"
#: Text that marks a hook file as one of our shims: the installer's record, in each file it writes (the door for
#: single files checks it before it removes a hook).
MARKER = HOOK_MARKER
TEMPLATE = Path(__file__).resolve().parent / "shims" / "git-nerve-hook"
#: Where a worker's worktree keeps its own hooks when core.hooksPath is relative (husky).
WORKTREE_HOOKS = ("nerve", "hooks")
_PYTHON_LINE = re.compile(r"^nerve_python=(.*)$", re.MULTILINE)
_ROOT_LINE = re.compile(r"^nerve_root=(.*)$", re.MULTILINE)
_HOOK_LINE = re.compile(r"^nerve_hook=(.*)$", re.MULTILINE)
_FORWARD_LINE = re.compile(r"^nerve_forward=(.*)$", re.MULTILINE)


def package_root() -> Path:
    """The directory holding the ``git_nerve`` package this process runs."""
    return Path(__file__).resolve().parent.parent.parent


def render(python: str | None = None, root: Path | None = None, hook: str = "", forward: str = "") -> bytes:
    """The shim with ``python`` (default: this interpreter), ``root``, its hook name and forward dir written in."""
    python = sys.executable if python is None else python
    root = package_root() if root is None else root
    try:
        text = TEMPLATE.read_text(encoding="utf-8")
    except OSError as exc:
        raise NerveError(f"the hook shim {TEMPLATE} is missing from this installation ({exc.strerror or exc})") from exc
    text, n_python = _PYTHON_LINE.subn(lambda _: f"nerve_python={shlex.quote(python or '')}", text, count=1)
    text, n_root = _ROOT_LINE.subn(lambda _: f"nerve_root={shlex.quote(os.fspath(root))}", text, count=1)
    text, n_hook = _HOOK_LINE.subn(lambda _: f"nerve_hook={shlex.quote(hook)}", text, count=1)
    text, n_forward = _FORWARD_LINE.subn(lambda _: f"nerve_forward={shlex.quote(forward)}", text, count=1)
    if not (n_python and n_root and n_hook and n_forward) or MARKER not in text.encode():
        raise NerveError(f"the hook shim {TEMPLATE} is not git-nerve's (reinstall git-nerve)")
    return text.encode("utf-8")


def _read(path: Path, limit: int | None = None) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read() if limit is None else fh.read(limit)
    except OSError:
        return None


def is_ours(path: Path) -> bool:
    """True when ``path`` is one of our shims (whatever version): a regular file holding the marker. A symbolic
    link is never ours (the installer writes files only): whatever it points at, the link is a person's."""
    if os.path.islink(path):
        return False
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
    """Write ``path`` (mode 755) through a temporary beside it, holding an flock on the temporary while it exists
    (the kernel drops it when we die: :func:`remove_dead_temporaries` removes only temporaries whose lock it can take)."""
    replace_file(path, data, tmp_name=locked_tmp_name(path), create_mode=0o755, mode=0o755, lock=True)


def _fs_error(action: str, path: Path, exc: OSError) -> NerveError:
    return NerveError(f"cannot {action} {path}: {exc.strerror or exc}")
