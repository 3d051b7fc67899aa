"""``nerve.toml`` at the top of a checkout, read once the same way for every feature.

One configuration wherever you stand: in a linked worktree (a task's) the
file read is the *main checkout's*, committed or not, so a run started in a
task's worktree uses the settings the person made where they work. A
worktree's own copy (the version its branch carries) is used only when the
main checkout has none; when both exist and differ, :func:`read` says which
one it used on stderr, so no setting is ignored silently.

Its tables belong to the features that use them: ``[extract]`` and
``[adapters.*]`` to :mod:`git_nerve.workflow.config`, ``[knowledge.embeddings]``
to :mod:`git_nerve.knowledge.config`. Each validates its own part.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import UsageError

TYPE_CHECKING = False  # typing costs a command more than its work (issue 27): its names for readers only
if TYPE_CHECKING:
    from typing import Any

FILE = "nerve.toml"


def path_in(toplevel: str | os.PathLike[str]) -> Path:
    return Path(toplevel) / FILE


def home(toplevel: str | os.PathLike[str]) -> Path:
    """The checkout whose nerve.toml holds for the checkout at ``toplevel``: the repository's main checkout
    (:func:`git_nerve.dotgit.main_checkout`, from git's files: no git process), else ``toplevel`` itself (a bare
    repository's linked worktree, a separate git dir's asked from a linked worktree)."""
    from .dotgit import common_dir_of, main_checkout

    common = common_dir_of(toplevel)
    main = main_checkout(common, toplevel) if common is not None else None
    return main if main is not None else Path(toplevel)


def locate(toplevel: str | os.PathLike[str]) -> Path:
    """The nerve.toml that holds for the checkout at ``toplevel`` (see the module's docstring)."""
    own = path_in(toplevel)
    main = home(toplevel)
    if main.resolve() == Path(toplevel).resolve():
        return own
    shared = path_in(main)
    if not shared.exists():
        return own
    try:
        if own.exists() and own.read_bytes() != shared.read_bytes():
            print(f"git-nerve: using {shared} (the main checkout's); this worktree's {FILE} differs and is not read",
                  file=sys.stderr)
    except OSError:
        pass
    return shared


def read(toplevel: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The parsed file that holds for ``toplevel`` (:func:`locate`), or None when there is none;
    one clear error when it cannot be read."""
    path = locate(toplevel)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    # imported only when there is a file: a reader (`status`) of a repository without one never loads it
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
