"""Trust: a committed setting that runs a command (or widens what agents are handed) runs only once this user
trusted its exact content on this machine (issue 35; as `direnv allow` and `mise trust` do).

* :mod:`.settings`: every such setting, read as the features read it (the inventory);
* :mod:`.record`: what this user trusted, outside the repository;
* :mod:`.changes`: which of them a task's diff changes (`git worker show`, the console's review, merge).

The features ask :func:`verdict` before a step and skip it (one line: :func:`skipped`) when the content in use
is not the one trusted; `git nerve trust` (:func:`report`, :func:`trust`) shows and records; `git nerve init`
trusts what it writes. Floor 4 (beside nerve.toml): standard library only.
"""

from __future__ import annotations

import os

from ..errors import CheckFailed, UsageError

TYPE_CHECKING = False  # `show --json` imports this package: nothing but names at import (issue 27)
if TYPE_CHECKING:
    from pathlib import Path

    from .settings import Setting

SETUP = "nerve.toml [worktree] setup"
INCLUDE = "nerve.toml [worktree] include"
CLONE = "nerve.toml [worktree] clone_dirs"
WORKTREEINCLUDE = ".worktreeinclude"
TEST = "nerve.toml [run] test_command"
ADAPTER = "nerve.toml [run] adapter"
EXTRA = "nerve.toml [adapters.*] extra_args"
EXTRACT = "nerve.toml [extract] llm endpoint"
EMBEDDINGS = "nerve.toml [knowledge.embeddings] endpoint"
NOTIFY_COMMAND = "nerve.toml [notify] command"
NOTIFY_URL = "nerve.toml [notify] url"
WORKFLOW_DIR = ".nerve/workflows"
#: opencode's own project settings in the worktree it runs in (opencode.json(c), .opencode/: plugins, tools, MCP
#: servers, commands, agents): what the opencode adapter lets opencode load, once trusted
OPENCODE = "opencode project settings"
#: where opencode 1.18 finds them: its project config files and `.opencode/`, from the directory it runs in up to
#: its git worktree's top (the same place: the adapter runs it there); what it writes into a `.opencode/` it loads
#: itself (its plugin package's install, a .gitignore naming them) is no setting (the first trusted run would
#: untrust the next) unless git tracks it there: then a commit put it there (:func:`.settings.opencode`)
OPENCODE_FILES = ("opencode.json", "opencode.jsonc")
OPENCODE_DIR = ".opencode"
OPENCODE_OWN = frozenset({"node_modules", ".gitignore", "package-lock.json", "bun.lock"})
#: Claude Code's project settings in the worktree it runs in: `.claude/` (settings.json and settings.local.json:
#: hooks that run as commands, permission rules, env, apiKeyHelper, statusLine, which of .mcp.json's servers
#: start; skills, agents and commands whose frontmatter carries hooks, MCP servers, allowed-tools or a permission
#: mode; the scripts those hooks name) and `.mcp.json` (MCP servers: commands). What Claude Code writes there
#: itself (its `--worktree` checkouts, a subagent's memory) is no setting
CLAUDE = "claude project settings"
#: Gemini CLI 0.61's project settings (`--skip-trust` makes the worktree a trusted folder): `.gemini/` (settings.json:
#: hooks, mcpServers, tools.discoveryCommand / callCommand; policies/ that widen what the agent may run; commands,
#: skills, agents; .env) and the worktree's top-level `.env`, whose variables it puts into its own environment and
#: every command's it runs (a GIT_CONFIG_* there runs what git config can name). It loads no project extensions
#: (only the user's: its ExtensionManager)
GEMINI = "gemini project settings"
#: Qwen Code 0.24's project settings: `.qwen/` (settings.json: hooks, mcpServers, tool discovery / call commands;
#: commands, agents, skills, workflows; .env) and the top-level `.env` (as Gemini CLI does). It loads no project
#: extensions either; its own `worktrees/`, `tmp/`, `reviews/` are what it writes there
QWEN = "qwen project settings"
#: Codex CLI 0.169's project settings: `.codex/` (config.toml: MCP servers, which Codex starts outside its sandbox,
#: hooks, model providers; rules/ (exec policies), agents, skills) and the repository skills of `.agents/skills/`.
#: Codex loads them once its own trust of the project is given, which it records for the repository's main
#: checkout: a person who trusted their repository in Codex has every task worktree's `.codex/` loaded
CODEX = "codex project settings"
#: GitHub Copilot CLI 1.0.102's project settings: `.github/hooks/*.json` (hooks: `bash` commands), the repository
#: settings `.github/copilot/settings.json` / `settings.local.json` (inline hooks, permissions), the workspace MCP
#: servers (`.mcp.json`, `.github/mcp.json`), its custom agents (`.github/agents/`: each may carry MCP servers,
#: hooks and skills, and the model may hand work to one) and its project skills (`.github/skills/`,
#: `.agents/skills/`, `.claude/skills/`: a skill's `allowed-tools` runs tools without a permission rule). In prompt
#: mode it loads them once its own trust of the folder is given: a trusted folder in its config (`trustedFolders`:
#: the repository's main checkout or any folder above the worktree counts) or COPILOT_ALLOW_ALL=true; a person who
#: trusted their repository in Copilot has every task worktree's loaded
COPILOT = "copilot project settings"
#: each agent CLI's project settings as a trust key: (its files under the worktree's top, its folders there (every
#: file under each, symlinks followed; a folder may be a path, `.github/hooks`; two CLIs may load the same one),
#: what the CLI itself writes at a folder's top)
AGENT_PROJECT = {
    OPENCODE: (OPENCODE_FILES, (OPENCODE_DIR,), OPENCODE_OWN),
    CLAUDE: ((".mcp.json",), (".claude",), frozenset({"worktrees", "agent-memory", "agent-memory-local"})),
    GEMINI: ((".env",), (".gemini",), frozenset()),
    QWEN: ((".env",), (".qwen",), frozenset({"worktrees", "tmp", "reviews"})),
    CODEX: ((), (".codex", ".agents/skills"), frozenset()),
    COPILOT: ((".github/copilot/settings.json", ".github/copilot/settings.local.json", ".mcp.json", ".github/mcp.json"),
              (".github/hooks", ".github/agents", ".github/skills", ".agents/skills", ".claude/skills"), frozenset()),
}
#: the folders an agent CLI also finds below the worktree's top, at any depth: Claude Code searches the directories
#: of the files its agent touches for nested skills (`src/.claude/skills/`, whose frontmatter may carry hooks and
#: allowed-tools)
AGENT_NESTED = {CLAUDE: (".claude/skills",)}
AGENT_NESTED_DIRS = tuple(dict.fromkeys(f for folders in AGENT_NESTED.values() for f in folders))
#: what an agent may not edit in its worktree, whatever its CLI: every agent CLI's project settings (another CLI's
#: next role would load them): the folders (none inside another) and the files at the top
AGENT_SETTINGS_DIRS = tuple(d for d in dict.fromkeys(f for _, folders, _ in AGENT_PROJECT.values() for f in folders)
                            if not any(d.startswith(o + "/") for _, fs, _ in AGENT_PROJECT.values() for o in fs))
