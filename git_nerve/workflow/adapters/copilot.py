"""GitHub Copilot CLI (npm ``@github/copilot``) in prompt mode: `copilot` reads the prompt from standard
input (no ``-p``: piped stdin is one non-interactive run) and prints its final answer (``-s``: the answer
only, no usage statistics).

Confinement is Copilot CLI's own permission rules, never ``--allow-all-tools`` / ``--yolo``: in prompt mode
every tool call no ``--allow-tool`` rule allows is refused ("Permission denied because no interactive user
response was available"), so the run allows exactly

* ``write`` (the file edit tools), which Copilot CLI confines to the working directory (the task's
  worktree; ``--disallow-temp-dir`` takes away the system temporary directory it would add);
* shell commands ``git add``/``commit``/``status``/``diff``/``log``/``show``/``rev-parse``/``ls-files``/
  ``branch``, ``git nerve``, and the program of the repository's test command (nerve.toml ``[run]
  test_command``): Copilot CLI's rules cannot name a whole command line, so ``python3 -m unittest -v``
  allows ``python3`` with any arguments (never a shell, git or a network tool as a whole);

and refuses ``git push``/``config``/``remote``, the URL tools and file writes to every agent CLI's project settings
in the worktree (``write(<worktree>/.claude/**)``...: the next role's CLI would load them) outright (``--deny-tool``). The provider's
key is stripped from what the agent's shell sees (``--secret-env-vars``), and the person's ``COPILOT_ALLOW_ALL``
(a blanket approval) from what Copilot CLI sees. GitHub's built-in MCP servers are
not started (they need a GitHub login and the network).

The person's notes reach the agent mid-run through Copilot CLI's hooks, loaded from a plugin written for
this run into its private directory (``--plugin-dir``, never the worktree): ``postToolUse`` runs
``git nerve notes --hook copilot`` behind the same sh gate as Claude Code's runs (no Python while nothing
is pending) and the notes are appended to the tool's result. Copilot CLI's hooks cannot end the agent
(``continue: false`` is ignored), so a stop is answered by ``preToolUse``, which refuses every tool call
from the next one on (nothing more is written), and the runner ends the process at its next tick.

Copilot CLI loads the worktree's own project settings (``.github/hooks/*.json``: hooks that run as ``bash``
commands; ``.github/copilot/settings.json``: inline hooks; ``.mcp.json`` / ``.github/mcp.json``: MCP servers;
``.github/agents/``: custom agents with MCP servers and hooks of their own, the model may hand work to one;
``.github/skills/``, ``.agents/skills/``, ``.claude/skills/``: skills whose ``allowed-tools`` need no rule) once
its folder trust is given: a person who trusted their repository's main checkout, or a folder above it, in Copilot
(``trustedFolders``), or who set COPILOT_ALLOW_ALL=true, has a task worktree's loaded. So the adapter starts no
Copilot while they are there and not trusted by this user (`git nerve trust`, issue 35:
:data:`git_nerve.trust.COPILOT`; command.refuse_untrusted); it never passes ``--trust-folder``.

The model is the user's: a GitHub Copilot login, or BYOK (``COPILOT_PROVIDER_BASE_URL``, ``COPILOT_MODEL``,
``COPILOT_PROVIDER_API_KEY``, ``COPILOT_PROVIDER_TYPE``), which needs no GitHub login.
"""

from __future__ import annotations

import json
import os
import re

from ...trust import AGENT_SETTINGS_DIRS, AGENT_SETTINGS_FILES, COPILOT
from .command import CommandAdapter, Invocation, adapter_factory, extras, model_flag, options, probe

#: The Copilot CLI version the real-CLI suite runs (tests/test_real_hook_notes.py).
TESTED_VERSION = "1.0.102"

_model = model_flag("--model")

#: git subcommands a role may run (Copilot matches a rule against the command's leading words).
GIT_ALLOWED = ("add", "commit", "status", "diff", "log", "show", "rev-parse", "ls-files", "branch", "nerve")
DENIED = ("shell(git push)", "shell(git config)", "shell(git remote)", "shell(git -c)", "shell(git -C)",
          "shell(curl)", "shell(wget)", "url")
