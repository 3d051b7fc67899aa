"""Which trusted settings a task's change edits: `git worker show`, the console's review and merge say so at the
top, in words, before anyone approves or merges it (issue 35). Read from git objects only (no checkout)."""

from __future__ import annotations

from .. import nerve_toml
from ..errors import NerveError
from ..git import history, objectdb
from . import AGENT_NESTED, AGENT_PROJECT, WORKFLOW_DIR, WORKTREEINCLUDE


def line(key: str, does: str) -> str:
    return f"this change edits {key}: it will {does} after merge, once you trust it (git nerve trust)"


def _toml(cwd, rev: str) -> dict | None:
    raw = objectdb.cat_blob(cwd, f"{rev}:{nerve_toml.FILE}")
    if not raw:
        return None
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def between(cwd, base: str | None, head: str, names: list[str] | None = None) -> list[str]:
    """One line per setting ``head`` sets to a new non-empty content against ``base`` (every one when ``base`` is
    None: a root commit). ``names``: the paths that differ, when the caller knows them."""
    if names is None and base:
        try:
            names = objectdb.diff_name_only(cwd, base, head)
        except NerveError:
            return []
    if names is not None and not any(_relevant(n) for n in names):
        return []  # the common case: nothing parsed, nothing more imported (`show --json`)
    from .settings import from_toml, workflow_setting, worktreeinclude

    touched = (lambda p: True) if names is None else set(names).__contains__
    out: list[str] = []
    if touched(nerve_toml.FILE):
        old = from_toml(_toml(cwd, base)) if base else {}
        for key, s in from_toml(_toml(cwd, head)).items():
            if key not in old or old[key].value != s.value:
                out.append(line(key, s.does))
    if touched(WORKTREEINCLUDE):
        new = worktreeinclude(objectdb.cat_blob(cwd, f"{head}:{WORKTREEINCLUDE}").decode("utf-8", "replace") or None)
        for s in new.values():
            out.append(line(s.key, s.does))
    for key in AGENT_PROJECT:
        if any(key in _agent_clis(n) and objectdb.cat_blob(cwd, f"{head}:{n}") for n in names or []):
            from .settings import DOES

            out.append(line(key, DOES[key]))
    for name in sorted(names or []):
        if name.startswith(WORKFLOW_DIR + "/") and name.endswith(".py") and name.count("/") == 2:
            data = objectdb.cat_blob(cwd, f"{head}:{name}")
            if data:
                out.append(line(name, workflow_setting(name, data).does))
    return out


def _relevant(name: str) -> bool:
    return name in (nerve_toml.FILE, WORKTREEINCLUDE) or name.startswith(WORKFLOW_DIR + "/") or bool(_agent_clis(name))


def _agent_clis(name: str) -> list[str]:
    """The agent CLIs whose project settings hold the committed file ``name`` (their keys: :func:`.settings.agent_project`;
    named like what the CLI writes there itself included: a commit put it there; `.mcp.json` is Claude Code's and
    Copilot CLI's; a folder may be a path, `.github/hooks`)."""
    return [key for key, (files, folders, _own) in AGENT_PROJECT.items()
            if name in files or any(name.startswith(folder + "/") for folder in folders)
            or any(f"/{folder}/" in f"/{name}" for folder in AGENT_NESTED.get(key, ()))]


def of_branch(cwd, integration_refs: list[str], tip_ref: str) -> list[str]:
    """The lines for a task's branch ``tip_ref`` against where it left the integration branch (the first of
    ``integration_refs`` git knows): one git process when the change touches none of these files."""
    for ref in integration_refs:
        names = objectdb.diff_names_since_fork(cwd, ref, tip_ref)
        if names is not None:
            break
    else:
        return []
    if not any(_relevant(n) for n in names):
        return []
    try:
        return between(cwd, history.merge_base(cwd, ref, tip_ref), tip_ref, names)
    except NerveError:
        return []
