"""Claude Code in print mode (``claude -p``), confined by its own permission rules.

The prompt arrives on standard input; the final answer is printed as plain text.
Nothing is ever asked of a person: the session runs with ``--permission-mode
dontAsk`` (every tool call no rule allows is refused, never prompted) and
``--permission-prompts none``, and a settings file written for this run into its
private directory (``--settings``) allows exactly what a role needs:

* ``Read`` (also Glob, Grep) and ``Edit`` (also Write) inside the task's worktree
  (``//<worktree>/**``); files elsewhere are refused;
* ``Bash`` for the read-only git commands, ``git add`` / ``git commit`` (a
  commit in a linked worktree is written by git itself, under the repository's
  common dir), ``git nerve thread`` / ``post``, and the repository's test command
  (nerve.toml ``[run] test_command``). Claude Code checks each part of a compound
  command (``git add X && git commit ...``) against these rules;
* git-nerve's own MCP server (``git nerve mcp``, in a private ``--mcp-config``)
  with its tools allowed one by one (``mcp__nerve__thread``, ``notes``, ...),
  all but ``done``: the runner owns the task's lifecycle;
* deny rules (which win over any allow rule, also the user's own) for the network
  (``WebFetch``, ``WebSearch``, curl, wget), package managers, ``git push`` /
  ``config`` / ``remote``, git's options that write files (``--output``), and edits
  of every agent CLI's project settings in the worktree (``.claude/``, ``.mcp.json``,
  ``.gemini/``, ``.qwen/``, ``.codex/``, ``.opencode/``, ``opencode.json(c)``).

Claude Code also loads the worktree's own project settings (``.claude/``: hooks that run
as commands outside the permission rules, permission rules, env, skills and agents with
hooks of their own; ``.mcp.json``: MCP servers), whatever ``--settings`` says: it is
started only once this user trusted their exact content (`git nerve trust`, issue 35:
:data:`git_nerve.trust.CLAUDE`; command.refuse_untrusted), else the role ends with one
line naming them.

Claude Code's bubblewrap sandbox is not used: it needs ``bwrap`` and ``socat``
and user namespaces, which most CI containers lack. ``extra_args`` override any
flag set here (``--permission-mode``, ``--settings`` ...).
"""

from __future__ import annotations

import json
import os
import re
import shutil

from ...trust import AGENT_NESTED_DIRS, AGENT_SETTINGS_DIRS, AGENT_SETTINGS_FILES, CLAUDE
from . import usage
from .command import CommandAdapter, Invocation, adapter_factory, extras, options, probe

#: Claude Code's version this adapter is tested against (tests/test_real_agents.py).
TESTED_VERSION = "2.1.330"

#: Shell commands every role may run (Claude Code's prefix rules: `Bash(git log:*)`).
GIT_READ = ("git status", "git diff", "git log", "git show", "git rev-parse", "git branch --show-current", "git ls-files")
GIT_WRITE = ("git add", "git commit")
NERVE = ("git nerve thread", "git nerve post")
#: Always refused, whatever else allows them (deny rules win in Claude Code).
DENY = (
    "WebFetch", "WebSearch",
    "Bash(curl:*)", "Bash(wget:*)", "Bash(nc:*)", "Bash(ssh:*)", "Bash(scp:*)",
    "Bash(apt:*)", "Bash(apt-get:*)", "Bash(pip:*)", "Bash(pip3:*)", "Bash(npm:*)", "Bash(sudo:*)",
    "Bash(git push:*)", "Bash(git config:*)", "Bash(git remote:*)", "Bash(git -c:*)", "Bash(git -C:*)",
    "Bash(git diff --output:*)", "Bash(git log --output:*)", "Bash(git show --output:*)",
)


