"""Each agent in a box (issue 41): the bubblewrap argv around one agent process.

Inside the box (``bwrap``, Linux):

* the whole file system is read-only (``--ro-bind / /``, a fresh ``/dev`` and ``/proc``);
* the task's worktree is writable, and in the git common dir what a commit there writes: ``objects/``
  (new loose objects; ``objects/info`` and ``objects/pack`` stay read-only: no alternates, the packs as they
  are), the task's own branch ref (its directory, every other
  entry there re-bound read-only, so a sibling branch cannot be rewritten, renamed over or removed) and
  reflog, the worktree's admin dir ``worktrees/<name>`` (HEAD, index, its logs) but for its ``gitdir``,
  ``commondir``, ``config.worktree`` and ``nerve/`` (the task's context), which stay read-only;
  ``hooks/``, ``config``, ``info/``, ``packed-refs``, ``nerve/`` (the bus), other worktrees stay read-only;
* the task's box spool (``<common>/nerve/box/<task>``, :func:`git_nerve.bus.spool.box_dir`) is writable:
  the hooks' commit lines, ``git nerve post`` and ``git worker heartbeat`` write there, git-nerve takes them in
  outside the box (every Bus opening), attributed to the task the directory is named after;
* the CLI's own state directories (its adapter's ``state_dirs``) are writable; TMPDIR is a private tmpfs;
* the secret stores (:data:`SECRETS`, ``[run] hide``) are hidden: an empty tmpfs over a directory, an empty
  file over a file; ``SSH_AUTH_SOCK`` and the GnuPG agent's sockets are not passed;
* the network stays on unless ``[run] network = "none"`` (``--unshare-net``).

``sandbox-exec`` (macOS) gets the equivalent profile (:func:`seatbelt_profile`): untested here.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import UsageError

MODES = ("auto", "bwrap", "none")
NETWORKS = ("on", "none")
#: the user's secret stores, relative to HOME: never visible inside a box
SECRETS = (
    ".ssh", ".aws", ".gnupg", ".config/gcloud", ".docker", ".kube", ".netrc", ".git-credentials",
    ".config/git/credentials", ".password-store", ".1password", ".config/op", ".local/share/keyrings",
    ".config/Bitwarden CLI", ".azure", ".config/gh", ".pypirc", ".npmrc",
)
#: the same under XDG_RUNTIME_DIR (agent sockets)
RUNTIME_SECRETS = ("gnupg", "keyring", "ssh-agent.socket", "gcr")
#: variables that name an agent socket: never passed into a box
SOCKET_VARS = ("SSH_AUTH_SOCK", "GPG_AGENT_INFO")
#: the variable that tells git-nerve's own commands inside the box where their spool is
BOX_ENV = "NERVE_BOX_SPOOL"  # = git_nerve.bus.spool.BOX_ENV
#: the person's default box when neither --sandbox nor nerve.toml [run] sandbox says (e.g. "none" in a CI
#: whose own tests write outside their worktree)
ENV_MODE = "NERVE_SANDBOX"


@dataclass(frozen=True)
class Box:
    """What one agent process may write, and what it must not see."""

    workdir: str
    git_dir: str  #: the worktree's own git dir (``<common>/worktrees/<name>``)
    common_dir: str
    branch: str  #: the task's branch (short name), "" when unknown
    spool: str  #: the task's box spool directory (writable, made before the start)
    tmp: str  #: an empty directory of ours: a private tmpfs there is the agent's TMPDIR
    home: str = ""
    network: bool = True
    hide: tuple[str, ...] = ()
    state_dirs: tuple[str, ...] = ()
    runtime_dir: str = ""
    extra_writable: tuple[str, ...] = field(default=())


def _exists(path: str) -> bool:
    return bool(path) and os.path.lexists(path)


def _in(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _ref_paths(box: Box) -> list[tuple[str, str]]:
    """(``--bind`` | ``--ro-bind``, path) for the task's branch: its directory writable (git locks
    ``<ref>.lock`` beside it), every other entry there read-only again; its reflog file writable."""
    if not box.branch:
        return []
    ref = os.path.join(box.common_dir, "refs", "heads", *box.branch.split("/"))
    parent, leaf = os.path.dirname(ref), os.path.basename(ref)
    if not os.path.isdir(parent):
        return []
    out = [("--bind", parent)]
    for name in sorted(os.listdir(parent)):
        if name not in (leaf, f"{leaf}.lock"):
            out.append(("--ro-bind", os.path.join(parent, name)))
    log = os.path.join(box.common_dir, "logs", "refs", "heads", *box.branch.split("/"))
    if os.path.isfile(log):
        out.append(("--bind", log))
    return out


def _git_paths(box: Box) -> list[tuple[str, str]]:
    common = box.common_dir
    out = [("--bind", os.path.join(common, "objects"))]
    for sub in ("info", "pack"):  # no alternates, and the packs (the history) stay as they are
        if os.path.isdir(os.path.join(common, "objects", sub)):
            out.append(("--ro-bind", os.path.join(common, "objects", sub)))
    out += _ref_paths(box)
    admin = os.path.realpath(box.git_dir) if box.git_dir else ""
    if admin and admin != os.path.realpath(common):  # a linked worktree: its admin dir is its own
        out.append(("--bind", admin))
        for name in ("gitdir", "commondir", "config.worktree", "nerve", "hooks"):
            if _exists(os.path.join(admin, name)):
                out.append(("--ro-bind", os.path.join(admin, name)))
    return out


def hidden_paths(box: Box) -> list[str]:
    """The existing paths a box hides (secret stores, agent sockets, ``[run] hide``)."""
    found = []
    if box.home:
        found += [os.path.join(box.home, p) for p in SECRETS]
    if box.runtime_dir:
        found += [os.path.join(box.runtime_dir, p) for p in RUNTIME_SECRETS]
    found += [os.path.expanduser(p) if not os.path.isabs(p) and p.startswith("~") else p for p in box.hide]
    return [p for p in dict.fromkeys(os.path.abspath(p) for p in found if p) if _exists(p)]


def bwrap_argv(box: Box, argv: Sequence[str], bwrap: str = "bwrap") -> list[str]:
    """``bwrap ... -- argv``: ``argv`` in the box :class:`Box` describes."""
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--die-with-parent"]
    if not box.network:
        out.append("--unshare-net")
    binds: list[tuple[str, str]] = [("--bind", box.workdir)]
    binds += _git_paths(box)
    binds.append(("--bind", box.spool))
    binds += [("--bind", d) for d in (*box.state_dirs, *box.extra_writable) if os.path.exists(d)]
    for flag, path in binds:
        out += [flag, path, path]
    out += ["--tmpfs", box.tmp]
    for path in hidden_paths(box):
        if os.path.isdir(path) and not os.path.islink(path):
            out += ["--tmpfs", path]
        else:
            out += ["--ro-bind", "/dev/null", path]
    out += ["--", *argv]  # bwrap keeps the working directory it was started in
    return out


def seatbelt_profile(box: Box) -> str:
    """The ``sandbox-exec`` (macOS) profile of the same box. Untested here: no macOS in CI."""

    def lit(path: str) -> str:
        return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'

    writable = [box.workdir, os.path.join(box.common_dir, "objects"), box.spool, box.tmp,
                *[d for d in (*box.state_dirs, *box.extra_writable) if d]]
    if box.git_dir and os.path.realpath(box.git_dir) != os.path.realpath(box.common_dir):
        writable.append(box.git_dir)
    if box.branch:
        writable.append(os.path.join(box.common_dir, "refs", "heads", *box.branch.split("/")))
        writable.append(os.path.join(box.common_dir, "logs", "refs", "heads", *box.branch.split("/")))
    lines = ["(version 1)", "(allow default)", "(deny file-write*)"]
    lines += [f"(allow file-write* (subpath {lit(p)}))" for p in writable]
    if box.branch:
        lines.append(f"(allow file-write* (regex #\"^{os.path.join(box.common_dir, 'refs', 'heads')}/.*\\.lock$\"))")
    if box.git_dir:
        lines += [f"(deny file-write* (subpath {lit(os.path.join(box.git_dir, n))}))" for n in ("nerve", "gitdir", "commondir")]
    lines += [f"(deny file-read* file-write* (subpath {lit(p)}))" for p in hidden_paths(box)]
    if not box.network:
        lines.append("(deny network*)")
    return "\n".join(lines) + "\n"


# -- which box ---------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def bwrap_usable(bwrap: str) -> str:
    """"" when ``bwrap --ro-bind / / true`` runs here (probed once per process), else why not."""
    try:
        proc = subprocess.run([bwrap, "--ro-bind", "/", "/", "true"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{bwrap}` did not run: {exc}"
    if proc.returncode != 0:
        return f"`{bwrap} --ro-bind / / true` failed: {(proc.stderr or '').strip().splitlines()[-1:] or proc.returncode}"
    return ""


def choose(mode: str | None, *, warn=None) -> str:
    """The box to use for ``mode`` (None: ``$NERVE_SANDBOX``, else "auto"): "bwrap", "seatbelt" (macOS) or "none".

    ``auto`` with no usable box: one warning line (``warn``, else stderr) and "none"; ``bwrap`` with none:
    a UsageError (exit 2)."""
    mode = mode or os.environ.get(ENV_MODE) or "auto"
    if mode not in MODES:
        raise UsageError(f"sandbox must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "none":
        return "none"
    why = _why_not()
    if not why:
        return "seatbelt" if sys.platform == "darwin" else "bwrap"
    if mode == "bwrap":
        raise UsageError(f"sandbox = \"bwrap\" but no box can be made here: {why}")
    (warn or (lambda line: sys.stderr.write(line + "\n")))(f"warning: git-nerve: agents run unboxed: {why}")
    return "none"


def _why_not() -> str:
    if sys.platform == "darwin":
        return "" if shutil.which("sandbox-exec") else "`sandbox-exec` is not on PATH"
    if not sys.platform.startswith("linux"):
        return f"no box on {sys.platform}"
    found = shutil.which("bwrap")
    if found is None:
        return "`bwrap` is not on PATH (Debian/Ubuntu: apt-get install bubblewrap)"
    return bwrap_usable(found)


def make_box(*, workdir: str, git_dir: str, common_dir: str, branch: str, task_id: str, tmp_parent: str,
             env: Mapping[str, str], network: bool = True, hide: Sequence[str] = (),
             state_dirs: Sequence[str] = (), writable: Sequence[str] = ()) -> Box:
    """The :class:`Box` of one agent process, its directories made: the task's box spool (a private one in
    ``tmp_parent`` without a task) and an empty ``tmp_parent/tmp`` for its TMPDIR's tmpfs. ``writable``: paths
    the adapter hands its CLI besides (the Gemini login files its private home links to)."""
    from ..bus import spool
    from ..fs import make_dirs

    where = spool.box_dir(common_dir, task_id) if task_id else os.path.join(tmp_parent, "spool")
    make_dirs(where)
    tmp = os.path.join(tmp_parent, "tmp")
    os.makedirs(tmp, mode=0o700, exist_ok=True)
    home = env.get("HOME") or os.path.expanduser("~")
    states = []
    for rel in state_dirs:
        if rel.startswith("$"):  # a variable naming the state directory (CODEX_HOME): where it points, if set
            if not env.get(rel[1:]):
                continue
            rel = env[rel[1:]]
        path = os.path.join(home, rel)
        if not os.path.lexists(path) and not os.path.splitext(rel)[1]:
            os.makedirs(path, mode=0o700, exist_ok=True)  # the CLI would make it: it must exist to be bound
        states.append(path)
    return Box(workdir=os.path.realpath(workdir), git_dir=git_dir, common_dir=os.path.realpath(common_dir),
               branch=branch, spool=os.fspath(where), tmp=tmp, home=home, network=network, hide=tuple(hide),
               state_dirs=tuple(states), runtime_dir=env.get("XDG_RUNTIME_DIR", ""), extra_writable=tuple(writable))


def take_in(common_dir: str) -> None:
    """What a boxed agent spooled (posts, heartbeats, commits), taken in now: a bus opening ingests it."""
    from ..bus.connection import open_bus
    from ..errors import NerveError

    try:
        open_bus(common_dir, create=False).close()
    except NerveError:
        pass  # the next reader of the bus takes it in


def wrap(kind: str, box: Box, argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """(argv, env) for ``argv`` in ``box``; unchanged for kind "none"."""
    env = dict(env)
    if kind == "none":
        return list(argv), env
    for name in SOCKET_VARS:
        env.pop(name, None)
    env["TMPDIR"] = box.tmp
    env[BOX_ENV] = box.spool
    if kind == "seatbelt":
        return ["sandbox-exec", "-p", seatbelt_profile(box), *argv], env
    return bwrap_argv(box, argv, shutil.which("bwrap") or "bwrap"), env


__all__ = ["BOX_ENV", "MODES", "NETWORKS", "SECRETS", "Box", "bwrap_argv", "bwrap_usable", "choose",
           "hidden_paths", "make_box", "seatbelt_profile", "take_in", "wrap"]
