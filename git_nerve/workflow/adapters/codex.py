"""OpenAI Codex CLI: `codex exec -` reads the prompt from standard input; progress goes
to stderr and only the final agent message to stdout.

Confinement is Codex's own sandbox (bubblewrap on Linux, bundled with the CLI),
never ``danger-full-access``: ``--sandbox workspace-write`` lets commands write
the task's worktree and nothing else but what ``git commit`` in a *linked*
worktree writes (the worktree's git dir, the repository's objects, refs and
logs, and git-nerve's bus for the hooks and `git nerve thread`), a private
temporary directory instead of /tmp, and no network. Approvals are never asked
(``approval_policy = "never"``): what the sandbox refuses stays refused.
Inside git-nerve's own box (issue 41, :mod:`..sandbox`) Codex's bubblewrap cannot be built: there it runs
``--sandbox danger-full-access`` and the box confines its commands.
``extra_args`` can override any of these flags (``--sandbox read-only``).

The person's notes and a stop reach the agent mid-run through Codex's own hooks (Claude Code's protocol):
``PostToolUse`` runs ``git nerve notes --hook codex`` behind the sh gate Claude Code's runs use (no Python
while nothing is pending) and the notes become ``additionalContext`` in the model's next request; once the
task is stopped ``PreToolUse`` refuses every tool call (Codex's hooks cannot end the agent) and the runner
ends the process at its next tick. The hooks are given for this run only, as ``-c`` overrides (Codex's
session-flags layer: never a file in the worktree, nothing written to ``$CODEX_HOME``), with the trust Codex
asks of every hook that is not managed given for exactly these two, by their hash (``hooks.state``), never
``--dangerously-bypass-hook-trust``, which would run every untrusted hook (a project's own included).

Codex also loads the worktree's own ``.codex/`` (config.toml: MCP servers it starts outside its sandbox, hooks;
exec rules, agents, skills) once its own trust of the project is given, which it records for the repository's main
checkout: a person who trusted their repository in Codex has it loaded in every task's worktree. The adapter starts
Codex only once this user trusted that content (`git nerve trust`, issue 35: :data:`git_nerve.trust.CODEX`;
command.refuse_untrusted).

Codex reads its model provider and credentials from the user's own
configuration (``$CODEX_HOME/config.toml``, ``codex login``); a provider must
use ``wire_api = "responses"``. Codex exits 0 after an API error such as a 401:
the adapter recognises its ``ERROR: unexpected status`` lines and stops it at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from ...trust import CODEX
from . import usage
from .command import CommandAdapter, Invocation, adapter_factory, extras, model_flag, options, probe

#: The Codex CLI version the real-CLI suite runs (tests/test_real_agents.py).
TESTED_VERSION = "0.169.0"

_model = model_flag("--model")

SANDBOX = (
    "Codex sandbox (bubblewrap): workspace-write limited to the worktree, the git paths a commit writes and a "
    "private temp dir; no network; approvals never asked"
)

_STATUS = re.compile(r"ERROR: unexpected status (\d{3})[^\n]*")


def _argv(a: CommandAdapter) -> list[str]:
    own = [("--sandbox", "workspace-write"), ("--skip-git-repo-check", None), ("--color", "never"), ("--json", None)]
    return [a.binary, "exec", *options(own, a.extra_args), *_model(a.model), *extras(a), "-"]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(a: CommandAdapter, inv: Invocation) -> None:
    """Writable roots for a commit in a linked worktree, a private TMPDIR, no /tmp, no network, no approvals."""
    tmp = os.path.join(inv.tmpdir, "tmp")
    os.makedirs(tmp, mode=0o700, exist_ok=True)
    roots = [tmp]
    if inv.git_dir:
        roots.append(inv.git_dir)
    if inv.common_dir:
        roots += [os.path.join(inv.common_dir, d) for d in ("objects", "refs", "logs", "nerve")]
    boxed = getattr(inv.ctx.start, "sandbox", "none") != "none"
    if boxed and "--sandbox" not in (a.extra_args or ()) and "--sandbox" in inv.argv:
        # in git-nerve's box (issue 41) Codex's own bubblewrap cannot be built (its mounts need what the box
        # keeps read-only): the box confines its commands instead
        inv.argv[inv.argv.index("--sandbox") + 1] = "danger-full-access"
    overrides = [
        "approval_policy=\"never\"",
        # a login shell would reset PATH from /etc/profile: `git nerve` and the test command's tools must be found
        "allow_login_shell=false",
        f"sandbox_workspace_write.writable_roots={_toml_list(roots)}",
        "sandbox_workspace_write.network_access=false",
        "sandbox_workspace_write.exclude_slash_tmp=true",
        "sandbox_workspace_write.exclude_tmpdir_env_var=true",
    ]
    given = {x.split("=", 1)[0] for i, x in enumerate(a.extra_args or ()) if i and (a.extra_args or ())[i - 1] == "-c"}
    if not any(g.strip() == "hooks" or g.strip().startswith("hooks.") for g in given):  # theirs win whole
        overrides += notes_hooks(inv)
    extra = [arg for o in overrides if o.split("=", 1)[0] not in given for arg in ("-c", o)]
    inv.argv[2:2] = extra  # after `codex exec`
    inv.env["TMPDIR"] = tmp
    # the key variable the person's own provider config names is codex's own (it receives only its declared ones)
    key = _provider_env_key(inv.env.get("CODEX_HOME") or os.path.join(inv.env.get("HOME") or "~", ".codex"))
    if key and key in os.environ:
        inv.env.setdefault(key, os.environ[key])


def _errors(stdout: str) -> str:
    """The errors Codex reported in its ``exec --json`` events (``error``, ``turn.failed``), one per line: never
    the output of the commands it ran, which the events carry too."""
    found = []
    for line in stdout.splitlines():
        try:
            obj = json.loads(line) if line.startswith("{") else None
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") in ("error", "turn.failed"):
            err = obj.get("error") if isinstance(obj.get("error"), dict) else obj
            if isinstance(err.get("message"), str):
                found.append("ERROR: " + err["message"])
    return "\n".join(found)


#: the hook events git-nerve answers (steer/notes_hook.py: ``--hook codex``), with Codex's key label for each
NOTES_EVENTS = {"PostToolUse": "post_tool_use", "PreToolUse": "pre_tool_use"}
HOOK_TIMEOUT = 15
#: where Codex 0.169 says a ``-c`` hook comes from (the key its ``hooks.state`` trust is recorded under)
SESSION_FLAGS = "/<session-flags>/config.toml"


def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string without \u escapes is a TOML basic string


def trust_hash(event: str, command: str) -> str:
    """The hash Codex 0.169 trusts a hook by (its normalized identity: event label, matcher, the one handler
    with its defaults; keys sorted, compact JSON, SHA-256). Checked against the real CLI's own ``hooks/list``
    in tests/test_real_codex.py, and by the real-CLI notes test (a wrong hash: the hook never runs)."""
    identity = {"event_name": NOTES_EVENTS[event], "matcher": "*",
                "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT, "async": False}]}
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def hook_overrides(command: str) -> list[str]:
    """``-c`` values: the notes hooks (one matcher group each, so each is ``<event>:0:0`` in the session-flags
    layer) and the trust of exactly these two, by hash (a hook not given here stays as trusted as it was)."""
    out, state = [], []
    for event, label in NOTES_EVENTS.items():
        out.append(f'hooks.{event}=[{{matcher="*",hooks=[{{type="command",command={_toml_str(command)},'
                   f'timeout={HOOK_TIMEOUT}}}]}}]')
        state.append(f"{_toml_str(f'{SESSION_FLAGS}:{label}:0:0')}={{trusted_hash={_toml_str(trust_hash(event, command))}}}")
    return [*out, "hooks.state={" + ",".join(state) + "}"]


def notes_hooks(inv: Invocation) -> list[str]:
    """This run's notes hooks as ``-c`` values ([] when git-nerve's executable is not found)."""
    from .claude import notes_command

    command = notes_command(inv, "codex")
    return hook_overrides(command) if command else []


def diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    m = _STATUS.search(stderr) or _STATUS.search(_errors(stdout))
    if not m:
        return None
    status = int(m.group(1))
    if status in (401, 403):
        return (f"Codex's model provider answered {status}: the API key was rejected (bad or missing key: the "
                "variable named by env_key in $CODEX_HOME/config.toml, or `codex login`)")
    return f"Codex's model provider failed: {m.group(0).strip()}"


def checks(a: CommandAdapter) -> list[str]:
    problems = []
    ver, helped = probe([a.binary, "--version"], timeout=30), probe([a.binary, "exec", "--help"], timeout=30)
    if not (ver.ok and helped.ok):
        return [ver.error or helped.error]
    version, helptext = ver.stdout.strip(), helped.stdout
    if TESTED_VERSION not in version:
        problems.append(f"{version or 'unknown version'} installed; the adapter is tested with codex-cli {TESTED_VERSION}")
    for flag in ("--sandbox", "--skip-git-repo-check", "--color"):
        if flag not in helptext:
            problems.append(f"`codex exec` of this version has no {flag} flag")
    home = os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")
    if not (os.path.exists(os.path.join(home, "auth.json")) or os.environ.get("OPENAI_API_KEY") or _provider_key(home)):
        problems.append(f"no credentials: run `codex login`, set OPENAI_API_KEY, or the env_key of a provider in {home}/config.toml")
    return problems


def _provider_key(home: str) -> bool:
    key = _provider_env_key(home)
    return bool(key and os.environ.get(key))


def _provider_env_key(home: str) -> str | None:
    """The variable the selected provider of ``$CODEX_HOME/config.toml`` reads its key from (its ``env_key``)."""
    try:
        import tomllib

        with open(os.path.join(home, "config.toml"), "rb") as fh:
            cfg = tomllib.load(fh)
    except (OSError, ValueError, ImportError):
        return None
    provider = (cfg.get("model_providers") or {}).get(cfg.get("model_provider") or "", {})
    key = provider.get("env_key") if isinstance(provider, dict) else None
    return key if isinstance(key, str) and key else None


create_codex = adapter_factory(
    "codex", "codex",
    build=_argv, prompt_via="stdin", prepare=prepare, diagnose=diagnose, checks=checks, sandbox=SANDBOX,
    report=lambda a, out, inv: usage.codex(out, a.model),
    env_names=("OPENAI_*", "CODEX_*"), state_dirs=(".codex", "$CODEX_HOME"), project_settings=CODEX,
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
codex_adapter = create_codex()

__all__ = ["codex_adapter", "create_codex", "hook_overrides", "trust_hash"]