def settings(workdir: str, test_command: str = "", notes_hook: str | None = None) -> dict:
    """The Claude Code settings for one run in ``workdir`` (what ``--settings`` loads)."""
    root = "/" + os.path.realpath(workdir).rstrip("/")  # `//abs/path/**`: an absolute path in Claude Code's rules
    allow = [f"{tool}({root}/**)" for tool in ("Read", "Edit")]  # Edit rules cover Write, Read rules cover Glob/Grep
    allow += [f"Bash({cmd}:*)" for cmd in (*GIT_READ, *GIT_WRITE, *NERVE)]
    test = " ".join((test_command or "").split())
    if test:
        allow.append(f"Bash({test})")
        allow.append(f"Bash({test}:*)")
    allow += mcp_rules()
    # every agent CLI's project settings in the worktree: the next role's CLI (or a teammate's) would load them
    deny = [*DENY, *(f"Edit({root}/{d}/**)" for d in AGENT_SETTINGS_DIRS),
            *(f"Edit({root}/{f})" for f in AGENT_SETTINGS_FILES),
            *(f"Edit({root}/**/{d}/**)" for d in AGENT_NESTED_DIRS)]  # found at any depth (nested skills)
    data: dict = {
        "permissions": {"allow": allow, "deny": deny, "defaultMode": "dontAsk"},
        "includeCoAuthoredBy": False,
    }
    if notes_hook:
        data["hooks"] = hooks(notes_hook)
    return data


#: the hook events that hand the person's notes over (a stop ends the agent at the first of them)
NOTES_EVENTS = ("PostToolUse", "PostToolUseFailure", "UserPromptSubmit")


def hooks(command: str, events: tuple[str, ...] = NOTES_EVENTS, timeout: int = 15) -> dict:
    """Claude Code hooks running git-nerve's notes command after each tool call (ours, not the agent's:
    hooks run outside the permission rules, the agent gains no Bash rule from them). Qwen Code reads the
    same shape (its ``timeout`` is in seconds too), Gemini CLI too (its ``timeout`` in milliseconds)."""
    entry = [{"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": timeout}]}]
    return {event: entry for event in events}


def with_hooks(settings: dict, extra: dict) -> dict:
    """``settings`` (a CLI's settings object, as the user wrote it) with the hook entries of ``extra`` appended to
    its own ``hooks``, event by event (theirs kept, first)."""
    theirs = settings.get("hooks")
    merged = dict(theirs) if isinstance(theirs, dict) else {}
    for event, entries in extra.items():
        prev = merged.get(event)
        merged[event] = [*(prev if isinstance(prev, list) else []), *entries]
    return {**settings, "hooks": merged}


def notes_command(inv: Invocation | None = None, cli: str = "claude") -> str | None:
    """`<git-nerve> notes --hook CLI` with git-nerve's absolute path (None when it cannot be found); ``cli`` is
    the hook format (steer/notes_hook.py READERS: claude, gemini, qwen, copilot, codex).

    For a run (``inv``), behind the sh gate that starts no Python while nothing is pending for the task
    (steer/notes-hook.sh: the task's notes-pending marker, the runner's stop-request file)."""
    import shlex

    parts = notes_parts(inv, cli)
    if parts is None:
        return None
    argv, gate = parts
    command = " ".join(shlex.quote(a) for a in argv)
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "steer", "notes-hook.sh")
    if gate is None or not os.path.isfile(script):
        return command
    return "/bin/sh " + " ".join(shlex.quote(a) for a in (script, *gate)) + " " + command


def notes_parts(inv: Invocation | None, cli: str) -> tuple[list[str], tuple[str, str] | None] | None:
    """(``[<git-nerve>, "notes", "--hook", cli]``, the two files whose presence says something is pending for the
    run's task: its notes-pending marker and the runner's stop-request; None without a task), or None when
    git-nerve's executable cannot be found. A hook in a language of its own (opencode's plugin) gates itself."""
    import sys

    here = os.path.join(os.path.dirname(sys.executable), "git-nerve")
    exe = here if os.access(here, os.X_OK) else shutil.which("git-nerve")
    if not exe:
        return None
    argv = [exe, "notes", "--hook", cli]
    if inv is None or not (inv.ctx.task_id and inv.common_dir and inv.git_dir):
        return argv, None
    from ...fs import NERVE, notes_marker
    from ...paths import stop_request_path

    marker = notes_marker(os.path.join(inv.common_dir, NERVE), inv.ctx.task_id)
    return argv, (os.fspath(marker), os.fspath(stop_request_path(inv.git_dir)))


