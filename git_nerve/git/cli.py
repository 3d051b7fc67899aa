"""The one boundary where the git binary is run.

Standard library only. Every call is an argv list (never a shell); errors
become :class:`~git_nerve.errors.GitError` with git's own message: every
``fatal:``/``error:`` line and any line naming a system cause (a full disk,
permissions), not only the last line, which is often the least telling one
("Could not reset index file to revision 'HEAD'" after "No space left on device").
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence

from .. import liveness, waits
from ..errors import GitError

#: Variables that tie a git process to one repository or worktree. Hooks run
#: with these set for *their* worktree; they must not leak into git commands
#: aimed at another worktree. (`git rev-parse --local-env-vars`, minus the
#: `-c` configuration, which the user meant for every git we run.)
LOCATION_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_QUARANTINE_PATH",
    "GIT_REFLOG_ACTION",
)


def clean_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment without the repository-locating GIT_* vars."""
    env = {k: v for k, v in (base if base is not None else os.environ).items() if k not in LOCATION_VARS}
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    if extra:
        env.update(extra)
    return env


def run(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    inherit_location: bool = False,
    check: bool = True,
    input: str | bytes | None = None,
    text: bool = True,
    timeout: float | None = None,
    capture: bool = True,
    bulk: bool = False,
) -> subprocess.CompletedProcess:
    """Run ``git <args>``.

    By default the repository-locating GIT_* variables are stripped so that
    ``cwd`` alone says which repository is meant; pass ``inherit_location``
    to keep them (a hook acting on its own worktree). ``bulk``: work that takes CPU for long and that nobody
    waits on from moment to moment (a worktree's checkout) runs at a lower priority (``nice``), so the short
    commands agents run meanwhile (start, heartbeat, status) are not queued behind it for a CPU.
    """
    argv = [*_nice(bulk), "git", *[os.fspath(a) for a in args]]
    if env is None:
        env = dict(os.environ) if inherit_location else clean_env()
    # git-nerve's own git commands never take git's optional locks: a `git status` of ours (the radar's look at a
    # worktree, run in the background after a commit) must not hold the worktree's index.lock while the agent or
    # the person runs `git add` there (git-status(1), "Background refresh")
    env = {**env, "GIT_OPTIONAL_LOCKS": env.get("GIT_OPTIONAL_LOCKS", "0")}
    # our liveness token goes to git (and its children): while any of them lives, what they hold is not ours
    # to repair (liveness.py)
    fds, marker = liveness.before_git(cwd, args)
    if fds:
        env = {**env, liveness.FD_VAR: str(fds[0])}
    began = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            input=input,
            text=text,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE if capture else None,
            timeout=timeout,
            pass_fds=fds,
        )
    except FileNotFoundError as exc:
        if cwd is not None and not os.path.isdir(cwd):
            raise GitError(f"directory does not exist: {cwd}") from exc
        raise GitError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0] if args else ''} timed out after {timeout}s") from exc
    finally:
        liveness.after_git(marker)
        waits.add("git", time.monotonic() - began)
        waits.add("git_n", 1)
    if check and proc.returncode != 0:
        said = message(proc.stderr) or message(proc.stdout) or f"exit {proc.returncode}"
        raise GitError(f"git {' '.join(map(str, args[:2]))} failed: {said}{disk_full_hint(said, cwd)}")
    return proc


BULK_NICENESS = 5


def _nice(bulk: bool) -> list[str]:
    """``nice -n 5`` (POSIX, on macOS too) for bulk work, when it is on PATH; nothing otherwise."""
    if not bulk:
        return []
    from ..detach import lower_priority

    return lower_priority(BULK_NICENESS)


def disk_full_hint(said: str, cwd: str | os.PathLike[str] | None) -> str:
    """`` (no space left on device)`` when git failed to write and the filesystem it wrote to is full: git's own
    words ("unable to write file x") do not name the cause."""
    if any(w in said.lower() for w in ("no space left", "out of diskspace", "disk is full")):
        return ""
    try:
        st = os.statvfs(cwd or ".")
    except OSError:
        return ""
    return " (no space left on device)" if st.f_bavail * st.f_frsize < 1 << 20 else ""


def out(args: Sequence[str], **kw) -> str:
    """stdout of ``git <args>`` without the trailing newline."""
    return run(args, **kw).stdout.rstrip("\n")


