"""Every committed setting that runs a command or widens what agents are handed, read from a checkout (issue 35).

Each is a :class:`Setting`: its key (how every message names it), what it does, its value in a canonical form
(what the features use: the setup's argv, the include patterns, the workflow file's bytes) and the digest the
trust record keeps. An absent or empty setting is no :class:`Setting` (nothing runs, nothing to trust).

nerve.toml is the one the features read (:func:`..nerve_toml.read`: the main checkout's, wherever you stand);
``.worktreeinclude`` the main checkout's (the copy's source); ``.nerve/workflows/*.py`` the checkout's own
(`git nerve run` imports them from where it runs); an agent CLI's own project settings (:func:`agent_project`:
:func:`opencode`, :func:`claude`, :func:`gemini`, :func:`qwen`, :func:`codex`) the checkout's own too: the adapter
asks about the worktree the CLI runs in, `git nerve trust` shows the main checkout's. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import nerve_toml

from . import (ADAPTER, AGENT_NESTED, AGENT_PROJECT, CLAUDE, CLONE, CODEX, COPILOT, DEFAULT_CHECK, EMBEDDINGS, EXTRA, EXTRACT, GEMINI,  # noqa: F401
               INCLUDE, NOTIFY_COMMAND, NOTIFY_URL, OPENCODE, QWEN, SETUP, TEST, WORKFLOW_DIR, WORKTREEINCLUDE)

#: what each setting does on the person's machine, in words (the flag of a change says "it will <this>")
DOES = {
    SETUP: "run on your machine in each new task's worktree (git worker spawn, retry)",
    INCLUDE: "widen the ignored files copied into each new task's worktree (git worker spawn, retry)",
    CLONE: "widen the directories copied into each new task's worktree (git worker spawn, retry)",
    WORKTREEINCLUDE: "widen the ignored files copied into each new task's worktree (git worker spawn, retry)",
    TEST: "run on your machine as merge's default check (merge --check, the console's merge), and agents may run it",
    ADAPTER: "choose the agent CLI every role of `git nerve run` starts",
    EXTRA: "add arguments to the agent CLIs `git nerve run` starts",
    EXTRACT: "send agent output and an environment variable's value to its endpoint (git nerve run)",
    EMBEDDINGS: "send repository files and an environment variable's value to its endpoint (knowledge sync)",
    NOTIFY_COMMAND: "run on your machine when a task needs you (a notification), the task's summary on its stdin",
    NOTIFY_URL: "receive a POST of each notification (a task's id, state, description line and summary)",
    OPENCODE: "be loaded by opencode in each run of the opencode adapter (git nerve run): its plugins and tools run "
              "as code on your machine, its MCP servers, commands and agents are the agent's",
    CLAUDE: "be loaded by Claude Code in each run of the claude adapter (git nerve run): its hooks, MCP servers and "
            "apiKeyHelper run as commands on your machine, its permission rules and env widen what the agent may do",
    GEMINI: "be loaded by Gemini CLI in each run of the gemini adapter (git nerve run): its hooks, MCP servers and tool "
            "commands run on your machine, its policies widen what the agent may run, .env sets the environment of "
            "every command it runs",
    QWEN: "be loaded by Qwen Code in each run of the qwen adapter (git nerve run): its hooks, MCP servers and tool "
          "commands run on your machine, its commands, agents and workflows are the agent's, .env sets the "
          "environment of every command it runs",
    CODEX: "be loaded by Codex in each run of the codex adapter (git nerve run) once you trusted the repository in "
           "Codex: its MCP servers run as commands outside Codex's sandbox, its hooks, exec rules and skills apply",
    COPILOT: "be loaded by GitHub Copilot CLI in each run of the copilot adapter (git nerve run) once you trusted the "
             "folder in Copilot: its hooks and MCP servers (its custom agents' too) run as commands on your machine, "
             "its skills' allowed-tools widen what the agent may run",
}
WORKFLOW_DOES = "run as Python on your machine (git nerve run imports it)"


@dataclass(frozen=True)
class Setting:
    key: str
    does: str
    value: object  #: canonical, JSON-able: what the feature uses
    shown: tuple[str, ...] = field(default=(), compare=False)  #: exactly what runs / is copied, for people

    @property
    def digest(self) -> str:
        return digest(self.key, self.value)


def digest(key: str, value: object) -> str:
    return hashlib.sha256(json.dumps([key, value], sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def workflow_key(name: str) -> str:
    return f"{WORKFLOW_DIR}/{name}.py"


def workflow_setting(key: str, data: bytes, path: Path | None = None) -> Setting:
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    sha = hashlib.sha256(data).hexdigest()
    return Setting(key, WORKFLOW_DOES, sha, (f"{path or key}: {lines} lines of Python, sha256 {sha[:16]}… (read it first)",))


def from_toml(data: dict | None) -> dict[str, Setting]:
    """The nerve.toml settings of a parsed file (pure: also used on the two sides of a task's diff)."""
    data = data if isinstance(data, dict) else {}
    out: dict[str, Setting] = {}

    def table(name: str) -> dict:
        t = data.get(name)
        return t if isinstance(t, dict) else {}

    def put(key: str, value, shown) -> None:
        if value not in (None, "", [], {}):
            out[key] = Setting(key, DOES[key], value, tuple(shown))

    wt, run = table("worktree"), table("run")
    setup = wt.get("setup")
    if isinstance(setup, str) and setup.strip():
        put(SETUP, setup_argv(setup), [setup])
    elif setup not in (None, ""):
        put(SETUP, repr(setup), [repr(setup)])
    for key, name in ((INCLUDE, "include"), (CLONE, "clone_dirs")):
        value = wt.get(name)
        if value not in (None, []):
            put(key, value if isinstance(value, list) else repr(value), [str(v) for v in value] if isinstance(value, list) else [repr(value)])
    for key, name in ((TEST, "test_command"), (ADAPTER, "adapter")):
        value = run.get(name)
        if value is not None and (not isinstance(value, str) or value.strip()):
            put(key, value, [str(value)])
    extra = {n: a.get("extra_args") for n, a in table("adapters").items() if isinstance(a, dict) and a.get("extra_args")}
    put(EXTRA, extra, [f"{n}: {' '.join(map(str, a)) if isinstance(a, list) else a!r}" for n, a in sorted(extra.items())])
    extract = table("extract")
    if extract.get("provider") == "llm":
        value = {k: extract.get(k) for k in ("base_url", "api_key_env", "model")}
        put(EXTRACT, value, [f"{k} = {v}" for k, v in value.items() if v is not None])
    knowledge = data.get("knowledge")
    emb = knowledge.get("embeddings") if isinstance(knowledge, dict) else None
    if isinstance(emb, dict) and emb.get("provider", "openai") != "local":
        value = {k: emb.get(k) for k in ("base_url", "api_key_env", "model")}
        put(EMBEDDINGS, value, [f"{k} = {v}" for k, v in value.items() if v is not None])
    notify = table("notify")
    command = notify.get("command")
    if command not in (None, "", []):
        put(NOTIFY_COMMAND, command if isinstance(command, list) else repr(command),
            [" ".join(map(str, command)) if isinstance(command, list) else repr(command)])
    url = notify.get("url")
    if url not in (None, ""):
        put(NOTIFY_URL, url if isinstance(url, str) else repr(url), [str(url)])
    return out


def setup_argv(text: str) -> list[str] | str:
    """The setup command as the worktree's setup runs it (shlex-split; the text itself when it cannot be split)."""
    import shlex  # here: it compiles a pattern at import, and `show --json` reads no setup

    try:
        return shlex.split(text)
    except ValueError:
        return text


def worktreeinclude(text: str | None) -> dict[str, Setting]:
    if text is None or not any(ln.strip() and not ln.strip().startswith("#") for ln in text.splitlines()):
        return {}
    shown = tuple(ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#"))
    return {WORKTREEINCLUDE: Setting(WORKTREEINCLUDE, DOES[WORKTREEINCLUDE], text, shown)}


def read_text(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


#: the dependency opencode adds to a `.opencode/package.json` itself (not counted while its value is a registry
#: version: opencode 1.18.33 writes its own version, "1.18.33"; older ones "latest" or "*")
OPENCODE_PLUGIN_PACKAGE = "@opencode-ai/plugin"
_XR = r"(?:[xX*]|0|[1-9][0-9]*)"
_IDS = r"[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*"
_PARTIAL = rf"v?{_XR}(?:\.{_XR}(?:\.{_XR}(?:-{_IDS})?(?:\+{_IDS})?)?)?"
_SIMPLE = rf"(?:[<>]=?|=|~>?|\^)? *{_PARTIAL}"
_RANGE = rf"(?:{_PARTIAL} +- +{_PARTIAL}|{_SIMPLE}(?: +{_SIMPLE})*)"
#: a plain npm version or range (node-semver's grammar: no "/", ":" or path, so never a file, link, git, GitHub,
#: URL or ``npm:`` alias), or the dist-tag ``latest``: what the registry serves for that very package
NPM_RANGE = rf" *(?:latest|{_RANGE}(?: *\|\| *{_RANGE})*) *"


def registry_version(value: object) -> bool:
    """True when ``value`` (a package.json dependency's) installs that package from the registry."""
    return isinstance(value, str) and re.fullmatch(NPM_RANGE, value) is not None


def opencode(toplevel: str | os.PathLike[str]) -> dict[str, Setting]:
    """opencode's project settings at ``toplevel``: ``opencode.json(c)`` and every file under ``.opencode/``."""
    return agent_project(OPENCODE, toplevel)


def claude(toplevel: str | os.PathLike[str]) -> dict[str, Setting]:
    """Claude Code's project settings at ``toplevel``: ``.mcp.json`` and every file under ``.claude/``."""
    return agent_project(CLAUDE, toplevel)


def gemini(toplevel: str | os.PathLike[str]) -> dict[str, Setting]:
    """Gemini CLI's project settings at ``toplevel``: every file under ``.gemini/``."""
    return agent_project(GEMINI, toplevel)


def qwen(toplevel: str | os.PathLike[str]) -> dict[str, Setting]:
    """Qwen Code's project settings at ``toplevel``: every file under ``.qwen/``."""
    return agent_project(QWEN, toplevel)


def codex(toplevel: str | os.PathLike[str]) -> dict[str, Setting]:
    """Codex CLI's project settings at ``toplevel``: every file under ``.codex/``."""
    return agent_project(CODEX, toplevel)


def copilot(toplevel: str | os.PathLike[str]) -> dict[str, Setting]:
    """GitHub Copilot CLI's project settings at ``toplevel``: every file under ``.github/hooks/``, its custom agents
    and project skills (``.github/agents/``, ``.github/skills/``, ``.agents/skills/``, ``.claude/skills/``), its
    repository settings files under ``.github/copilot/`` and the workspace MCP files (``.mcp.json``,
    ``.github/mcp.json``)."""
    return agent_project(COPILOT, toplevel)


def agent_project(key: str, toplevel: str | os.PathLike[str], *,
                  main: str | os.PathLike[str] | None | bool = None) -> dict[str, Setting]:
    """An agent CLI's project settings (``key``, :data:`.AGENT_PROJECT`) at ``toplevel``: its files there and every
    file under its folders (symlinks followed, as the CLIs do), their paths and bytes (sha256) sorted; none: no
    Setting. Left out:

    * what the CLI writes into a folder itself when it runs (the folder's own entries, :data:`.AGENT_PROJECT`),
      only while git does not track it in this checkout (committed or staged, or under a committed link: a commit
      put it there, and the CLI loads it), read from the index, never from a .gitignore (a commit can write one);
      where git cannot tell, it counts;
    * the person's own files: those the main checkout (``main``; None: ``toplevel`` is it; False: none known, none
      left out) leaves untracked and git ignores there (a ``.claude/settings.local.json``), with the very bytes
      they have there (a copy ``.worktreeinclude`` made); a task cannot write into the main checkout, and a
      worktree gets no such file but by that copy, so a task's worktree holds exactly the committed files the
      person trusted."""
    names, dirnames_, own = AGENT_PROJECT[key]
    root = Path(toplevel)
    present = [n for n in names if (root / n).is_file()]
    folders = [d for d in dirnames_ if (root / d).is_dir()]
    nested = _nested(root, AGENT_NESTED.get(key, ()))
    if not present and not folders and not nested:
        return {}
    home = Path(main) if main is not None else root
    # the person's nested files are looked for only where the worktree has nested folders (one git walk fewer)
    personal = {} if main is False else _personal(home, names, dirnames_, AGENT_NESTED.get(key, ()) if nested else ())
    files: dict[str, str] = {}
    for name in present:
        sha = _sha_of(root / name)
        if personal.get(name) != sha:
            files[name] = sha
    for dirname in folders:
        _walk(key, root, dirname, _counts(root, dirname, own), own, personal, files)
    for dirname in nested:  # the CLI writes nothing of its own there: every file counts
        _walk(key, root, dirname, lambda rel, folder=False: True, frozenset(), personal, files)
    if not files:
        return {}
    files = dict(sorted(files.items()))
    return {key: Setting(key, DOES[key], files,
                         tuple(f"{rel}: sha256 {sha[:16]}… (read it first)" for rel, sha in files.items()))}


def _walk(key: str, root: Path, dirname: str, counts, own, personal: dict[str, str], files: dict[str, str]) -> None:
    """Put every file under ``root/dirname`` that counts (:func:`_counts`) into ``files`` (:func:`agent_project`)."""
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root / dirname, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in seen:  # a symlink loop
            dirnames[:] = []
            continue
        seen.add(real)
        here = Path(dirpath).relative_to(root).as_posix()
        # the CLI's own entries last: a directory reached by a name that counts whole is walked by that name
        dirnames[:] = sorted((d for d in dirnames if counts(f"{here}/{d}", folder=True)),
                             key=lambda d: (here == dirname and d in own, d))
        for name in sorted(filenames):
            rel = f"{here}/{name}"
            if counts(rel):
                sha = _sha_of(Path(dirpath) / name, canon=CANON.get((key, rel)))
                if sha and personal.get(rel) != sha:
                    _put(files, rel, sha)


def _nested(root: Path, folders) -> list[str]:
    """The nested copies of ``folders`` below ``root``'s top (:data:`.AGENT_NESTED`); all of them, sorted."""
    from ..git.tracked import nested_folders

    found: set[str] = set()
    for folder in folders:
        found |= set(nested_folders(root, folder) or ())  # not a checkout: the CLI finds none either
    return sorted(found)


def _personal(main: Path, names, dirnames, nested=()) -> dict[str, str]:
    """The person's own files among an agent CLI's project settings: path -> sha256 of those the main checkout
    ``main`` leaves untracked and git ignores ({} when none, or git cannot tell: then nothing is left out)."""
    from ..git.tracked import ignored_under

    own = {rel: _sha_of(main / rel) for rel in ignored_under(main, [*names, *dirnames]) or ()}
    if nested:
        own |= {rel: _sha_of(main / rel) for rel in ignored_under(main, [f"**/{f}/**" for f in nested], glob=True) or ()}
    return own


def _put(files: dict[str, str], rel: str, sha: str) -> None:
    """``files[rel] = sha``, a name that is not UTF-8 shown with ``\\x`` escapes (it is printed and hashed as
    text); two names shown alike both count."""
    rel = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    files[rel] = f"{files[rel]} {sha}" if rel in files else sha


def _counts(root: Path, dirname: str, own):
    """Whether a path under ``dirname`` (relative to ``root``, '/'-separated) counts (:func:`agent_project`):
    outside the CLI's own entries ``own`` always; inside them when it, or a directory above it (a committed
    symlink, the folder itself included, or a submodule), is tracked; a directory is entered when it holds
    tracked files. One ``git ls-files``."""
    from ..git.tracked import tracked_under

    tracked = tracked_under(root, dirname) if own else []
    if tracked is None:  # git cannot tell: every file counts
        return lambda rel, folder=False: True
    marked = set(tracked)
    holding = {p.rsplit("/", k)[0] for p in tracked for k in range(1, p.count("/") + 1)}

    depth = dirname.count("/") + 1  # the folder may be a path (`.github/hooks`): its entries are the next part

    def counts(rel: str, folder: bool = False) -> bool:
        parts = rel.split("/")
        if len(parts) <= depth or parts[depth] not in own:
            return True
        if folder and rel in holding:
            return True
        return any("/".join(parts[:i]) in marked for i in range(1, len(parts) + 1))

    return counts


def _sha_of(path: Path, *, canon=None) -> str:
    """The file's sha256 ("unreadable" when it cannot be read); with ``canon`` (a JSON file the CLI rewrites itself:
    :data:`CANON`), that of what is left of its object once ``canon`` took out what the CLI writes ("" when nothing
    is)."""
    try:
        data = path.read_bytes()
    except OSError:
        return "unreadable"
    if canon is not None:
        try:
            obj = json.loads(data)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            obj = canon(obj)
            if not obj:
                return ""
            data = json.dumps(obj, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def _without_opencode_plugin(obj: dict) -> dict:
    """``.opencode/package.json`` without the dependency opencode adds itself, while that names a registry
    version (any other value counts: a path, URL, git or ``npm:`` alias installs other code)."""
    deps = obj.get("dependencies")
    if isinstance(deps, dict) and registry_version(deps.get(OPENCODE_PLUGIN_PACKAGE)):
        deps = {k: v for k, v in deps.items() if k != OPENCODE_PLUGIN_PACKAGE}
        obj = {**obj, "dependencies": deps} if deps else {k: v for k, v in obj.items() if k != "dependencies"}
    return obj


def _without_qwen_version(obj: dict) -> dict:
    """``.qwen/settings.json`` without the ``$version`` Qwen Code 0.24 writes into it on its first load (the settings
    format it migrated them to; the first trusted run would untrust the next)."""
    return {k: v for k, v in obj.items() if k != "$version"}


#: the files an agent CLI rewrites itself, by (key, path): what of them counts
CANON = {(OPENCODE, f"{AGENT_PROJECT[OPENCODE][1][0]}/package.json"): _without_opencode_plugin,
         (QWEN, f"{AGENT_PROJECT[QWEN][1][0]}/settings.json"): _without_qwen_version}


#: the project settings of each agent CLI an adapter gates (:func:`..untrusted_in`), by key
AGENT_CLI = {OPENCODE: opencode, CLAUDE: claude, GEMINI: gemini, QWEN: qwen, CODEX: codex, COPILOT: copilot}


def current(toplevel: str | os.PathLike[str], *, workflows: bool = True, agents: bool = True) -> dict[str, Setting]:
    """Every such setting as the features at ``toplevel`` would use it now (UsageError: nerve.toml unreadable);
    ``workflows``, ``agents``: with the workflow files, the agent CLIs' project settings."""
    out = from_toml(nerve_toml.read(toplevel))
    main = nerve_toml.home(toplevel)
    out.update(worktreeinclude(read_text(main / WORKTREEINCLUDE)))
    for read in AGENT_CLI.values() if agents else ():
        out.update(read(toplevel))
    if workflows:
        folder = Path(toplevel) / WORKFLOW_DIR
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
            try:
                out[workflow_key(path.stem)] = workflow_setting(workflow_key(path.stem), path.read_bytes(), path)
            except OSError:
                continue
    return out