def mcp_rules() -> list[str]:
    """git-nerve's own MCP tools a run may call, each by name (never the whole server: `done` is the runner's)."""
    from ...mcptools.names import RUN_TOOLS, SERVER_NAME

    return [f"mcp__{SERVER_NAME}__{t}" for t in RUN_TOOLS]


def _mcp_config(inv: Invocation) -> str | None:
    """A private --mcp-config file that starts `git nerve mcp` (None when git-nerve's executable is not found)."""
    from ...errors import UsageError
    from ...mcptools.names import SERVER_NAME, server_entry

    try:
        entry = server_entry()
    except UsageError:
        return None
    path = os.path.join(inv.tmpdir, "nerve-claude-mcp.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"mcpServers": {SERVER_NAME: {"type": "stdio", **entry}}}, fh, indent=1)
    return path


def _argv(a: CommandAdapter) -> list[str]:
    own: list[tuple[str, str | None]] = [
        # the answer and the usage report (the last line: `result`, `modelUsage`), and each API call's usage while
        # it runs (`assistant` events), which stream-json prints only with --verbose (issue 39)
        ("--output-format", "stream-json"),
        ("--verbose", None),
        ("--permission-mode", "dontAsk"),
        ("--permission-prompts", "none"),
        ("--no-session-persistence", None),
    ]
    if a.model:
        own.append(("--model", a.model))
    return [a.binary, "-p", *options(own, a.extra_args), *extras(a)]


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    if "--settings" not in {x.split("=", 1)[0] for x in (adapter.extra_args or ())}:
        path = os.path.join(inv.tmpdir, "nerve-claude-settings.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(settings(inv.workdir, inv.ctx.test_command, notes_command(inv)), fh, indent=1)
        at = len(inv.argv) - len(adapter.extra_args or ())  # among the adapter's own flags, before extra_args
        if at >= 2 and inv.argv[at - 2] == "--model":
            at -= 2
        inv.argv[at:at] = ["--settings", path]
    if "--mcp-config" not in {x.split("=", 1)[0] for x in (adapter.extra_args or ())}:
        mcp = _mcp_config(inv)  # git-nerve's MCP server for this task (its worktree is the agent's cwd)
        if mcp is not None:
            at = len(inv.argv) - len(adapter.extra_args or ())
            if at >= 2 and inv.argv[at - 2] == "--model":
                at -= 2
            inv.argv[at:at] = ["--mcp-config", mcp]
            # our few tools are offered up front rather than behind Claude Code's ToolSearch (one round trip less)
            inv.env.setdefault("ENABLE_TOOL_SEARCH", "false")
    # No auto-update, telemetry or other side traffic in the middle of a task.
    inv.env.setdefault("DISABLE_AUTOUPDATER", "1")
    inv.env.setdefault("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    inv.env.setdefault("NO_COLOR", "1")
    # Claude Code retries a failed request 10 times (about 3 minutes for a 401, and in text mode it prints
    # nothing meanwhile); 3 retries still ride out a blip and a bad key fails in seconds with its own line.
    inv.env.setdefault("CLAUDE_CODE_MAX_RETRIES", "3")


# -- failures the exit status hides ---------------------------------------------------

_AUTH = re.compile(
    r"authentication_error|invalid x-api-key|Invalid API key|API key is invalid|"
    r"Invalid bearer token|OAuth token has expired|Please run /login|Not logged in|"
    r"Credit balance is too low|API Error:? ?(?:401|403)",
    re.IGNORECASE,
)
_API = re.compile(r"^\s*(?:⎿\s*)?(API Error\b.*)$", re.MULTILINE)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def said(stdout: str) -> str:
    """What Claude Code itself said in its stream-json output: its text blocks and its result, one per line (never
    the tool results it was sent, which hold whatever the files and commands it read say); other lines as
    they are."""
    lines = []
    for line in stdout.splitlines():
        try:
            obj = json.loads(line) if line.lstrip().startswith("{") else None
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            lines.append(line)
        elif obj.get("type") == "result" and isinstance(obj.get("result"), str):
            lines.append(obj["result"])
        elif obj.get("type") == "assistant" and isinstance(obj.get("message"), dict):
            content = obj["message"].get("content")
            lines += [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)] \
                if isinstance(content, list) else []
    return "\n".join(lines)


def _diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    """A cause line for an API failure Claude Code reports: a bad key at once (also while it runs), an
    `API Error` answer after an exit 0."""
    raw, stdout = stdout, said(stdout)
    for text in (stderr, stdout):
        m = _AUTH.search(text)
        if m:
            line = next((ln for ln in text.splitlines() if m.group(0) in ln), m.group(0))
            return f"bad or missing Anthropic credentials ({_one_line(line)}): set ANTHROPIC_API_KEY or log in with `claude`"
    if code != 0:
        return None  # running: only a bad key is certain; a non-zero exit already fails with its own tails
    # Claude Code prints "API Error: ..." as its answer and may still exit 0 (in its JSON: the `result`).
    for text in (usage.claude(raw).answer, stderr):
        m = _API.search(text)
        if m and len(text.strip().splitlines()) <= 3:
            return _one_line(m.group(1))
    return None


# -- `git nerve validate` ------------------------------------------------------------------


def _checks(adapter: CommandAdapter) -> list[str]:
    problems: list[str] = []
    exe = shutil.which(adapter.binary) or adapter.binary
    ver, helped = probe([exe, "--version"], timeout=30), probe([exe, "--help"], timeout=30)
    if not (ver.ok and helped.ok):
        return [ver.error or helped.error]
    helptext = helped.stdout
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", ver.stdout)
    if m is None:
        problems.append(f"`{adapter.binary} --version` printed no version: {ver.stdout.strip()[:80]!r}")
    elif (int(m.group(1)), int(m.group(2))) < (2, 1):
        problems.append(f"Claude Code {m.group(0)} is too old: the adapter needs 2.1 or later (tested {TESTED_VERSION})")
    for flag in ("--permission-mode", "--permission-prompts", "--settings", "--no-session-persistence", "--output-format"):
        if flag not in helptext:
            problems.append(f"this Claude Code has no {flag} flag (tested with {TESTED_VERSION})")
    if "dontAsk" not in helptext:
        problems.append(f"this Claude Code has no dontAsk permission mode (tested with {TESTED_VERSION})")
    env = {**os.environ, **(adapter.env or {})}
    if not any(env.get(k) for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                                    "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")):
        home = os.path.expanduser("~")
        if not (os.path.exists(os.path.join(home, ".claude", ".credentials.json"))
                or _config_has_login(os.path.join(home, ".claude.json"))):
            problems.append("no Anthropic credentials: set ANTHROPIC_API_KEY or log in with `claude`")
    return problems


def _config_has_login(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool(data.get("oauthAccount") or data.get("primaryApiKey"))


SANDBOX = ("Claude Code permission rules (dontAsk): file tools only inside the worktree; Bash only git, "
           "`git nerve thread/post` and the test command; network, package managers, git push/config denied")


create_claude = adapter_factory(
    "claude", "claude",
    build=_argv, prompt_via="stdin", prepare=_prepare, diagnose=_diagnose, checks=_checks, sandbox=SANDBOX,
    clean_stop=True, report=lambda a, out, inv: usage.claude(out), live=lambda a: usage.ClaudeStream(),
    project_settings=CLAUDE,
    env_names=("ANTHROPIC_*", "CLAUDE_*", "DISABLE_*", "MCP_*"), state_dirs=(".claude", ".claude.json", ".config/claude"),
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
claude_adapter = create_claude()

__all__ = ["SANDBOX", "TESTED_VERSION", "claude_adapter", "create_claude", "settings"]