AGENT_SETTINGS_FILES = tuple(dict.fromkeys(name for files, _, _ in AGENT_PROJECT.values() for name in files))
#: what a bare ``--check`` (no command) of merge stands for: ``[run] test_command``, once trusted. It starts with
#: a NUL byte: no command line can spell it.
DEFAULT_CHECK = "\0[run] test_command"


HOW = "see it and allow it with `git nerve trust`"


class Untrusted(CheckFailed):
    """A step that cannot be skipped (merge's default check, a workflow file) would run content this user has not
    trusted: refused before anything ran or moved, exit 7 (as a failed check)."""


def skipped(key: str) -> str:
    """The one line a command prints when it skips a step."""
    return f"skipped {key}: not trusted on this machine (new, or changed since you trusted it); {HOW}"


class Verdict:
    """The settings as they are now (:func:`.settings.current`) and what this user trusted (:func:`.record.load`)."""

    def __init__(self, settings: dict[str, Setting], trusted: dict[str, list[str]]):
        self.settings, self.trusted = settings, trusted

    def is_trusted(self, key: str) -> bool:
        s = self.settings.get(key)
        return s is None or s.digest in self.trusted.get(key, [])

    def allows(self, key: str, in_use) -> bool:
        """True when ``in_use`` (the value the feature is about to use) is empty, or is the setting's value and
        that was trusted (a file changed between the two reads is not trusted)."""
        if in_use in (None, "", [], (), {}):
            return True
        s = self.settings.get(key)
        in_use = list(in_use) if isinstance(in_use, tuple) else in_use
        return s is not None and s.value == in_use and s.digest in self.trusted.get(key, [])

    def untrusted(self) -> list[Setting]:
        return [s for k, s in self.settings.items() if not self.is_trusted(k)]


