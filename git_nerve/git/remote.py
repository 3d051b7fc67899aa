"""Fetch and push through the git binary (network, credentials, hooks: git's own behaviour)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import GitError
from . import cli


def remotes(cwd) -> list[str]:
    out = cli.out(["remote"], cwd=cwd)
    return out.split() if out else []


def default_branch(cwd, remote: str) -> str | None:
    """The remote's default branch as recorded locally (refs/remotes/<remote>/HEAD)."""
    proc = cli.run(["symbolic-ref", "-q", f"refs/remotes/{remote}/HEAD"], cwd=cwd, check=False)
    ref = proc.stdout.strip()
    prefix = f"refs/remotes/{remote}/"
    if proc.returncode == 0 and ref.startswith(prefix):
        return ref[len(prefix):]
    return None


FETCH_ATTEMPTS = 3
#: what git says when two fetches into one repository race
_RACING_FETCH = ("did not send all necessary objects", "cannot lock ref")


def fetch(cwd, remote: str, branches: list[str]) -> None:
    """Update refs/remotes/<remote>/<b> for each branch (a branch missing on the remote is skipped)."""
    specs = [f"+refs/heads/{b}:refs/remotes/{remote}/{b}" for b in branches]
    for attempt in range(FETCH_ATTEMPTS):
        proc = cli.run(["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, *specs], cwd=cwd, check=False)
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
    proc = cli.run(["ls-remote", "--exit-code", "--heads", remote, branch], cwd=cwd, check=False)
    return proc.returncode == 0


@dataclass(frozen=True)
class PushResult:
    ok: bool
    rejected: bool  #: the remote moved (non-fast-forward / stale lease): retry after fetching
    message: str


def push(cwd, remote: str, src: str, dst_branch: str, *, expect: str | None = None, force_with_lease: bool = False,
         env_extra: dict | None = None) -> PushResult:
    """Push ``src`` to ``refs/heads/<dst_branch>`` on ``remote``.

    ``expect`` (a sha, or "" for "must not exist") makes the push a
    compare-and-set on the remote ref via --force-with-lease.
    """
    args = ["push", "--quiet", "--porcelain"]
    if expect is not None:
        args.append(f"--force-with-lease=refs/heads/{dst_branch}:{expect}")
    elif force_with_lease:
        args.append("--force-with-lease")
    args += [remote, f"{src}:refs/heads/{dst_branch}"]
    proc = cli.run(args, cwd=cwd, check=False, env=cli.clean_env(env_extra))
    text = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return PushResult(True, False, "")
    rejected = any(w in text for w in ("[rejected]", "non-fast-forward", "stale info", "fetch first", "[remote rejected]"))
    if "pre-push hook" in text or "hook declined" in text:
        rejected = False
    return PushResult(False, rejected, cli.last_line(proc.stderr) or cli.last_line(proc.stdout))


def delete_branch(cwd, remote: str, branch: str) -> bool:
    return cli.ok(["push", "--quiet", remote, f":refs/heads/{branch}"], cwd=cwd)
