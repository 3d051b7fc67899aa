"""Fetch and push through the git binary (network, credentials, hooks: git's own behaviour)."""

from __future__ import annotations

from dataclasses import dataclass
import os
import re
import time

from ..errors import GitError
from . import cli


def remotes(cwd) -> list[str]:
    out = cli.out(["remote"], cwd=cwd)
    return out.split() if out else []


def default_branch(cwd, remote: str, common_dir=None) -> str | None:
    """The remote's default branch as recorded locally (refs/remotes/<remote>/HEAD). ``common_dir``: read from
    the ref's own file when it is a plain symbolic ref there (what git's files backend keeps: a symbolic ref is
    never packed), without starting git; anything else (no such file, a symlink, reftable, an odd remote name)
    asks git."""
    if common_dir is not None:
        found = _symref_file(common_dir, remote)
        if found is not None:
            return found
    proc = cli.run(["symbolic-ref", "-q", f"refs/remotes/{remote}/HEAD"], cwd=cwd, check=False)
    ref = proc.stdout.strip()
    prefix = f"refs/remotes/{remote}/"
    if proc.returncode == 0 and ref.startswith(prefix):
        return ref[len(prefix):]
    return None


def _symref_file(common_dir, remote: str) -> str | None:
    """The branch ``<common_dir>/refs/remotes/<remote>/HEAD`` names when it is a regular file saying
    ``ref: refs/remotes/<remote>/<branch>``; None (ask git) otherwise."""
    if not remote or remote.startswith(".") or not all(c.isalnum() or c in "._-" for c in remote):
        return None
    path = os.path.join(os.fspath(common_dir), "refs", "remotes", remote, "HEAD")
    try:
        if os.path.islink(path) or os.path.isdir(os.path.join(os.fspath(common_dir), "reftable")):
            return None
        with open(path, "rb") as fh:
            text = fh.read(4096).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    prefix = f"ref: refs/remotes/{remote}/"
    branch = text[len(prefix):-1]
    # only the form git writes, exactly (one line, no spaces or control characters): anything else is git's to read
    if not (text.startswith(prefix) and text.endswith("\n") and branch and branch.isprintable() and " " not in branch):
        return None
    return branch


def ask_default_branch(cwd, remote: str, timeout: float = 20) -> tuple[str | None, str]:
    """The remote's default branch, asked of the remote itself (``git ls-remote --symref <remote> HEAD``):
    (branch, "") or (None, why it could not be told)."""
    try:
        proc = cli.run([*_config_args(relative_url_config(cwd, remote)), "ls-remote", "--symref", remote, "HEAD"],
                       cwd=cwd, check=False, timeout=timeout)
    except GitError as exc:
        return None, exc.message
    if proc.returncode != 0:
        return None, cli.message(proc.stderr) or f"git ls-remote exited {proc.returncode}"
    for line in proc.stdout.splitlines():
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            return line[len("ref: refs/heads/"):-len("\tHEAD")], ""
    return None, f"{remote} has no default branch (its HEAD names no branch)"


FETCH_ATTEMPTS = 3
#: what git says when two fetches into one repository race
_RACING_FETCH = ("did not send all necessary objects", "cannot lock ref")


def fetch(cwd, remote: str, branches: list[str]) -> None:
    """Update refs/remotes/<remote>/<b> for each branch (a branch missing on the remote is skipped)."""
    specs = [f"+refs/heads/{b}:refs/remotes/{remote}/{b}" for b in branches]
    urls = _config_args(relative_url_config(cwd, remote))
    for attempt in range(FETCH_ATTEMPTS):
        proc = cli.run([*urls, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, *specs], cwd=cwd, check=False)
        if proc.returncode == 0 or not any(m in proc.stderr for m in _RACING_FETCH):
            break
        time.sleep(0.1 * (attempt + 1))  # another fetch into this repository (not one of ours) got in the way
    if proc.returncode != 0:
        if "couldn't find remote ref" in proc.stderr:
            present = [b for b in branches if _remote_has(cwd, remote, b)]
            if len(present) < len(branches):
                if present:
                    fetch(cwd, remote, present)
                return
        raise GitError(f"git fetch {remote} failed: {cli.message(proc.stderr)}")


def _remote_has(cwd, remote: str, branch: str) -> bool:
    proc = cli.run([*_config_args(relative_url_config(cwd, remote)), "ls-remote", "--exit-code", "--heads", remote, branch],
                   cwd=cwd, check=False)
    return proc.returncode == 0


