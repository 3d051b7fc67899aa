"""The built-in agent's tools, confined to one worktree.

* files: a path must resolve (symlinks followed) inside the worktree and never
  into its ``.git``; the last component is opened with ``O_NOFOLLOW`` so a
  symlink swapped in after the check is not followed either;
* commands: parsed with :mod:`shlex` into argv lists (``a && b`` runs a then
  b; any other shell operator, redirection or substitution is refused), each
  argv checked against an allowlist: read-and-commit ``git`` subcommands,
  ``git nerve thread|knowledge|outbox``, and the repository's test command
  exactly as nerve.toml ``[run] test_command`` spells it. Never a shell.

Every result, refusals included, goes back to the model as data.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: git subcommands the agent may run (no config, no hooks of its own, no network)
GIT_ALLOWED = ("add", "commit", "status", "diff", "log", "show", "ls-files", "grep", "rev-parse", "restore", "rm", "mv")
#: `git nerve` subcommands the agent may run
NERVE_ALLOWED = ("thread", "knowledge", "outbox")
#: options that make an allowed git command run or write something else
GIT_DENIED_OPTIONS = ("--output", "--ext-diff", "--exec", "--upload-pack", "--receive-pack", "--template",
                      "--no-index", "--textconv", "--open-files-in-pager")
MAX_OUTPUT = 16000
COMMAND_TIMEOUT = 300.0


class Refused(Exception):
    """A tool call outside the agent's confinement: its message goes back to the model."""


def _inside(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


@dataclass
class Workspace:
    root: Path
    test_command: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(os.path.realpath(self.root))

    # -- files -------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise Refused("a path is required")
        raw = Path(path)
        candidate = raw if raw.is_absolute() else self.root / raw
        real = Path(os.path.realpath(candidate))
        if not _inside(self.root, real):
            raise Refused(f"{path}: outside the worktree ({self.root}); only files inside it can be read or written")
        rel = real.relative_to(self.root)
        if rel.parts[:1] == (".git",):
            raise Refused(f"{path}: inside .git; use git commands instead")
        return real

    def read_file(self, path: str) -> str:
        p = self.resolve(path)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise Refused(f"{path}: cannot read ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_OUTPUT * 4)
        return data.decode("utf-8", "replace")

    def write_file(self, path: str, content: str) -> str:
        p = self.resolve(path)
        if p == self.root:
            raise Refused(f"{path}: is the worktree itself")
        p.parent.mkdir(parents=True, exist_ok=True)
        p = self.resolve(path)  # the directories just made cannot have moved it outside
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise Refused(f"{path}: cannot write ({exc.strerror})") from None
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
        return f"wrote {len(content)} characters to {p.relative_to(self.root)}"

    def edit_file(self, path: str, old_string: str, new_string: str) -> str:
        text = self.read_file(path)
        count = text.count(old_string) if old_string else 0
        if count != 1:
            raise Refused(f"{path}: old_string must occur exactly once (found {count} times)")
        self.write_file(path, text.replace(old_string, new_string, 1))
        return f"edited {path}: replaced 1 occurrence"

    # -- commands -----------------------------------------------------------------

    def parse(self, command: str) -> list[list[str]]:
        """``command`` as argv lists joined by ``&&``; anything else a shell would interpret is refused."""
        if not isinstance(command, str) or not command.strip():
            raise Refused("a command is required")
        if "\n" in command or "`" in command or "$(" in command:
            raise Refused(f"{command!r}: newlines and substitutions are not run (no shell)")
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError as exc:
            raise Refused(f"{command!r}: {exc}") from None
        argvs: list[list[str]] = [[]]
        for tok in tokens:
            if tok == "&&":
                argvs.append([])
            elif tok and all(c in "();<>|&" for c in tok):
                raise Refused(f"{command!r}: shell operator {tok!r} is not supported (no shell; only `a && b`)")
            else:
                argvs[-1].append(tok)
        if any(not a for a in argvs):
            raise Refused(f"{command!r}: empty command")
        for argv in argvs:
            self.check(argv)
        return argvs

    def check(self, argv: list[str]) -> None:
        test = shlex.split(self.test_command) if self.test_command.strip() else []
        if test and argv == test:
            return
        if argv[0] != "git":
            allowed = "git " + "/".join(GIT_ALLOWED) + ", git nerve " + "/".join(NERVE_ALLOWED)
            if test:
                allowed += f", the test command `{self.test_command}`"
            raise Refused(f"`{argv[0]}` is not allowed: only {allowed}")
        if len(argv) < 2:
            raise Refused("`git` needs a subcommand")
        sub = argv[1]
        if sub == "nerve":
            if len(argv) < 3 or argv[2] not in NERVE_ALLOWED:
                raise Refused(f"`git nerve {argv[2] if len(argv) > 2 else ''}` is not allowed: only "
                              + ", ".join(f"git nerve {s}" for s in NERVE_ALLOWED))
            return
        if sub.startswith("-"):
            raise Refused(f"git option {sub!r} before the subcommand is not allowed")
        if sub not in GIT_ALLOWED:
            raise Refused(f"`git {sub}` is not allowed: only git " + ", ".join(GIT_ALLOWED))
        for a in argv[2:]:
            if a.split("=", 1)[0] in GIT_DENIED_OPTIONS:
                raise Refused(f"git option {a!r} is not allowed")

    def run_command(self, command: str) -> str:
        out: list[str] = []
        for argv in self.parse(command):
            real = argv
            if argv[:2] == ["git", "nerve"] and shutil.which("git-nerve") is None:
                real = [sys.executable, "-c", "from git_nerve.cli.entry import nerve_main; nerve_main()", *argv[2:]]
            env = {**os.environ, **self.extra_env, "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat"}
            try:
                proc = subprocess.run(real, cwd=self.root, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                      text=True, timeout=COMMAND_TIMEOUT)
            except FileNotFoundError:
                out.append(f"$ {shlex.join(argv)}\n`{argv[0]}` not found")
                break
            except subprocess.TimeoutExpired:
                out.append(f"$ {shlex.join(argv)}\ntimed out after {COMMAND_TIMEOUT:.0f}s")
                break
            text = (proc.stdout + proc.stderr)[-MAX_OUTPUT:]
            out.append(f"$ {shlex.join(argv)}\n{text}(exit code {proc.returncode})")
            if proc.returncode != 0:
                break
        return "\n".join(out)


TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file of the worktree (path relative to it).",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Create or overwrite a file of the worktree.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "edit_file", "description": "Replace the one occurrence of old_string by new_string in a file.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}},
            "required": ["path", "old_string", "new_string"]}}},
    {"type": "function", "function": {
        "name": "run_command",
        "description": ("Run a command in the worktree (no shell; `a && b` chains): git add/commit/status/diff/log/show/..., "
                        "`git nerve thread` (this task's thread), `git nerve knowledge query`, or the test command."),
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
]


def call(ws: Workspace, name: str, args: dict) -> str:
    """Run tool ``name``; its result (or why it was refused) as text for the model."""
    try:
        if not isinstance(args, dict):
            raise Refused("arguments must be a JSON object")
        if name == "read_file":
            return ws.read_file(args.get("path", ""))
        if name == "write_file":
            return ws.write_file(args.get("path", ""), str(args.get("content", "")))
        if name == "edit_file":
            return ws.edit_file(args.get("path", ""), str(args.get("old_string", "")), str(args.get("new_string", "")))
        if name == "run_command":
            return ws.run_command(args.get("command", ""))
        raise Refused(f"no tool named {name!r}")
    except Refused as exc:
        return f"refused: {exc}"
