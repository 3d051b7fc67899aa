"""Google's Gemini CLI in headless mode: `gemini` reads the prompt from standard input
(stdin that is not a terminal and no ``-p``: one non-interactive run) and prints its
final answer as plain text.

Confinement is Gemini CLI's own policy engine, never ``--yolo``: the run keeps the
``default`` approval mode (every tool that would need a person's approval is refused
in headless mode) and loads a private policy file (``--policy``, in the run's own
temporary directory) that allows exactly

* the file tools (``read_file``, ``replace``, ``write_file``, ...), which Gemini CLI
  itself confines to the workspace (the task's worktree);
* shell commands that start with ``git add``/``commit``/``status``/``diff``/``log``/
  ``show``/``rev-parse``/``ls-files``/``branch``, ``git nerve``, and the repository's
  test command (nerve.toml ``[run] test_command``);

and refuses every other shell command and the web tools. Gemini's container sandbox
(``--sandbox``: docker/podman/runsc/lxc, seatbelt on macOS) is not used: it needs a
container runtime, and it would hide the repository's git directory from `git commit`.

Gemini's shell tool runs every command with ``GIT_CONFIG_GLOBAL=/dev/null`` and an
empty ``core.hooksPath``, so git-nerve's hooks never see a commit made there: no
heartbeat, no commit record, no pre-push guard from the hooks, and no user identity
from ~/.gitconfig. The adapter puts the identity back (``GIT_AUTHOR_*`` and
``GIT_COMMITTER_*`` from the worktree's own git) and the hooks too
(``GIT_CONFIG_PARAMETERS`` outranks Gemini's ``GIT_CONFIG_COUNT`` overrides), and the
workflow runner records every commit it finds on the branch after each role anyway,
so the task's history is complete whichever way the commit was made.

The person's notes and a stop reach the agent mid-run through Gemini CLI's own hooks: ``AfterTool``
runs ``git nerve notes --hook gemini`` (behind the sh gate Claude Code's runs use) and the notes become
``additionalContext`` appended to the tool's result; once the task is stopped it answers ``continue:
false``, which ends the headless run, and so does ``BeforeTool`` before the next tool runs. Gemini CLI
reads hooks only from settings files (the worktree's, which the agent could change or commit; the
user's; a system file it loads only when it and every directory above it belong to root), so each run
gets a private Gemini home (``GEMINI_CLI_HOME`` in the run's private directory, removed afterwards):
the user's ``settings.json`` with git-nerve's hooks appended (their ``mcpServers``, auth type and
model carried), and links to the login files Gemini CLI reads there (``gemini_home.HOME_FILES``: never copies) in
``$GEMINI_CLI_HOME`` when the user set one, else in HOME. Their extensions, policies, memory
(``GEMINI.md``), commands and chat history stay out of the run; only Gemini CLI's own writes of its login
files (a refreshed token) reach theirs, as when they run it themselves.

``--skip-trust`` makes the worktree a trusted folder for Gemini CLI: it loads the worktree's ``.gemini/`` (hooks,
MCP servers, tool commands, policies, commands, skills, agents, .env). The CLI is started only once this user
trusted their exact content (`git nerve trust`, issue 35: :data:`git_nerve.trust.GEMINI`; command.refuse_untrusted),
and the policy refuses the agent's writes to every agent CLI's project settings (``SETTINGS_PATHS``).

Credentials are the user's: ``GEMINI_API_KEY`` (``GOOGLE_GEMINI_BASE_URL`` for a
proxy, with ``security.auth.selectedType = "gemini-api-key"`` in
~/.gemini/settings.json), Vertex AI variables, or a Google login in ~/.gemini/.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence

from ...git import ident, location
from ...trust import AGENT_SETTINGS_DIRS, AGENT_SETTINGS_FILES, GEMINI
from . import usage
from .command import CommandAdapter, Invocation, adapter_factory, extras, model_flag, options, probe
from .gemini_home import HOME_VAR, private_home

#: The Gemini CLI version the real-CLI suite runs (tests/test_real_agents.py).
TESTED_VERSION = "0.61.0"

_model = model_flag("--model")

#: git subcommands a role may run (no `git -c`, `git config`, `git push`: those are not offered).
GIT_ALLOWED = (
    "add", "commit", "status", "diff", "log", "show", "rev-parse", "ls-files", "branch --show-current",
    "--no-pager diff", "--no-pager log", "--no-pager show", "nerve thread", "nerve knowledge query",
)
#: Options of those subcommands that write or read files outside the worktree (`git diff --output=/any/file`,
#: `git diff --no-index /etc/x /etc/y`) or run a program: refused even after an allowed prefix.
GIT_DENIED_OPTIONS = r".*(\s--output|\s--no-index|\s--ext-diff|\s--exec|--upload-pack|--receive-pack|\s--template|\s--file=)"
#: File tools Gemini CLI confines to the workspace itself.
FILE_TOOLS = ("read_file", "read_many_files", "list_directory", "glob", "grep_search", "replace", "write_file")
#: Tools refused outright (they reach the network).
DENIED_TOOLS = ("google_web_search", "web_fetch")
#: Files the agent may not write although they are in the worktree: every agent CLI's project settings, which
#: the next run loads (`--skip-trust`; Claude Code, opencode likewise): MCP servers, hooks or tool rules there
#: would outlive this policy. (No nested quantifier: Gemini CLI drops a rule whose regex has one, its isSafeRegExp.)
SETTINGS_PATHS = (r'"(file_path|absolute_path|dir_path)":\s*"(|[^"]*/)('
                  + "|".join(re.escape(d) for d in AGENT_SETTINGS_DIRS) + r')(/|")|'
                  r'"(file_path|absolute_path)":\s*"(|[^"]*/)(' + "|".join(re.escape(f) for f in AGENT_SETTINGS_FILES) + r')"')

#: what the agent is told when it tries
SETTINGS_DENIED = ("git-nerve: the agent CLIs' project settings (" + ", ".join(
    [f"{d}/" for d in AGENT_SETTINGS_DIRS] + list(AGENT_SETTINGS_FILES)) + ") are not the agent's to change")


SANDBOX = (
    "Gemini CLI policy engine (private --policy file, approval mode default, headless): file tools inside the "
    "worktree, shell only for git add/commit/status/diff/log/show, `git nerve` and the test command, no web tools; "
    "no OS sandbox (Gemini's --sandbox needs docker/podman); its shell bypasses git hooks (core.hooksPath emptied): "
    "the adapter restores them and the runner records every commit on the branch"
)


def _argv(a: CommandAdapter) -> list[str]:
    own = [("--approval-mode", "default"), ("--skip-trust", None), ("--output-format", "json")]
    model = [] if "--model" in (a.extra_args or ()) or "-m" in (a.extra_args or ()) else _model(a.model)
    return [a.binary, *options(own, a.extra_args), *model, *extras(a)]


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for everything we write


def policy_text(test_command: str, git_allowed: Sequence[str] = GIT_ALLOWED) -> str:
    """The policy rules of one run, TOML for Gemini CLI's policy engine (Qwen Code takes rules as flags)."""
    prefixes = [f"git {sub}" for sub in git_allowed]
    if test_command.strip():
        prefixes.append(test_command.strip())
    lines = [
        "# git-nerve: what an agent may do in its task's worktree (written for one run, then removed)",
        "[[rule]]",
        f"toolName = [{', '.join(_toml(t) for t in FILE_TOOLS)}]",
        'decision = "allow"',
        "priority = 900",
        "",
        "[[rule]]",
        'toolName = "run_shell_command"',
        f"commandPrefix = [{', '.join(_toml(p) for p in prefixes)}]",
        'decision = "allow"',
        "priority = 900",
        "",
        "[[rule]]",
        'toolName = "run_shell_command"',
        'commandRegex = ".*"',
        'decision = "deny"',
        'denyMessage = "git-nerve: only git add/commit/status/diff/log/show, `git nerve` and the test command may run"',
        "priority = 800",
        "",
        "[[rule]]",
        'toolName = "run_shell_command"',
        f"commandRegex = {_toml(GIT_DENIED_OPTIONS)}",
        'decision = "deny"',
        'denyMessage = "git-nerve: this git option reads or writes outside the worktree"',
        "priority = 950",
        "",
        "[[rule]]",
        'toolName = ["write_file", "replace"]',
        f"argsPattern = {_toml(SETTINGS_PATHS)}",
        'decision = "deny"',
        f"denyMessage = {_toml(SETTINGS_DENIED)}",
        "priority = 950",
        "",
        "[[rule]]",
        f"toolName = [{', '.join(_toml(t) for t in DENIED_TOOLS)}]",
        'decision = "deny"',
        "priority = 950",
        "",
    ]
    return "\n".join(lines)


