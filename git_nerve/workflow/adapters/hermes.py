"""Nous Research's Hermes agent (PyPI ``hermes-agent``): `hermes -z PROMPT` runs one
prompt and prints the final answer.

* **Prompt**: ``-z`` takes the prompt in argv only (no stdin, no file option), so
  argv carries a one-line pointer to the private prompt file; the agent reads it
  with its ``read_file`` tool.
* **Confinement**: ``hermes -z`` turns its approval prompts off itself
  (``HERMES_YOLO_MODE=1``, unconditionally). What still holds under that mode is
  Hermes's own rule layer, and the adapter sets both parts of it:

  - ``approvals.deny`` (fnmatch globs that block a terminal command before any
    bypass): every command whose start, or any command start inside it (Hermes
    marks them after ``&&``, ``;``, ``|``, subshells), is not ``git``, ``git
    nerve ...`` or the repository's test command is refused; so are redirections,
    backquotes, ``$(...)`` and the git options that run programs or leave the
    worktree (``-c``, ``-C``, ``--exec-path``, ``--git-dir``, ``--work-tree``,
    ``config``);
  - ``HERMES_WRITE_SAFE_ROOT`` = the worktree: its file tools write nowhere else;
  - ``--toolsets terminal,file``: no code execution tool (it would run Python
    outside the terminal rules), no sub-agents, no web, no memory writes.

  The rules go into a private copy of the user's Hermes home (``HERMES_HOME`` in
  the run's private directory: the user's ``config.yaml`` with the adapter's
  ``approvals`` block appended, every other entry linked), so the user's own
  provider, keys and memories are used and their config is never changed.
  Hermes has no OS sandbox: an allowed command runs with the user's rights.
* Hermes prints an API failure (``HTTP 401: ...``) as its answer and exits 0:
  :func:`diagnose` catches it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence

from .command import PROMPT_FILE, CommandAdapter, Invocation, adapter_factory, extras, options, probe

POINTER = ("Your complete instructions are in the file {path}. Read that file with your read_file tool "
           "first, then do exactly what it says.")
#: git options and subcommands that run another program or reach outside the worktree.
GIT_DENIED = ("git -c*", "git --exec-path*", "git --git-dir*", "git --work-tree*", "git config*", "git -C*")
#: Shell syntax that writes files or runs commands the command-start rules cannot see.
SYNTAX_DENIED = ("*>*", "*`*", "*$(*", "*<(*")


def _glob_escape(ch: str) -> str:
    return f"[{ch}]" if ch in "[]*?!" else ch


def _not_starting_with(prefixes: Sequence[str]) -> list[str]:
    """fnmatch globs matching every string that starts with none of ``prefixes`` (all lowercase)."""
    globs: list[str] = []
    nodes = {""}
    for p in prefixes:
        nodes.update(p[:i] for i in range(len(p)))
    complete = set(prefixes)
    for node in sorted(nodes):
        if any(node.startswith(c) for c in complete):
            continue  # already allowed
        nexts = sorted({p[len(node)] for p in prefixes if p.startswith(node) and len(p) > len(node)})
        # a class of the characters that continue an allowed prefix; '-' last, ']' first (fnmatch rules)
        body = "".join(c for c in nexts if c not in "-]!")
        if "]" in nexts:
            body = "]" + body
        if "!" in nexts:
            body += "!"
        if "-" in nexts:
            body += "-"
        stem = "".join(_glob_escape(c) for c in node)
        globs.append(f"{stem}[!{body}]*")
        if node:
            globs.append(stem)  # the string ends inside an allowed prefix
    return globs


def deny_rules(test_command: str = "") -> list[str]:
    """``approvals.deny``: only git, `git nerve` and the test command may start a command."""
    allowed = ["git ", "git"]
    if test_command.strip():
        allowed.append(" ".join(test_command.lower().split()))
    allowed = sorted(set(allowed))
    starts = _not_starting_with(allowed)
    rules = [*starts, *("*\n" + g for g in starts)]
    rules += [*GIT_DENIED, *("*\n" + g for g in GIT_DENIED), *("*&& " + g for g in GIT_DENIED), *SYNTAX_DENIED]
    return rules


def _argv(a: CommandAdapter) -> list[str]:
    own: list[tuple[str, str | None]] = [("--toolsets", "terminal,file")]
    if a.model:
        own.append(("--model", a.model))
    return [a.binary, *options(own, a.extra_args), *extras(a), "-z", PROMPT_FILE]


def user_hermes_home(env: Mapping[str, str]) -> str:
    return env.get("HERMES_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".hermes")


def _prepare(adapter: CommandAdapter, inv: Invocation) -> None:
    # argv: a pointer to the prompt file, never the prompt itself
    assert inv.prompt_file is not None
    at = inv.argv.index(inv.prompt_file)
    inv.argv[at] = POINTER.format(path=inv.prompt_file)
    # a private Hermes home: the user's, with the adapter's approval rules appended to config.yaml
    user_home = user_hermes_home(inv.env)
    home = os.path.join(inv.tmpdir, "hermes-home")
    os.makedirs(home, mode=0o700)
    config_text = ""
    if os.path.isdir(user_home):
        for entry in os.listdir(user_home):
            if entry == "config.yaml":
                with open(os.path.join(user_home, entry), encoding="utf-8") as fh:
                    config_text = fh.read()
                continue
            os.symlink(os.path.join(user_home, entry), os.path.join(home, entry))
    rules = deny_rules(inv.ctx.test_command)
    block = "\napprovals:\n  mode: manual\n  deny:\n" + "".join(f"  - {json.dumps(r)}\n" for r in rules)
    with open(os.path.join(home, "config.yaml"), "w", encoding="utf-8") as fh:
        fh.write(config_text.rstrip("\n") + "\n" + block)
    inv.env["HERMES_HOME"] = home
    _keep_git_nerve(inv.env)
    inv.env["HERMES_WRITE_SAFE_ROOT"] = inv.workdir
    inv.env.pop("HERMES_EXEC_ASK", None)


def _keep_git_nerve(env: dict[str, str]) -> None:
    """Hermes runs commands in a login shell, whose /etc/profile resets PATH: `git nerve` would be lost
    when git-nerve is not on the login PATH. A git alias (in the environment, not in any config file)
    names it by its absolute path; git still prefers a `git-nerve` it finds on PATH."""
    nerve = shutil.which("git-nerve", path=env.get("PATH"))
    if nerve is None:
        return
    try:
        n = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        return
    env[f"GIT_CONFIG_KEY_{n}"] = "alias.nerve"
    env[f"GIT_CONFIG_VALUE_{n}"] = "!" + shlex.quote(os.path.abspath(nerve))
    env["GIT_CONFIG_COUNT"] = str(n + 1)


_AUTH = re.compile(r"^.*(HTTP 401|AuthenticationError|Incorrect API key|invalid[_ ]api[_ ]key|Unauthorized).*$",
                   re.M | re.I)
_FAILED = re.compile(r"^hermes -z: (agent failed: .*|no final response.*)$", re.M)


def diagnose(code: int | None, stdout: str, stderr: str) -> str | None:
    """Hermes answers an API failure as text (``HTTP 401: ...``) and exits 0."""
    for text in (stdout, stderr):
        m = _AUTH.search(text)
        if m:
            return (f"the model API refused the key: {m.group(0).strip()[:300]} "
                    "(check the api_key / key_env of the Hermes provider)")
    if code is not None:
        m = _FAILED.search(stderr)
        if m:
            return m.group(1).strip()[:300]
        if code == 0 and stdout.lstrip().startswith("HTTP ") and "\n" not in stdout.strip():
            return f"the model API failed: {stdout.strip()[:300]}"
    return None


def checks(adapter: CommandAdapter) -> list[str]:
    """The installed hermes has `-z` and `--toolsets` (what this adapter uses: hermes-agent 0.19+)."""
    proc = probe([adapter.binary, "--help"])
    if not proc.ok:
        return [proc.error]
    text = proc.text
    return [f"`{adapter.binary}` has no {flag} option (this adapter needs hermes-agent 0.19 or later)"
            for flag in ("-z", "--toolsets") if flag not in text]


create_hermes = adapter_factory(
    "hermes", "hermes",
    build=_argv, prompt_via="file", prepare=_prepare, diagnose=diagnose, checks=checks,
    sandbox="Hermes rules: approvals.deny lets the terminal run only git, `git nerve` and the test command; "
            "file writes only in the worktree (HERMES_WRITE_SAFE_ROOT); tools: terminal, file (no OS sandbox)",
    env_names=("HERMES_*", "OPENAI_*", "OPENROUTER_*"), state_dirs=(".hermes", "$HERMES_HOME"),
)


#: The default instance: sensible defaults, tuned per repository in nerve.toml.
hermes_adapter = create_hermes()

__all__ = ["create_hermes", "deny_rules", "hermes_adapter"]