def verdict(common_dir: str | os.PathLike[str], toplevel: str | os.PathLike[str], *, workflows: bool = False,
            agents: bool = False) -> Verdict:
    """The settings at ``toplevel`` and what this user trusted; ``workflows``/``agents``: with the workflow files
    and the agent CLIs' project settings (their adapters check those themselves: :func:`untrusted_in`; a command
    that needs neither, spawn or merge, reads no more than it uses)."""
    from . import record
    from .settings import current

    return Verdict(current(toplevel, workflows=workflows, agents=agents), record.load(common_dir))


def trust(common_dir, toplevel, keys: set[str] | None = None) -> tuple[list[Setting], Path | None]:
    """Record the settings at ``toplevel`` (those of ``keys`` only, when given) as trusted: (newly trusted,
    record path or None when nothing needed recording)."""
    v = verdict(common_dir, toplevel, workflows=True, agents=True)
    new = [s for k, s in v.settings.items() if (keys is None or k in keys) and not v.is_trusted(k)]
    if not new:
        return [], None
    from . import record

    return new, record.add(common_dir, {s.key: s.digest for s in new})


def trust_shown(common_dir, shown: dict) -> list[str]:
    """`git nerve trust`: record exactly the digests :func:`report` showed (``shown``: its dict) and not trusted
    yet, so a file changed meanwhile is not trusted unseen; the keys recorded."""
    digests = {s["setting"]: s["digest"] for s in shown["settings"] if not s["trusted"]}
    if digests:
        from . import record

        record.add(common_dir, digests)
    return list(digests)


def trust_written(common_dir, toplevel) -> None:
    """`git nerve init` (and the demo) trust the nerve.toml settings they wrote themselves."""
    from .settings import from_toml
    from .. import nerve_toml

    keys = set(from_toml(nerve_toml.read(toplevel)))
    if keys:
        trust(common_dir, toplevel, keys)


def trusted_agent_settings(common_dir, toplevel) -> set[str]:
    """The agent CLIs' project settings at ``toplevel`` this user trusts as they are (or that are absent): what
    git-nerve then writes there at the person's own command (`git nerve mcp install --scope project`) keeps them
    trusted (:func:`trust_again`), as `git nerve init` trusts what it writes; those untrusted before stay so."""
    try:
        v = verdict(common_dir, toplevel, agents=True)
    except UsageError:
        return set()
    return {key for key in AGENT_PROJECT if v.is_trusted(key)}


def trust_again(common_dir, toplevel, keys: set[str]) -> None:
    if keys:
        trust(common_dir, toplevel, keys)


def report(common_dir, toplevel) -> dict:
    """What `git nerve trust --show` prints: every setting, what it does, exactly what it holds, trusted or not."""
    from . import record

    v = verdict(common_dir, toplevel, workflows=True, agents=True)
    return {"repository": os.path.realpath(os.fspath(common_dir)), "record": str(record.path_for(common_dir)),
            "settings": [{"setting": s.key, "does": s.does, "shown": list(s.shown), "digest": s.digest,
                          "trusted": v.is_trusted(s.key),
                          "seen_before": bool(v.trusted.get(s.key))} for s in v.settings.values()]}


def default_check(common_dir, toplevel) -> str:
    """`merge --check` without a command (and the console's merge check): nerve.toml's ``[run] test_command``,
    refused (:class:`Untrusted`, exit 7) when its content is not trusted; UsageError when there is none."""
    v = verdict(common_dir, toplevel)
    s = v.settings.get(TEST)
    if s is None or not isinstance(s.value, str):
        raise UsageError("no check command: set [run] test_command in nerve.toml (or give the command: --check CMD); "
                         "nothing was merged")
    if not v.is_trusted(TEST):
        raise Untrusted(f"merge --check: {TEST} `{s.value}` is not trusted on this machine (new, or changed since "
                        f"you trusted it); nothing was merged: {HOW}, or name the command: --check CMD")
    return s.value


def check_configured(common_dir, toplevel) -> bool:
    """Whether a bare ``--check`` would run something: ``[run] test_command`` present and trusted (the console's
    merge dialogs tick "run the check" only then). False when nerve.toml cannot be read."""
    try:
        v = verdict(common_dir, toplevel)
    except UsageError:
        return False
    s = v.settings.get(TEST)
    return s is not None and isinstance(s.value, str) and v.is_trusted(TEST)