def git_identity_env(workdir: str, env: Mapping[str, str]) -> dict[str, str]:
    """``GIT_AUTHOR_*`` / ``GIT_COMMITTER_*`` as the worktree's git sees them, for a shell that hides ~/.gitconfig."""
    found: dict[str, str] = {}
    for who in ("AUTHOR", "COMMITTER"):
        if env.get(f"GIT_{who}_NAME") and env.get(f"GIT_{who}_EMAIL"):
            continue
        said = ident.var(workdir, f"GIT_{who}_IDENT")
        m = re.match(r"(.*) <(.*)> \d+ [-+]\d{4}$", said) if said is not None else None
        if m:
            found.setdefault(f"GIT_{who}_NAME", m.group(1))
            found.setdefault(f"GIT_{who}_EMAIL", m.group(2))
    return found


#: git's own diff for one file pair, as an external diff program. Gemini CLI's shell sets ``diff.external`` to
#: "" (meant as "none"), which git runs as a program: every `git diff` dies ("cannot run"). git has no value
#: that turns an external diff off, so the adapter names this one, which prints what git itself would.
EXTERNAL_DIFF = """\
import subprocess, sys
if len(sys.argv) < 8:
    sys.exit(0)
path, old, old_hex, old_mode, new, new_hex, new_mode = sys.argv[1:8]
out = subprocess.run(["git", "--no-pager", "diff", "--no-ext-diff", "--no-index", "--no-color", "--", old, new],
                     capture_output=True).stdout.decode("utf-8", "surrogateescape")
lines = out.splitlines(keepends=True)
head = 0
while head < len(lines) and not lines[head].startswith("@@") and not lines[head].startswith("Binary"):
    head += 1
a, b = ("/dev/null" if old == "/dev/null" else "a/" + path), ("/dev/null" if new == "/dev/null" else "b/" + path)
header = ["diff --git a/%s b/%s\\n" % (path, path)]
if old == "/dev/null":
    header.append("new file mode %s\\n" % new_mode)
elif new == "/dev/null":
    header.append("deleted file mode %s\\n" % old_mode)
elif old_mode != new_mode:
    header += ["old mode %s\\n" % old_mode, "new mode %s\\n" % new_mode]
def short(h, f):
    if (h == "." or set(h) == {"0"}) and f != "/dev/null":
        h = subprocess.run(["git", "hash-object", "--", f], capture_output=True, text=True).stdout.strip()
    return h[:7] if h and h != "." else "0000000"
both = old != "/dev/null" and new != "/dev/null"
mode = " " + new_mode if both and old_mode == new_mode else ""
header.append("index %s..%s%s\\n" % (short(old_hex, old), short(new_hex, new), mode))
body = lines[head:]
if body and body[0].startswith("Binary"):
    body = ["Binary files %s and %s differ\\n" % (a, b)]
elif body:
    header += ["--- %s\\n" % a, "+++ %s\\n" % b]
sys.stdout.write("".join(header + body) if body or old_mode != new_mode else "")
"""