def has_branch(cwd, remote: str, branch: str) -> bool:
    """Does ``remote`` have ``refs/heads/<branch>``? Asked of the remote; GitError when it cannot be asked."""
    return branch_tip(cwd, remote, branch, hint=" (--no-fetch skips asking)") is not None


def branch_tip(cwd, remote: str, branch: str, *, hint: str = "") -> str | None:
    """The sha ``refs/heads/<branch>`` has on ``remote`` now (None: it has no such branch), asked of the remote
    itself (``ls-remote``), never a remote-tracking ref a fetch can move; GitError when it cannot be asked."""
    ref = f"refs/heads/{branch}"
    proc = cli.run([*_config_args(relative_url_config(cwd, remote)), "ls-remote", "--exit-code", remote, ref],
                   cwd=cwd, check=False)
    if proc.returncode not in (0, 2):
        raise GitError(f"could not ask {remote} where it has {branch}: {cli.message(proc.stderr)}{hint}")
    for line in proc.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name == ref and sha:
            return sha
    return None


@dataclass(frozen=True)
class PushResult:
    ok: bool
    rejected: bool  #: the remote moved (non-fast-forward / stale lease): retry after fetching
    message: str
    #: everything git printed (stdout + stderr: a pre-push hook's own output is in there)
    output: str = ""
    #: refused before anything was sent: git's pre-push hook (a gate) said no
    hook_refused: bool = False
    #: the remote's own hook (pre-receive, update) declined it: not a race, not a pre-push gate
    remote_refused: bool = False
    #: what the remote said (its ``remote:`` lines), for a person to read
    remote_said: tuple[str, ...] = ()


def push(cwd, remote: str, src: str, dst_branch: str, *, expect: str, env_extra: dict | None = None,
         config: dict | None = None, also: tuple[tuple[str, str, str | None], ...] = ()) -> PushResult:
    """Push ``src`` to ``refs/heads/<dst_branch>`` on ``remote``, a compare-and-set on the remote ref:
    ``--force-with-lease=refs/heads/<dst_branch>:<expect>``, ``expect`` the exact sha the caller pushed or read
    from the remote for this operation, or "" for "must not exist" (never a bare lease, whose expectation is
    whatever a fetch last saw). ``config``: ``git -c key=value`` settings for this push only. ``also``: more
    refs (ref, new sha, expected sha or None for "must not exist") pushed in the same ``--atomic`` push, each
    with its own lease (shared mode's claim).
    """
    if expect is None or not _lease_value(expect):
        raise ValueError(f"a push names the exact value it replaces, not {expect!r}")
    args = [*_config_args({**relative_url_config(cwd, remote), **(config or {})}), "push", "--quiet", "--porcelain"]
    if also:
        args += ["--atomic", *(f"--force-with-lease={ref}:{old or ''}" for ref, _, old in also)]
    args.append(f"--force-with-lease=refs/heads/{dst_branch}:{expect}")
    args += [remote, f"{src}:refs/heads/{dst_branch}", *(f"{new}:{ref}" for ref, new, _ in also if new)]
    proc = cli.run(args, cwd=cwd, check=False, env=cli.clean_env(env_extra))
    text = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return PushResult(True, False, "")
    said = tuple(ln.rstrip() for ln in proc.stderr.splitlines() if ln.startswith("remote:") and ln[7:].strip())
    remote_refused = any("[remote rejected]" in ln and "hook declined" in ln for ln in _status_lines(proc.stdout))
    hook_refused = not remote_refused and _hook_refused(proc.stdout, proc.stderr)
    rejected = not (remote_refused or hook_refused) and any(
        w in text for w in ("[rejected]", "non-fast-forward", "stale info", "fetch first", "[remote rejected]"))
    return PushResult(False, rejected, cli.last_line(proc.stderr) or cli.last_line(proc.stdout), text,
                      hook_refused, remote_refused, said)


def _lease_value(value: str) -> bool:
    """A lease's expected value: "" (must not exist) or a whole sha (40 or 64 hex digits), nothing a fetch moves."""
    return value == "" or (len(value) in (40, 64) and all(c in "0123456789abcdef" for c in value))


def _status_lines(stdout: str) -> list[str]:
    """``--porcelain``'s ref status lines: ``<flag>\t<from>:<to>\t<summary>``."""
    return [ln for ln in stdout.splitlines() if ln[:2] in ("!\t", "=\t", " \t", "*\t", "+\t", "-\t")]