def ok(args: Sequence[str], **kw) -> bool:
    """True when ``git <args>`` exits 0."""
    kw.setdefault("check", False)
    return run(args, **kw).returncode == 0


def lock_file_in(s: str) -> str | None:
    """The path of the lock file git found in its way (``Unable to create '<x>.lock': File exists``), if any."""
    if "File exists" not in s:
        return None
    import re  # only on this error path: the hooks import this module on every commit

    m = re.search(r"Unable to create '([^']+\.lock)': File exists", s)
    return m[1] if m else None


def stale_lock_message(path: str) -> str:
    return (f"git's lock file {path} exists: another git process is running there, or one was killed; "
            f"if no git is running, remove {path}")


#: phrases of the system's own errors (strerror) that git prints on lines of their own or
#: in the middle of a longer line: a line holding one always matters
SYSTEM_CAUSES = ("No space left on device", "Disk quota exceeded", "Read-only file system", "Permission denied",
                 "Input/output error", "Too many open files", "Cannot allocate memory", "File name too long")

#: at most this many lines of git's stderr go into one message
MAX_LINES = 4


def message(s: str | bytes | None) -> str:
    """What git said that matters, on one line: its ``fatal:``/``error:`` lines (prefix dropped)
    and any line with a system cause, in order, joined by "; "; else its last line.

    ``hint:`` lines and git's progress chatter are dropped; a stale lock file becomes our own
    one-line explanation; dubious ownership keeps git's ``safe.directory`` fix.
    """
    if not s:
        return ""
    if isinstance(s, bytes):
        s = s.decode("utf-8", "replace")
    lock = lock_file_in(s)
    if lock:
        return stale_lock_message(lock)
    if "dubious ownership" in s:
        return dubious_ownership_message(s)
    raw = [ln for ln in s.strip().splitlines() if ln.strip()]
    picked: list[str] = []
    for i, rawline in enumerate(raw):
        line = rawline.strip()
        substance = _strip_prefix(line)
        if substance is not line or any(cause in line for cause in SYSTEM_CAUSES):
            if substance.endswith(":"):  # a list follows, indented: "... would be overwritten by merge:\n\tfile"
                items = []
                for nxt in raw[i + 1:]:
                    if not nxt.startswith((" ", "\t")):
                        break
                    items.append(nxt.strip())
                if items:
                    substance += " " + ", ".join(items[:5]) + (", ..." if len(items) > 5 else "")
            if substance and substance not in picked:
                picked.append(substance)
    if not picked:
        return last_line(s)
    if len(picked) > MAX_LINES:  # keep the first (the cause) and the last (what failed)
        picked = [*picked[:MAX_LINES - 1], picked[-1]]
    return "; ".join(p.rstrip(".") if i < len(picked) - 1 else p for i, p in enumerate(picked))


def _strip_prefix(line: str) -> str:
    """``line`` without git's "fatal: "/"error: " prefix; the same object when it has none."""
    for prefix in ("fatal: ", "error: "):
        if line.startswith(prefix):
            return line[len(prefix):]
    return line


def dubious_ownership_message(s: str) -> str:
    """git's refusal of a repository owned by someone else, with the command git suggests."""
    where = ""
    fix = ""
    for line in s.splitlines():
        text = line.strip()
        if "dubious ownership" in text and " at '" in text:
            where = text.split(" at '", 1)[1].rstrip("'")
        if text.startswith("git config") and "safe.directory" in text:
            fix = text
    return (f"git refuses the repository {where or ''} because it belongs to another user (\"dubious ownership\"); "
            f"if you trust it: {fix or 'git config --global --add safe.directory <path>'}").replace("  ", " ")


def last_line(s: str | bytes | None) -> str:
    if not s:
        return ""
    if isinstance(s, bytes):
        s = s.decode("utf-8", "replace")
    lock = lock_file_in(s)
    if lock:  # git's own explanation spans six lines and ends in an unhelpful one
        return stale_lock_message(lock)
    lines = [ln.strip() for ln in s.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    # git prefixes its messages with "fatal: " / "error: "; keep the substance.
    line = lines[-1]
    for prefix in ("fatal: ", "error: "):
        if line.startswith(prefix):
            line = line[len(prefix):]
    return line