def _quote_param(key: str, value: str) -> str:
    """One ``GIT_CONFIG_PARAMETERS`` entry (git's sq_quote)."""
    q = lambda s: "'" + s.replace("'", "'\\''") + "'"  # noqa: E731
    return f"{q(key)}={q(value)}"


def git_config_env(workdir: str, tmpdir: str, env: Mapping[str, str]) -> dict[str, str]:
    """``GIT_CONFIG_PARAMETERS`` that outranks what Gemini's shell sets through ``GIT_CONFIG_COUNT``: the
    repository's hooks directory (for an emptied core.hooksPath) and a working diff (for an emptied diff.external)."""
    entries: list[str] = []
    hooks = location.git_path(workdir, "hooks", check=False).strip()
    if hooks:
        entries.append(_quote_param("core.hooksPath", hooks))
    helper = os.path.join(tmpdir, "nerve-git-diff")
    with open(helper, "w", encoding="utf-8") as fh:
        fh.write(f"#!{sys.executable}\n" + EXTERNAL_DIFF)
    os.chmod(helper, 0o700)
    entries.append(_quote_param("diff.external", helper))
    previous = env.get("GIT_CONFIG_PARAMETERS", "")
    return {"GIT_CONFIG_PARAMETERS": " ".join([*([previous] if previous else []), *entries])}