#: the provider's and GitHub's credentials: never in the agent's shell or MCP servers
SECRETS = ("COPILOT_PROVIDER_API_KEY", "COPILOT_PROVIDER_BEARER_TOKEN", "COPILOT_GITHUB_TOKEN", "GH_TOKEN",
           "GITHUB_TOKEN")

SANDBOX = ("Copilot CLI permission rules (prompt mode: what no --allow-tool rule allows is refused): file writes "
           "in the worktree, shell only git add/commit/status/diff/log/show, `git nerve` and the test command's program; "
           "git push/config/remote, URLs and writes to the agent CLIs' project settings denied (no OS sandbox)")


#: programs never allowed as a whole (a test command starting with one of them stays refused)
NEVER_WHOLE = frozenset({"sh", "bash", "zsh", "dash", "fish", "env", "sudo", "git", "curl", "wget", "ssh", "nc",
                         "npm", "npx", "pip", "pip3", "apt", "apt-get", "xargs", "nohup", "timeout", "nice"})


def allow_rules(test_command: str) -> list[str]:
    """Copilot CLI's rules name a program (``shell(python3)``) or a git-style subcommand (``shell(git add)``),
    never a whole command line: the test command is allowed through its program, with any arguments (no wider
    than the test command itself, which runs code the agent can edit; a shell, git or a network tool never)."""
    rules = ["write", *(f"shell(git {sub})" for sub in GIT_ALLOWED)]
    words = (test_command or "").split()
    if words and os.path.basename(words[0]) not in NEVER_WHOLE and "/" not in words[0]:
        rules.append(f"shell({words[0]})")
    return rules


def settings_denied(workdir: str) -> list[str]:
    """``write`` rules refusing the agent's file writes to every agent CLI's project settings in its worktree
    (another CLI's next role, or Copilot's own, would load them): the folders' files and the files, by absolute path."""
    root = os.path.realpath(workdir)
    return [*(f"write({root}/{d}/**)" for d in AGENT_SETTINGS_DIRS), *(f"write({root}/{f})" for f in AGENT_SETTINGS_FILES)]


def _argv(a: CommandAdapter) -> list[str]:
    own: list[tuple[str, str | None]] = [
        ("-s", None), ("--no-auto-update", None), ("--no-ask-user", None), ("--disallow-temp-dir", None),
        ("--disable-builtin-mcps", None), ("--no-color", None),
        ("--secret-env-vars", ",".join(SECRETS)),
    ]
    model = [] if "--model" in (a.extra_args or ()) else _model(a.model)
    return [a.binary, *options(own, a.extra_args), *model, *extras(a)]


#: Copilot CLI's hook events git-nerve answers (camelCase: the payload Copilot CLI documents for its own hooks)
HOOK_EVENTS = ("postToolUse", "preToolUse")


def plugin(tmpdir: str, command: str) -> str:
    """A plugin directory holding git-nerve's notes hooks for one run (what ``--plugin-dir`` loads)."""
    root = os.path.join(tmpdir, "nerve-copilot-plugin")
    os.makedirs(root, mode=0o700, exist_ok=True)
    with open(os.path.join(root, "plugin.json"), "w", encoding="utf-8") as fh:
        json.dump({"name": "git-nerve-notes", "description": "git-nerve: the person's notes and stops, mid-run",
                   "version": "1.0.0", "hooks": "hooks.json"}, fh, indent=1)
    entry = [{"type": "command", "bash": command, "timeoutSec": 15}]
    with open(os.path.join(root, "hooks.json"), "w", encoding="utf-8") as fh:
        json.dump({"version": 1, "hooks": {event: entry for event in HOOK_EVENTS}}, fh, indent=1)
    return root


#: where Copilot CLI writes its final usage statistics (``--usage-output-file``), in the run's private directory
USAGE_FILE = "copilot-usage.json"


