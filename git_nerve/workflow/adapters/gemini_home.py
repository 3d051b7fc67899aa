"""The Gemini home of one run (``GEMINI_CLI_HOME``): how the gemini adapter hands Gemini CLI its notes hooks.

Gemini CLI (0.61.0) reads hooks only from settings files: the worktree's ``.gemini/settings.json`` (which the
agent could change or commit), the user's ``~/.gemini/settings.json``, or a system settings file
(``GEMINI_CLI_SYSTEM_SETTINGS_PATH``) it loads only when the file and every directory above it belong to root
and are writable by no one else, which a normal user cannot make. ``GEMINI_CLI_HOME`` moves the whole user
home instead (``$GEMINI_CLI_HOME/.gemini``: settings, login, history), so each run gets one of its own in its
private directory (mode 0700, removed with it): the user's settings with git-nerve's hooks appended and a
symbolic link to each of the login files Gemini CLI reads there. The source is ``$GEMINI_CLI_HOME`` when the user
set one, else HOME.

Links, never copies: a copy of a login file in the run's private directory stayed there in clear when the
runner was killed (SIGKILL: no ``finally``). Gemini CLI (0.61.0) reads them through the link, writes them in place
(``writeFile``: a refreshed token reaches the user's file, as when they run it themselves), and its removals
(``rm``/``unlink``: a logout, the last MCP token) take the link, never the user's file. In a box
(:mod:`git_nerve.workflow.sandbox`) the files linked to are writable (``Invocation.writable``; ``~/.gemini`` is a
state directory of the adapter anyway).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping

from .command import Invocation

#: the variable that moves Gemini CLI's whole home (``$GEMINI_CLI_HOME/.gemini``: settings, login, history)
HOME_VAR = "GEMINI_CLI_HOME"
#: what a run's private home takes from the user's ``.gemini`` besides settings.json: the login files Gemini CLI
#: 0.61.0 reads there (its Google login, the account's name, the encrypted-file keychain a
#: GEMINI_FORCE_ENCRYPTED_FILE_STORAGE login uses, MCP servers' and remote agents' OAuth tokens), its
#: installation id, and the ``.env`` it loads its variables from (GEMINI_API_KEY ...)
HOME_FILES = ("oauth_creds.json", "google_accounts.json", "gemini-credentials.json", "mcp-oauth-tokens.json",
              "a2a-oauth-tokens.json", "installation_id", ".env")
#: the hook events of a run: the notes after each tool call; a stop ends the run there and before the next one
NOTES_EVENTS = ("AfterTool", "BeforeTool")
#: milliseconds Gemini CLI gives one hook (its timeouts are in ms; 15 s, as Claude Code's)
HOOK_TIMEOUT_MS = 15_000


def user_home(env: Mapping[str, str]) -> str:
    """The home Gemini CLI would use for this environment (the directory holding ``.gemini``)."""
    return env.get(HOME_VAR) or env.get("HOME") or os.path.expanduser("~")


def _jsonc(text: str) -> object:
    """A settings file as Gemini CLI reads it: JSON with // and /* */ comments (strip-json-comments)."""
    try:
        return json.loads(text)
    except ValueError:
        bare = re.sub(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', lambda m: m.group(0) if m.group(0)[0] == '"' else "",
                      text, flags=re.S)
        return json.loads(bare)


def private_home(inv: Invocation, command: str) -> str:
    """This run's Gemini home (``GEMINI_CLI_HOME``), in its private directory: the user's settings with the notes
    hooks running ``command`` appended, and a link to each of their :data:`HOME_FILES` (no copy: see the module).
    A settings file that does not parse is copied as it is, without hooks (Gemini CLI then says what is wrong
    with it)."""
    from .claude import hooks, with_hooks

    source = os.path.abspath(os.path.join(user_home(inv.env), ".gemini"))
    home = os.path.join(inv.tmpdir, "gemini-home")
    own = os.path.join(home, ".gemini")
    os.makedirs(own, mode=0o700)
    for name in HOME_FILES:
        theirs = os.path.join(source, name)
        if os.path.isfile(theirs):
            os.symlink(theirs, os.path.join(own, name))
            inv.writable.append(os.path.realpath(theirs))
    theirs, settings = os.path.join(source, "settings.json"), os.path.join(own, "settings.json")
    try:
        with open(theirs, encoding="utf-8") as fh:
            text = fh.read()
        data = _jsonc(text) if text.strip() else {}
    except OSError:
        data = {}
    except ValueError:  # not JSON, not UTF-8
        data = None
    if not isinstance(data, dict):
        shutil.copyfile(theirs, settings)
        os.chmod(settings, 0o600)
        return home
    with open(os.open(settings, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as fh:
        json.dump(with_hooks(data, hooks(command, NOTES_EVENTS, timeout=HOOK_TIMEOUT_MS)), fh, indent=1)
    return home


__all__ = ["HOME_FILES", "HOME_VAR", "NOTES_EVENTS", "private_home", "user_home"]