def mcp_policy_text() -> str:
    """Allow git-nerve's own MCP tools (server `nerve`) one by one: all but `done` (the runner owns the lifecycle)."""
    from ...mcptools.names import RUN_TOOLS, SERVER_NAME

    return "\n".join([
        "[[rule]]",
        f"mcpName = {_toml(SERVER_NAME)}",
        f"toolName = [{', '.join(_toml(t) for t in RUN_TOOLS)}]",
        'decision = "allow"',
        "priority = 900",
        "",
    ])


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    from .claude import notes_command

    command = notes_command(inv, "gemini")
    if command is not None:
        inv.env[HOME_VAR] = private_home(inv, command)
    policy = os.path.join(inv.tmpdir, "nerve-policy.toml")
    with open(policy, "w", encoding="utf-8") as fh:
        # git-nerve's MCP tools, when the user registered the server (`git nerve mcp install gemini`): Gemini CLI
        # has no per-run MCP flag, and skips a system-settings file under a world-writable directory such as /tmp
        fh.write(policy_text(inv.ctx.test_command) + "\n" + mcp_policy_text())
    if "--policy" not in {a.split("=", 1)[0] for a in (adapter.extra_args or ())}:
        inv.argv[1:1] = ["--policy", policy]
    inv.env.update(git_identity_env(inv.workdir, inv.env))
    inv.env.update(git_config_env(inv.workdir, inv.tmpdir, inv.env))
    inv.env.setdefault("NO_COLOR", "1")
    inv.env.setdefault("GEMINI_CLI_NO_RELAUNCH", "true")  # one node process (it would re-spawn itself for a bigger heap)


# -- failures the exit status hides ---------------------------------------------------------

_AUTH = re.compile(
    r"API_KEY_INVALID|API key not valid|API key expired|PERMISSION_DENIED|UNAUTHENTICATED|"
    r"\b(?:got status|status|code)[\":\s]*(?:401|403)\b|\[(?:401|403)\b|"
    r"must specify the GEMINI_API_KEY|Please set an Auth method|Invalid auth method selected|"
    r"Gemini CLI is not running in a trusted directory",
    re.IGNORECASE,
)


def _auth_cause(text: str) -> str | None:
    m = _AUTH.search(text)
    if m is None:
        return None
    found = m.group(0)
    if re.search(r"GEMINI_API_KEY|Auth method|Invalid auth", found, re.IGNORECASE):
        return f"no usable credentials ({found}): set GEMINI_API_KEY or log in with `gemini`"
    if "trusted" in found:
        return found
    return f"the model API refused the key ({found}): check GEMINI_API_KEY"


def diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    """A bad or missing key, seen while the CLI runs (before its retries) or after an exit 0.

    Only stderr is read: Gemini CLI reports API errors there, and stdout is the agent's own answer,
    which may well quote an error message."""
    return _auth_cause(stderr)