def _report(adapter: CommandAdapter, stdout: str, inv: Invocation):
    """Copilot CLI's usage as it wrote it to :data:`USAGE_FILE` (none there: not reported)."""
    from . import usage

    return usage.copilot(inv.private_text(USAGE_FILE), stdout)


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    from .claude import notes_command

    overridden = {x.split("=", 1)[0] for x in (adapter.extra_args or ()) if x.startswith("-")}
    rules: list[str] = []
    if "--allow-tool" not in overridden:
        for rule in allow_rules(inv.ctx.test_command):
            rules.append(f"--allow-tool={rule}")
    if "--deny-tool" not in overridden:
        for rule in (*DENIED, *settings_denied(inv.workdir)):
            rules.append(f"--deny-tool={rule}")
    rules.append(f"--usage-output-file={os.path.join(inv.tmpdir, USAGE_FILE)}")
    command = notes_command(inv, "copilot")
    if command is not None:
        rules.append(f"--plugin-dir={plugin(inv.tmpdir, command)}")
    inv.argv[1:1] = rules
    inv.env.setdefault("NO_COLOR", "1")
    # the person's COPILOT_ALLOW_ALL approves every tool call and trusts the worktree's own hooks and MCP servers
    # (Copilot CLI 1.0.102): the rules above are the run's, never a blanket approval
    inv.env.pop("COPILOT_ALLOW_ALL", None)


# -- failures the exit status hides ---------------------------------------------------------

_AUTH = re.compile(
    r"Authentication failed with provider[^\n]*|Incorrect API key|invalid_api_key|Invalid API key|"
    r"No authentication information found|Please run /login|not logged in",
    re.IGNORECASE,
)


def diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    """A refused key or a missing login, seen on stderr while Copilot CLI runs or after it ends (1.0.102:
    "Authentication failed with provider at URL (HTTP 401)."). Only stderr: stdout is the agent's answer."""
    m = _AUTH.search(stderr)
    if m is None:
        return None
    found = " ".join(m.group(0).split()).rstrip(".")
    if re.search(r"login|authentication information", found, re.IGNORECASE):
        return (f"no usable credentials ({found}): log in with `copilot login`, or set COPILOT_PROVIDER_BASE_URL "
                "and COPILOT_MODEL for your own provider")
    return f"the model provider refused the key ({found}): check COPILOT_PROVIDER_API_KEY"


def checks(adapter: CommandAdapter) -> list[str]:
    ver = probe([adapter.binary, "--version"], env={"NO_COLOR": "1"})
    if not ver.ok:
        return [ver.error]
    problems: list[str] = []
    m = re.search(r"(\d+)\.(\d+)\.(\d+)", ver.stdout)
    if m is None:
        problems.append(f"`{adapter.binary} --version` printed no version")
    elif tuple(int(x) for x in m.groups()) < (1, 0, 102):
        problems.append(f"copilot {m.group(0)} is older than {TESTED_VERSION}, the version git-nerve is tested with")
    helped = probe([adapter.binary, "--help"], env={"NO_COLOR": "1"}).stdout
    for flag in ("--allow-tool", "--deny-tool", "--plugin-dir", "--secret-env-vars", "--disallow-temp-dir"):
        if flag not in helped:
            problems.append(f"`{adapter.binary} --help` does not list {flag}")
    if not (os.environ.get("COPILOT_PROVIDER_BASE_URL") or any(
            os.environ.get(k) for k in ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"))) and not os.path.isdir(
            os.path.join(os.path.expanduser("~"), ".copilot")):
        problems.append("copilot has no model: log in once with `copilot login`, or set COPILOT_PROVIDER_BASE_URL "
                        "and COPILOT_MODEL (BYOK)")
    return problems


create_copilot = adapter_factory(
    "copilot", "copilot",
    build=_argv, prompt_via="stdin", prepare=_prepare, report=_report, diagnose=diagnose, checks=checks, sandbox=SANDBOX,
    env_names=("COPILOT_*", "GH_*", "GITHUB_TOKEN"), state_dirs=(".copilot",), project_settings=COPILOT,
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
copilot_adapter = create_copilot()

__all__ = ["SANDBOX", "TESTED_VERSION", "allow_rules", "copilot_adapter", "create_copilot", "plugin"]