def _hook_refused(stdout: str, stderr: str) -> bool:
    """git gave up before sending anything because the pre-push hook failed.

    git (2.39) says only "failed to push some refs" then, and prints no ref
    status line, which it does for every ref it did send or was refused by
    the remote (a remote's own hook declining is ``[remote rejected] (pre-receive
    hook declined)``: the remote's refusal, not a pre-push gate's).
    """
    ours = "\n".join(ln for ln in stderr.splitlines() if not ln.startswith("remote:"))
    if "pre-push hook" in ours:
        return True
    if any(w in ours for w in _DROPPED):  # sent, and the connection went before the answer: no gate's refusal
        return False
    return "failed to push some refs" in ours and not _status_lines(stdout)


#: what git says when the connection went after the push was sent (the remote may have taken it)
_DROPPED = ("unexpected disconnect", "the remote end hung up", "sideband demultiplexer")


def _config_args(config: dict | None) -> list[str]:
    return [arg for k, v in (config or {}).items() for arg in ("-c", f"{k}={v}")]


def from_checkout_config(main_checkout, remote: str) -> dict:
    """``git -c`` settings that make a push from another (temporary) checkout behave as one from ``main_checkout``.

    A relative ``core.hooksPath`` (husky's ``.husky/_``) is resolved per
    checkout; a temporary one has no such directory, so git would run no
    pre-push hook at all: point it at the main checkout's. A relative remote
    URL is resolved against the directory git runs in: rewrite it
    (:func:`url_rewrites`).
    """
    import os

    config: dict = {}
    if main_checkout is None or not os.path.isdir(main_checkout):
        return config
    hooks_path = cli.run(["config", "core.hooksPath"], cwd=main_checkout, check=False).stdout.strip()
    if hooks_path and not os.path.isabs(os.path.expanduser(hooks_path)):
        config["core.hooksPath"] = cli.out(["rev-parse", "--path-format=absolute", "--git-path", "hooks"], cwd=main_checkout)
    if remote:
        config.update(url_rewrites(main_checkout, remote, main_checkout))
    return config


def url_rewrites(cwd, remote: str, base) -> dict:
    """``url.<absolute>.insteadOf=<relative>`` for a remote whose URL is a relative path.

    git resolves such a URL against the top of the checkout it runs in; a push from
    another checkout (a temporary one, a task's worktree) would miss the remote. ``base`` is the
    directory the URL was meant from (the main checkout).
    """
    return {f"url.{os.path.normpath(os.path.join(os.fspath(base), url))}.insteadOf": url
            for url in relative_urls(cwd, remote)}


def relative_urls(cwd, remote: str) -> list[str]:
    """``remote``'s URLs (url and pushurl) that are relative local paths (``../origin.git``)."""
    if not remote:
        return []
    key = rf"^remote\.{re.escape(remote)}\.(push)?url$"
    proc = cli.run(["config", "--get-regexp", key], cwd=cwd, check=False)
    found = []
    for line in proc.stdout.splitlines():
        url = line.split(" ", 1)[1].strip() if " " in line else ""
        if not url or os.path.isabs(url) or "://" in url or url.startswith(("file:", "~")):
            continue
        if ":" in url.split("/", 1)[0]:  # scp-like host:path
            continue
        if url not in found:
            found.append(url)
    return found


def _main_checkout(cwd) -> str:
    """The main checkout of the repository at ``cwd`` (:func:`git_nerve.dotgit.main_checkout`), a bare
    repository's own directory, else (a separate git dir's, asked from a linked worktree) the common dir."""
    from ..dotgit import main_checkout

    common = cli.out(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=cwd)
    return os.path.realpath(main_checkout(common, cwd) or common)  # as git names it


def relative_url_config(cwd, remote: str) -> dict:
    """``git -c`` settings that make git resolve a relative remote URL against the main checkout, as it does
    there, wherever it runs (a task's worktree lives in a sibling directory). Nothing is written to config."""
    if not relative_urls(cwd, remote):
        return {}
    return url_rewrites(cwd, remote, _main_checkout(cwd))


def relative_url_warning(cwd, remote: str) -> str | None:
    """One line for `init` and `spawn` when ``remote``'s URL is a relative path (what works where), else None."""
    urls = relative_urls(cwd, remote)
    if not urls:
        return None
    base = _main_checkout(cwd)
    absolute = os.path.normpath(os.path.join(base, urls[0]))
    return (f"{remote}'s URL {urls[0]!r} is relative: git-nerve resolves it against the main checkout, but a plain "
            f"`git push`/`git fetch` inside a task's worktree does not (use `git worker done`, or make it absolute: "
            f"git remote set-url {remote} {absolute})")
