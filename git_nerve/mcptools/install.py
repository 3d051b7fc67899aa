"""`git nerve mcp install|uninstall`: register `git nerve mcp` with agent CLIs, each in its own format.

| CLI | user scope | project scope | entry |
|---|---|---|---|
| claude | ``~/.claude.json`` ``mcpServers`` | ``.mcp.json`` at the checkout's top | ``{"type": "stdio", "command", "args"}`` |
| codex | ``$CODEX_HOME/config.toml`` (``~/.codex``) | refused (Codex reads MCP servers per user) | ``[mcp_servers.nerve]`` (+ ``startup_timeout_sec``) |
| gemini | ``~/.gemini/settings.json`` ``mcpServers`` | ``.gemini/settings.json`` | ``{"command", "args", "timeout"}`` |
| qwen | ``~/.qwen/settings.json`` ``mcpServers`` | ``.qwen/settings.json`` | ``{"command", "args", "timeout"}`` |
| opencode | ``$XDG_CONFIG_HOME/opencode/opencode.json`` ``mcp`` | ``opencode.json`` | ``{"type": "local", "command": [...]}`` |

Every entry is named ``nerve`` and runs the absolute path of this git-nerve
executable with ``mcp``; the server finds its task from the directory the CLI
starts it in (a task's worktree). What was added is recorded in
``<git-common-dir>/nerve/mcp.json``; ``uninstall`` removes exactly that and
leaves every other byte of those files alone:

* JSON files are rewritten only when re-serialising them as they are gives back
  their exact bytes (the CLIs write them that way); otherwise the file is left
  alone with a one-line refusal that shows the entry to add by hand. A file that
  does not parse is refused the same way.
* TOML (Codex) gets a block appended; uninstall removes that very block.
* A file or directory that install created is removed again when it is left empty.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..git.destroy import replace_work_tree_file
from ..paths import discover
from ..trust import trust_again, trusted_agent_settings
from .names import SERVER_NAME, executable

CLIS = ("claude", "codex", "gemini", "qwen", "opencode")
GEMINI_TIMEOUT_MS = 600_000
CODEX_STARTUP_S = 30
RECORD = "mcp.json"


@dataclass
class Result:
    cli: str
    scope: str
    file: str
    action: str  #: installed, already, removed, refused, absent
    reason: str = ""

    def line(self) -> str:
        what = {"installed": "registered `git nerve mcp` as", "already": "already registered as",
                "removed": "removed", "absent": "nothing of ours in", "refused": "left alone:"}[self.action]
        if self.action == "refused":
            return f"{self.cli} ({self.scope}) {what} {self.file}: {self.reason}"
        tail = f" ({self.reason})" if self.reason else ""
        return f"{self.cli} ({self.scope}): {what} {SERVER_NAME!r} in {self.file}{tail}"

    def as_dict(self) -> dict[str, Any]:
        return {"cli": self.cli, "scope": self.scope, "file": self.file, "action": self.action, "reason": self.reason}


@dataclass
class Target:
    cli: str
    scope: str
    path: Path
    fmt: str  #: json | toml
    keys: tuple[str, ...] = ()  #: where the servers live in a JSON file
    entry: Any = None  #: the JSON value, or the TOML block
    created: list[str] = field(default_factory=list)


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def target(cli: str, scope: str, top: Path, exe: str) -> Target:
    argv = {"command": exe, "args": ["mcp"]}
    if cli == "claude":
        path = _home() / ".claude.json" if scope == "user" else top / ".mcp.json"
        return Target(cli, scope, path, "json", ("mcpServers",), {"type": "stdio", **argv, "env": {}})
    if cli in ("gemini", "qwen"):
        base = _home() if scope == "user" else top
        # timeout: Gemini CLI's own default for a call (10 min), stated because without it `mcp list` gives up
        # connecting after 5 s, and starting the server (importing the SDK) can take 2-4 s on a busy machine
        return Target(cli, scope, base / f".{cli}" / "settings.json", "json", ("mcpServers",),
                      {**argv, "timeout": GEMINI_TIMEOUT_MS})
    if cli == "opencode":
        if scope == "user":
            path = Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config") / "opencode" / "opencode.json"
        else:
            path = top / "opencode.json"
        return Target(cli, scope, path, "json", ("mcp",), {"type": "local", "command": [exe, "mcp"], "enabled": True})
    if cli == "codex":
        if scope != "user":
            raise UsageError("codex reads its MCP servers from $CODEX_HOME/config.toml only: use --scope user")
        path = Path(os.environ.get("CODEX_HOME") or _home() / ".codex") / "config.toml"
        # startup_timeout_sec: Codex waits 10 s by default; the server needs 2-4 s (the SDK's import), more when busy
        block = (f"\n[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(exe)}\nargs = [\"mcp\"]\n"
                 f"startup_timeout_sec = {CODEX_STARTUP_S}\n")
        return Target(cli, scope, path, "toml", (), block)
    raise UsageError(f"unknown CLI {cli!r} (known: {', '.join(CLIS)})")


# -- the record of what was added ----------------------------------------------------


def _record_path() -> Path:
    paths = discover()
    return paths.nerve_dir / RECORD


def _load_record(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except ValueError as exc:
        raise UsageError(f"{path} does not parse ({exc}); remove it or fix it by hand") from None
    return list(data.get("entries", []))


def _save_record(path: Path, entries: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, json.dumps({"entries": entries}, indent=2) + "\n")


def _remove_created(path: Path, rec: dict) -> tuple[str, str]:
    """Remove a config file install created (now empty again) and the directories it created for it."""
    from ..git import destroy

    kept = destroy.keep_or_remove(path, within=path.parent, kind="mcp-config", record=rec)
    if kept:
        return "refused", kept

    destroy.remove_empty_dirs(rec.get("created_dirs", []))  # one that is not empty: something else lives there now
    return "removed", "the file install created is gone again"


def _write(path: Path, text: str) -> None:
    """Atomic replace, keeping the file's mode (a killed earlier write's temporary goes first)."""
    replace_work_tree_file(path, text, keep_mode=True)


# -- JSON files --------------------------------------------------------------------------


class Refused(Exception):
    pass


#: One line, as `json.dumps` or `JSON.stringify` write it without indentation.
COMPACT, MINIFIED = "compact", "minified"


def _indent_of(text: str) -> int | str:
    if "\n" not in text.strip():
        return MINIFIED if '":' in text and '": ' not in text else COMPACT
    m = re.search(r"\n([ \t]+)\S", text)
    if not m:
        return 2
    ws = m.group(1)
    return "\t" if ws.startswith("\t") else len(ws)


def _dump(data: Any, indent: int | str) -> str:
    if indent == COMPACT:
        return json.dumps(data, ensure_ascii=False)
    if indent == MINIFIED:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(data, indent=indent, ensure_ascii=False)


def _read_json(path: Path, hint: Any) -> tuple[dict, int | str, str]:
    """(data, indent, trailing) of a JSON object file that re-serialises to its own bytes."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, 2, "\n"
    if not text.strip():
        return {}, 2, "\n"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise Refused(f"does not parse as JSON ({exc}); add by hand: {json.dumps(hint)}") from None
    if not isinstance(data, dict):
        raise Refused("is not a JSON object")
    indent = _indent_of(text)
    body = text.rstrip("\r\n")
    if _dump(data, indent) != body:
        raise Refused(f"its formatting would not survive a rewrite (other entries must stay byte for byte); "
                      f"add by hand: {json.dumps(hint)}")
    return data, indent, text[len(body):] or ""