# -- `git nerve validate` -----------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _version(binary: str) -> tuple[str | None, str | None]:
    proc = probe([binary, "--version"], env={"NO_COLOR": "1"})
    if not proc.ok:
        return None, proc.error
    m = re.search(r"\d+\.\d+\.\d+", proc.stdout)
    return (m.group(0) if m else None), None


@functools.lru_cache(maxsize=8)
def _help(binary: str) -> str:
    return probe([binary, "--help"], env={"NO_COLOR": "1"}).stdout


def _settings_auth() -> str:
    home = os.environ.get(HOME_VAR) or os.path.expanduser("~")
    try:
        with open(os.path.join(home, ".gemini", "settings.json"), encoding="utf-8") as fh:
            data = json.load(fh)
        return str(((data.get("security") or {}).get("auth") or {}).get("selectedType") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def _credential_problems() -> list[str]:
    """What Gemini CLI would refuse to start without, for the auth type it would pick (its own order)."""
    env = os.environ
    selected = _settings_auth()
    home = env.get(HOME_VAR) or os.path.expanduser("~")
    if not selected:
        if env.get("GOOGLE_GEMINI_BASE_URL"):
            return ['GOOGLE_GEMINI_BASE_URL is set: gemini then needs security.auth.selectedType = "gemini-api-key" '
                    "in ~/.gemini/settings.json"]
        if env.get("GEMINI_API_KEY") or env.get("GOOGLE_GENAI_USE_VERTEXAI") == "true":
            return []
        return ["gemini has no credentials: set GEMINI_API_KEY (or log in once with `gemini`)"]
    if selected == "gemini-api-key" and not env.get("GEMINI_API_KEY"):
        return ["gemini is set to use an API key (security.auth.selectedType) but GEMINI_API_KEY is not set"]
    if selected == "vertex-ai" and not (env.get("GOOGLE_API_KEY") or (
            env.get("GOOGLE_CLOUD_PROJECT") and env.get("GOOGLE_CLOUD_LOCATION"))):
        return ["gemini is set to use Vertex AI but neither GOOGLE_API_KEY nor GOOGLE_CLOUD_PROJECT and "
                "GOOGLE_CLOUD_LOCATION are set"]
    if selected == "oauth-personal" and not os.path.exists(os.path.join(home, ".gemini", "oauth_creds.json")):
        return ["gemini is set to log in with Google but has no login: run `gemini` once"]
    return []


def version_and_flags(adapter: CommandAdapter, cli: str, tested: str, flags: Sequence[str]) -> list[str]:
    """What `git nerve validate` says of a Gemini-family CLI: its version below ``tested`` (in minor, not patch),
    a flag its ``--help`` does not list, or why it did not run (then that alone)."""
    version, err = _version(adapter.binary)
    if err:
        return [err]
    problems: list[str] = []
    if version is None:
        problems.append(f"`{adapter.binary} --version` printed no version")
    elif tuple(int(x) for x in version.split(".")) < (*(int(x) for x in tested.split(".")[:2]), 0):
        problems.append(f"{cli} {version} is older than {tested}, the version git-nerve is tested with")
    text = _help(adapter.binary)
    problems += [f"`{adapter.binary} --help` does not list {flag}" for flag in flags if flag not in text]
    return problems


def checks(adapter: CommandAdapter) -> list[str]:
    problems = version_and_flags(adapter, "gemini", TESTED_VERSION,
                                 ("--approval-mode", "--policy", "--skip-trust", "--output-format", "--model"))
    if _version(adapter.binary)[1]:
        return problems  # it did not run
    return problems + _credential_problems()


create_gemini = adapter_factory(
    "gemini", "gemini",
    build=_argv, prompt_via="stdin", prepare=_prepare, diagnose=diagnose, checks=checks, sandbox=SANDBOX,
    report=lambda a, out, inv: usage.gemini(out), project_settings=GEMINI,
    env_names=("GEMINI_*", "GOOGLE_*"), state_dirs=(".gemini", f"${HOME_VAR}"), clean_stop=True,
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
gemini_adapter = create_gemini()

__all__ = ["create_gemini", "diagnose", "gemini_adapter", "policy_text"]
