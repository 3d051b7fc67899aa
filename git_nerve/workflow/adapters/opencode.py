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

The person's notes and a stop reach the agent mid-run through an opencode plugin git-nerve writes for the run
into its private directory (named by the run's ``OPENCODE_CONFIG`` file, never the worktree): after each tool
call (``tool.execute.after``) it hands over the notes with ``git nerve notes --hook opencode``, appended to
that tool's output, in the model's next request. The plugin starts no process while nothing is pending for
the task (it looks for the files the sh gate of the other CLIs looks for). A stop aborts the session (opencode
ends the run itself) after the call in flight, and ``tool.execute.before`` refuses any call still asked for.

opencode also loads its own project settings from the worktree (``opencode.json(c)``, ``.opencode/``: plugins and
tools that run as code, MCP servers, commands), which an agent or a teammate's commit may have written: opencode
starts only once this user trusted their exact content (`git nerve trust`, issue 35:
:data:`git_nerve.trust.OPENCODE`); until then the role's agent is not started (one line naming them and
`git nerve trust`: command.refuse_untrusted, as for Claude Code, Gemini CLI and Qwen Code), since 1.18.33 loads a
project's plugins even with ``OPENCODE_DISABLE_PROJECT_CONFIG``. Its edit rules refuse the agent's edits of those
files and of the other CLIs' project settings (``.claude/``, ``.mcp.json``, ``.gemini/``, ``.qwen/``).

The model and provider are the user's own opencode setup (``~/.config/opencode``,
``--model`` from nerve.toml ``[adapters.opencode] model`` as ``provider/model``).
"""

from __future__ import annotations

import json
import os
import re

from ...trust import AGENT_SETTINGS_DIRS, AGENT_SETTINGS_FILES, OPENCODE
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


#: the agent's edits refused: every agent CLI's project settings (opencode matches an edit's path relative to the
#: worktree, ``*`` spanning ``/``); the real gate is the trust of their content (``project_settings``: the adapter
#: starts no opencode while its own are untrusted, command.refuse_untrusted)
EDIT_DENIED = (*(p for d in AGENT_SETTINGS_DIRS for p in (d, f"{d}/*")), *AGENT_SETTINGS_FILES)


def permission(test_command: str = "") -> dict:
    """The permission rules (opencode: the last matching pattern wins)."""
    bash: dict[str, str] = {"*": "deny", "git *": "allow", "git": "allow"}
    if test_command:
        bash[test_command] = "allow"
        bash[f"{test_command} *"] = "allow"
    for pattern in GIT_DENIED:
        bash[pattern] = "deny"
    return {
        "read": "allow", "edit": {"*": "allow", **{p: "deny" for p in EDIT_DENIED}}, "glob": "allow", "grep": "allow", "list": "allow", "todowrite": "allow",
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


#: the plugin (ES module) that hands the notes over: ``ARGV`` is `git nerve notes --hook opencode`, ``GATE`` the
#: files whose presence says something is pending for the task (empty: always ask). Its hook input is Claude
#: Code's (steer/notes_hook.py answers it as it answers Claude Code).
PLUGIN = """// git-nerve's notes and stops for one opencode run (written by git-nerve: workflow/adapters/opencode.py)
import { existsSync } from "node:fs"
import { spawnSync } from "node:child_process"

const ARGV = %(argv)s
const GATE = %(gate)s

function ask(event, tool, cwd) {
  if (GATE.length && !GATE.some((path) => existsSync(path))) return null // nothing pending: no process at all
  const input = JSON.stringify({ hook_event_name: event, cwd, tool_name: tool })
  const run = spawnSync(ARGV[0], ARGV.slice(1), { input, cwd, encoding: "utf8", timeout: 15000 })
  if (run.status !== 0 || !run.stdout || !run.stdout.trim()) return null
  try { return JSON.parse(run.stdout) } catch { return null }
}

async function end(client, id) {
  try { await client.session.abort({ path: { id } }) } catch {}
}

export const GitNerveNotes = async ({ client, directory }) => ({
  "tool.execute.before": async (input) => {
    const said = ask("PreToolUse", input.tool, directory)
    const decision = said && said.hookSpecificOutput
    if (decision && decision.permissionDecision === "deny") {
      await end(client, input.sessionID)
      throw new Error(decision.permissionDecisionReason)
    }
  },
  "tool.execute.after": async (input, output) => {
    const said = ask("PostToolUse", input.tool, directory)
    if (!said) return
    const text = said.continue === false ? said.systemMessage : said.hookSpecificOutput && said.hookSpecificOutput.additionalContext
    if (text) output.output = `${output.output ?? ""}\n\n${text}`
    if (said.continue === false) await end(client, input.sessionID)
  },
})
"""


def plugin(tmpdir: str, argv: list[str], gate: tuple[str, str] | None) -> str:
    """Write the notes plugin for one run; its ``file://`` URL (what the run's config lists under ``plugin``)."""
    path = os.path.join(tmpdir, "nerve-opencode-notes.js")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(PLUGIN % {"argv": json.dumps(argv), "gate": json.dumps(list(gate or ()))})
    return "file://" + path


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    from .claude import notes_parts

    if "--title" not in {x.split("=", 1)[0] for x in (adapter.extra_args or ())}:
        # a title of ours: opencode would otherwise ask the model for one, a request its JSON output never
        # reports (its usage would be missing from the round's: issue 39)
        at = inv.argv.index("run") + 1
        inv.argv[at:at] = ["--title", f"{inv.ctx.task_id or 'task'}: {inv.ctx.role or 'agent'}"]
    settings = dict(SETTINGS)
    parts = notes_parts(inv, "opencode")
    if parts is not None:
        settings["plugin"] = [plugin(inv.tmpdir, *parts)]
    path = os.path.join(inv.tmpdir, "opencode.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(settings, fh)
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
    project_settings=OPENCODE, env_names=("OPENCODE_*", "OPENAI_*"), state_dirs=(".local/share/opencode", ".config/opencode", ".cache/opencode", ".local/state/opencode"),
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
opencode_adapter = create_opencode()

__all__ = ["create_opencode", "opencode_adapter", "permission", "plugin"]