def _json_install(t: Target) -> tuple[str, dict[str, Any]]:
    hint = {t.keys[0]: {SERVER_NAME: t.entry}}
    data, indent, trailing = _read_json(t.path, hint)
    servers = data.get(t.keys[0])
    created_container = servers is None
    if servers is None:
        servers = {}
    if not isinstance(servers, dict):
        raise Refused(f"{t.keys[0]!r} is not a JSON object")
    if SERVER_NAME in servers:
        if servers[SERVER_NAME] == t.entry:
            return "already", {}
        raise Refused(f"it already has an MCP server named {SERVER_NAME!r} that is not this one")
    servers[SERVER_NAME] = t.entry
    data[t.keys[0]] = servers
    created_dirs = []
    d = t.path.parent
    while not d.exists():
        created_dirs.append(str(d))
        d = d.parent
    created_file = not t.path.exists()
    t.path.parent.mkdir(parents=True, exist_ok=True)
    _write(t.path, _dump(data, indent) + (trailing or "\n" if created_file else trailing))
    return "installed", {"created_container": created_container, "created_file": created_file,
                         "created_dirs": created_dirs}


def _json_uninstall(rec: dict[str, Any]) -> tuple[str, str]:
    path = Path(rec["file"])
    key = rec["keys"][0]
    try:
        data, indent, trailing = _read_json(path, None)
    except Refused as exc:
        return "refused", str(exc).split("; add by hand")[0]
    if not path.exists():
        return "absent", "the file is gone"
    servers = data.get(key)
    if not isinstance(servers, dict) or SERVER_NAME not in servers:
        return "absent", "the entry is gone"
    if servers[SERVER_NAME] != rec["entry"]:
        return "refused", f"the {SERVER_NAME!r} entry was changed since install"
    del servers[SERVER_NAME]
    if not servers and rec.get("created_container"):
        del data[key]
    if not data and rec.get("created_file"):
        return _remove_created(path, rec)
    _write(path, _dump(data, indent) + trailing)
    return "removed", ""


# -- TOML (Codex) ----------------------------------------------------------------------------


def _toml():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib


