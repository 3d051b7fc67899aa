"""opencode (npm ``opencode-ai``): `opencode run` reads the prompt on standard input
and exits when the session is idle; the final answer goes to stdout, the tool log
to stderr.

Confinement is opencode's own permission layer, set through ``OPENCODE_PERMISSION``
(applied after every config file, so neither the user's nor the repository's
opencode.json can widen it): edits are allowed (inside the project only:
``external_directory`` is denied), shell commands are denied except ``git``
(minus the options that reach outside the worktree: ``-c``, ``-C``,
``--exec-path``, ``config``), ``git nerve ...`` and the repository's test
command; web fetch/search, sub-agents and questions are denied. Nothing is ever
"ask": a rule that would ask a person mid-run does not exist here. opencode has
no OS sandbox: a command the rules allow runs with the user's rights.

The model and provider are the user's own opencode setup (``~/.config/opencode``,
``--model`` from nerve.toml ``[adapters.opencode] model`` as ``provider/model``).
"""

from __future__ import annotations

import json
import os
import re

from . import usage
from .command import CommandAdapter, Invocation, adapter_factory, extras, options, probe

#: opencode's settings for an unattended run (merged over the user's config).
SETTINGS = {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled", "snapshot": False}

#: Environment: no update check, no models.dev fetch (the user's provider config names the model),
#: no reading of another agent's (Claude Code's) settings.
ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
}

#: git options and subcommands that reach outside the worktree (run a program, switch repository).
GIT_DENIED = ("git -c*", "git -C*", "git --exec-path*", "git --git-dir*", "git --work-tree*", "git config*")


def permission(test_command: str = "") -> dict:
    """The permission rules (opencode: the last matching pattern wins)."""
    bash: dict[str, str] = {"*": "deny", "git *": "allow", "git": "allow"}
    if test_command:
        bash[test_command] = "allow"
        bash[f"{test_command} *"] = "allow"
    for pattern in GIT_DENIED:
        bash[pattern] = "deny"
    return {
        "read": "allow", "edit": "allow", "glob": "allow", "grep": "allow", "list": "allow", "todowrite": "allow",
        "todoread": "allow", "bash": bash, "external_directory": "deny", "webfetch": "deny", "websearch": "deny",
        "codesearch": "deny", "task": "deny", "skill": "deny", "question": "deny", "doom_loop": "deny", "lsp": "deny",
    }


def _argv(a: CommandAdapter) -> list[str]:
    # --print-logs at ERROR: an API failure shows on stderr at once (the first one, in the title request,
    # comes seconds before the run's own `Error:` line), so diagnose stops a 401 early
    own: list[tuple[str, str | None]] = [("--format", "json"), ("--print-logs", None), ("--log-level", "ERROR")]
    if a.model:
        own.append(("--model", a.model))
    return [a.binary, "run", *options(own, a.extra_args), *extras(a)]


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    if "--title" not in {x.split("=", 1)[0] for x in (adapter.extra_args or ())}:
        # a title of ours: opencode would otherwise ask the model for one, a request its JSON output never
        # reports (its usage would be missing from the round's: issue 39)
        at = inv.argv.index("run") + 1
        inv.argv[at:at] = ["--title", f"{inv.ctx.task_id or 'task'}: {inv.ctx.role or 'agent'}"]
    path = os.path.join(inv.tmpdir, "opencode.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(SETTINGS, fh)
    inv.env.update(ENV)
    # opencode takes its project directory from $PWD, not from its working directory
    inv.env["PWD"] = inv.workdir
    inv.env["OPENCODE_CONFIG"] = path
    inv.env["OPENCODE_PERMISSION"] = json.dumps(permission(inv.ctx.test_command))


_ERROR = re.compile(r"^(?:\x1b\[[0-9;]*m)*Error: (?:\x1b\[[0-9;]*m)*(?P<msg>.+)$", re.M)
#: opencode's own log line (--print-logs): ``... level=ERROR ... error.error="AI_APICallError: <message>"``.
_LOGGED = re.compile(r'level=ERROR .*?error(?:\.error)?="(?:AI_\w+: )?(?P<msg>[^"]+)"')
_AUTH = re.compile(r"api key|unauthori[sz]ed|\b401\b|authentication|invalid[_ ]api[_ ]key", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    """opencode prints ``Error: <the provider's message>`` on stderr (exit 1) for an API failure; a refused
    tool call prints an ``Error:`` line too, and is the agent's business, not a failure of the run."""
    found = [m.group("msg") for m in _ERROR.finditer(stderr)] + [m.group("msg") for m in _LOGGED.finditer(stderr)]
    for raw in found:
        msg = _ANSI.sub("", raw).strip()
        if _AUTH.search(msg):
            return f"the model provider refused the key ({msg}): check the provider's apiKey / key env var"
    return None


def checks(adapter: CommandAdapter) -> list[str]:
    """The installed opencode runs, is a 1.x with `run --format` (what this adapter uses)."""
    proc = probe([adapter.binary, "run", "--help"])
    if not proc.ok:
        return [proc.error]
    text = proc.text
    problems = [f"`{adapter.binary} run` has no {flag} option (this adapter needs opencode 1.x)"
                for flag in ("--format", "--model") if flag not in text]
    return problems


create_opencode = adapter_factory(
    "opencode", "opencode",
    build=_argv, prompt_via="stdin", prepare=_prepare, diagnose=diagnose, checks=checks,
    report=lambda a, out, inv: usage.opencode(out, a.model),
    sandbox="opencode permission rules (OPENCODE_PERMISSION): edits inside the project, shell only git, "
            "`git nerve`, the test command; no web, no external directories (no OS sandbox)",
    env_names=("OPENCODE_*", "OPENAI_*"), state_dirs=(".local/share/opencode", ".config/opencode", ".cache/opencode", ".local/state/opencode"),
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
opencode_adapter = create_opencode()

__all__ = ["create_opencode", "opencode_adapter", "permission"]