def untrusted_in(common_dir, worktree, key: str) -> Setting | None:
    """An agent CLI's own project settings (``key``: one of :data:`AGENT_PROJECT`) as that CLI finds them in
    ``worktree``, the worktree it runs in: the :class:`Setting` when present and not trusted by this user, None
    when absent or trusted. ``git nerve trust`` shows and records the main checkout's: the same committed files
    trust the worktrees spawned from it (the person's own files there, untracked and ignored, count in neither:
    :func:`.settings.agent_project`)."""
    from . import record
    from ..dotgit import main_checkout
    from .settings import agent_project

    main = main_checkout(common_dir) if common_dir else None
    s = agent_project(key, worktree, main=main if main is not None else False).get(key)  # no main: none are theirs
    if s is None or (common_dir and s.digest in record.load(common_dir).get(key, [])):
        return None
    return s


#: why each CLI's project settings matter, in words (the refusal says it)
AGENT_LOADS = {
    OPENCODE: "its plugins run as code on your machine",
    CLAUDE: "its hooks run as commands on your machine, outside its permission rules",
    GEMINI: "its hooks, MCP servers and tool commands run on your machine, its .env sets their environment",
    QWEN: "its hooks, MCP servers and tool commands run on your machine, its .env sets their environment",
    CODEX: "its MCP servers run as commands outside its sandbox",
    COPILOT: "its hooks and MCP servers run as commands on your machine, outside its permission rules, and its "
             "skills' allowed-tools widen them",
}


def refusal(common_dir, worktree, key: str, cli: str) -> str | None:
    """The one line an adapter ends its role with instead of starting ``cli`` in ``worktree`` (None: start it):
    the CLI's project settings there (``key``) are present and not trusted, and the CLI would load them (the
    adapter has no way to keep them out of one run: the CLI is not started at all)."""
    untrusted = untrusted_in(common_dir, worktree, key)
    if untrusted is None:
        return None
    files = list(untrusted.value)
    named = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    yours = _yours_changed(common_dir, files)
    how = (f"{', '.join(yours)} differ from your own in the main checkout (changed since the task's worktree got "
           f"its copy): copy yours there again, or remove it" if yours else HOW)
    return (f"not started: {key} in {worktree} ({named}) are not trusted on this machine (new, or changed since you "
            f"trusted them), and {cli} would load them ({AGENT_LOADS[key]}): {how}")


def _yours_changed(common_dir, files: list[str]) -> list[str]:
    """Those of ``files`` that are the person's own in the main checkout (untracked there, ignored): in a worktree
    they count only when they differ from it (a copy older than the person's file); trusting cannot help."""
    from ..dotgit import main_checkout
    from ..git.tracked import ignored_under

    main = main_checkout(common_dir) if common_dir else None
    return sorted(set(files) & set(ignored_under(main, files) or ())) if main is not None else []


def require_workflow(common_dir, name: str, data: bytes) -> None:
    """`git nerve run NAME` / `validate`: the repository's ``.nerve/workflows/NAME.py`` (``data``: the bytes about
    to be imported) runs only when this user trusted that exact content (else :class:`Untrusted`, exit 7)."""
    from . import record
    from .settings import workflow_key, workflow_setting

    key = workflow_key(name)
    if workflow_setting(key, data).digest not in record.load(common_dir).get(key, []):
        raise Untrusted(f"not run: {key} is not trusted on this machine (new, or changed since you trusted it); "
                        f"nothing ran: {HOW}")


__all__ = ["ADAPTER", "AGENT_LOADS", "AGENT_NESTED", "AGENT_NESTED_DIRS", "AGENT_PROJECT", "AGENT_SETTINGS_DIRS", "AGENT_SETTINGS_FILES", "CLAUDE", "CLONE",
           "CODEX", "COPILOT", "GEMINI", "QWEN", "DEFAULT_CHECK", "EMBEDDINGS", "EXTRA", "EXTRACT", "HOW", "INCLUDE", "NOTIFY_COMMAND",
           "NOTIFY_URL", "OPENCODE", "SETUP", "TEST",
           "WORKFLOW_DIR", "WORKTREEINCLUDE",
           "Untrusted", "Verdict", "check_configured", "default_check", "report", "require_workflow", "skipped", "trust", "trust_shown",
           "refusal", "trust_again", "trust_written", "trusted_agent_settings", "untrusted_in", "verdict"]