def _toml_install(t: Target) -> tuple[str, dict[str, Any]]:
    tomllib = _toml()
    try:
        text = t.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    try:
        data = tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as exc:
        raise Refused(f"does not parse as TOML ({exc}); add by hand: {t.entry.strip()!r}") from None
    servers = data.get("mcp_servers", {})
    if isinstance(servers, dict) and SERVER_NAME in servers:
        if servers[SERVER_NAME] == tomllib.loads(t.entry)["mcp_servers"][SERVER_NAME]:
            return "already", {}
        raise Refused(f"it already has an MCP server named {SERVER_NAME!r} that is not this one")
    sep = "" if not text or text.endswith("\n") else "\n"
    new = (text or "") + sep + (t.entry if text else t.entry.lstrip("\n"))
    try:
        tomllib.loads(new)
    except tomllib.TOMLDecodeError as exc:
        raise Refused(f"adding [mcp_servers.{SERVER_NAME}] would not parse ({exc}); add it by hand") from None
    created_dirs = []
    d = t.path.parent
    while not d.exists():
        created_dirs.append(str(d))
        d = d.parent
    t.path.parent.mkdir(parents=True, exist_ok=True)
    _write(t.path, new)
    return "installed", {"created_file": text is None, "created_dirs": created_dirs,
                         "block": new[len(text or ""):], "sep": sep}


def _toml_uninstall(rec: dict[str, Any]) -> tuple[str, str]:
    path = Path(rec["file"])
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "absent", "the file is gone"
    block = rec["block"]
    if text.count(block) != 1:
        return ("absent", "the entry is gone") if f"[mcp_servers.{SERVER_NAME}]" not in text else \
            ("refused", f"the [mcp_servers.{SERVER_NAME}] block was changed since install")
    new = text.replace(block, "", 1)
    if rec.get("created_file") and not new.strip():
        return _remove_created(path, rec)
    _write(path, new)
    return "removed", ""


# -- the commands --------------------------------------------------------------------------


def on_path() -> list[str]:
    return [c for c in CLIS if shutil.which(c)]


def _names(clis: list[str], default: list[str]) -> list[str]:
    for c in clis:
        if c not in CLIS:
            raise UsageError(f"unknown CLI {c!r} (known: {', '.join(CLIS)})")
    return list(dict.fromkeys(clis)) if clis else default


def install(clis: list[str], *, scope: str = "user") -> list[Result]:
    """Register the server with each CLI (default: those on PATH); one Result per CLI."""
    if scope not in ("user", "project"):
        raise UsageError(f"--scope must be user or project (got {scope!r})")
    paths = discover()
    names = _names(clis, on_path())
    if not names:
        raise UsageError(f"none of {', '.join(CLIS)} is on PATH; name the CLIs to register with")
    if scope == "project":
        from .. import context

        ctx = context.read(paths.git_dir)
        if ctx is not None:  # a project file here would be an untracked file in the task's branch's worktree
            raise UsageError(f"--scope project writes into this checkout, the worktree of task {ctx.task_id}: "
                             "run it from the main checkout, or use --scope user")
    top = paths.toplevel or paths.common_dir
    exe = executable()
    record_path = paths.nerve_dir / RECORD
    if not paths.nerve_dir.is_dir():
        raise UsageError("git-nerve is not set up in this repository; run `git nerve init` first")
    entries = _load_record(record_path)
    results = []
    kept_trusted = trusted_agent_settings(paths.common_dir, top) if scope == "project" else set()
    for cli in names:
        try:
            t = target(cli, scope, top, exe)
        except UsageError as exc:
            results.append(Result(cli, scope, "-", "refused", exc.message))
            continue
        try:
            action, extra = _json_install(t) if t.fmt == "json" else _toml_install(t)
        except Refused as exc:
            results.append(Result(cli, scope, str(t.path), "refused", str(exc)))
            continue
        except OSError as exc:
            results.append(Result(cli, scope, str(t.path), "refused", exc.strerror or str(exc)))
            continue
        if action == "installed":
            entries.append({"cli": cli, "scope": scope, "file": str(t.path), "format": t.fmt, "keys": list(t.keys),
                            "entry": t.entry, **extra})
            _save_record(record_path, entries)
        results.append(Result(cli, scope, str(t.path), action))
    trust_again(paths.common_dir, top, kept_trusted)
    return results


def uninstall(clis: list[str]) -> list[Result]:
    """Remove what install added (for the CLIs named, or all); the record keeps what could not be removed."""
    paths = discover()
    record_path = paths.nerve_dir / RECORD
    entries = _load_record(record_path)
    names = _names(clis, list(CLIS))
    kept, results = [], []
    top = paths.toplevel or paths.common_dir
    kept_trusted = (trusted_agent_settings(paths.common_dir, top) if any(r["scope"] == "project" for r in entries)
                    else set())  # what it writes at the person's command keeps them trusted
    for rec in entries:
        if rec["cli"] not in names:
            kept.append(rec)
            continue
        action, reason = (_json_uninstall if rec["format"] == "json" else _toml_uninstall)(rec)
        if action == "refused":
            kept.append(rec)
        results.append(Result(rec["cli"], rec["scope"], rec["file"], action, reason))
    trust_again(paths.common_dir, top, kept_trusted)
    if entries:
        if kept:
            _save_record(record_path, kept)
        else:
            from ..git import destroy

            destroy.remove_own_file(record_path, within=paths.nerve_dir, kind="mcp-record")
    return results
