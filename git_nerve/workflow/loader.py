"""Finding and loading workflows.

``NAME`` is looked up as ``.nerve/workflows/NAME.py`` in the checkout (the
repository's own workflows win over built-ins of the same name), then as a
built-in (:mod:`git_nerve.workflow.builtin`). ``pkg.module:attr`` loads an
installed module's attribute. A module provides its workflow as the attribute
``workflow`` (a :class:`~.spec.Workflow`, or a function returning one).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .spec import Workflow

WORKFLOW_DIR = Path(".nerve") / "workflows"
BUILTIN_PACKAGE = "git_nerve.workflow.builtin"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*\Z")


def builtin_names() -> list[str]:
    folder = Path(__file__).parent / "builtin"
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def repo_names(toplevel: str | os.PathLike[str] | None) -> list[str]:
    if toplevel is None:
        return []
    folder = Path(toplevel) / WORKFLOW_DIR
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_") and _NAME.match(p.stem))


def available(toplevel: str | os.PathLike[str] | None) -> list[str]:
    """Every workflow name `git nerve run` accepts here, the repository's first."""
    own = repo_names(toplevel)
    return own + [n for n in builtin_names() if n not in own]


def _why(exc: BaseException, path: Path | None = None) -> str:
    """One line: the exception, and the line of the workflow file it came from."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if path is not None and f.filename == str(path)]
    where = f" (line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _from_module(module: Any, what: str) -> Workflow:
    obj = getattr(module, "workflow", None)
    if obj is None:
        raise UsageError(f"{what} defines no `workflow` (a Workflow, or a function returning one)")
    return _resolve(obj, what)


def _resolve(obj: Any, what: str) -> Workflow:
    if callable(obj) and not isinstance(obj, Workflow):
        try:
            obj = obj()
        except Exception as exc:
            raise UsageError(f"cannot build the workflow in {what}: {_why(exc)}") from None
    if not isinstance(obj, Workflow):
        raise UsageError(f"{what} gives a {type(obj).__name__}, not a git_nerve.workflow.Workflow")
    return obj


def load_file(path: Path, name: str, *, common_dir: str | os.PathLike[str] | None = None) -> Workflow:
    """Import the workflow file at ``path``. With ``common_dir`` (a repository's own file, issue 35): only when this
    user trusted its exact content (:func:`git_nerve.trust.require_workflow`), and the bytes checked are the bytes
    run."""
    module_name = f"nerve_workflow_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot load workflow {path}: {exc.strerror or exc}") from None
    if common_dir is not None:
        from .. import trust

        trust.require_workflow(common_dir, name, data)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load workflow {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pydantic look their module up while the file runs
    try:
        exec(compile(data, str(path), "exec"), module.__dict__)  # noqa: S102  (the trusted bytes, not a re-read)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise UsageError(f"cannot load workflow {path}: {_why(exc, path)}") from None
    wf = _from_module(module, str(path))
    return wf if wf.source else _with_source(wf, str(path))


def _with_source(wf: Workflow, source: str) -> Workflow:
    return replace(wf, source=source)


def load(name: str, toplevel: str | os.PathLike[str] | None, *, common_dir: str | os.PathLike[str] | None = None) -> Workflow:
    """The workflow called ``name`` (or ``pkg.module:attr``) as seen from ``toplevel``; a repository's own file only
    once trusted (``common_dir``: the repository's, found from ``toplevel`` when not given)."""
    if ":" in name:
        if not _REF.match(name):
            raise UsageError(f"invalid workflow reference {name!r}; use NAME or package.module:attribute")
        module_name, attr = name.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UsageError(f"cannot import {module_name}: {exc}") from None
        except Exception as exc:
            raise UsageError(f"cannot load {module_name}: {_why(exc)}") from None
        if not hasattr(module, attr):
            raise UsageError(f"{module_name} has no attribute {attr!r}")
        return _with_source(_resolve(getattr(module, attr), name), name)
    if not _NAME.match(name):
        raise UsageError(f"invalid workflow name {name!r}: use letters, digits, '-' and '_'")
    if toplevel is not None:
        path = Path(toplevel) / WORKFLOW_DIR / f"{name}.py"
        if path.is_file():
            if common_dir is None:
                from ..paths import discover

                common_dir = discover(toplevel).common_dir
            return load_file(path, name, common_dir=common_dir)
    if name in builtin_names():
        module = importlib.import_module(f"{BUILTIN_PACKAGE}.{name}")
        return _with_source(_from_module(module, f"built-in workflow {name}"), f"built-in:{name}")
    where = f"no {WORKFLOW_DIR / (name + '.py')} in {toplevel}" if toplevel is not None else "not in a checkout"
    raise UsageError(
        f"unknown workflow {name!r} ({where} and no built-in of that name); available: {', '.join(available(toplevel)) or 'none'}"
    )


__all__ = ["WORKFLOW_DIR", "available", "builtin_names", "load", "load_file", "repo_names"]
