"""The `nerve.*` settings, read through git config (so `git -c` works).

| key                      | default                                              |
|--------------------------|------------------------------------------------------|
| nerve.integration        | the remote's default branch, else the main checkout's branch |
| nerve.remote             | `origin` when it exists, else the only remote, else none |
| nerve.branchPrefix       | `feat/`                                              |
| nerve.worktreeDir        | `<parent of toplevel>/<repo name>.worktrees`         |
| nerve.staleAfter         | 5 minutes (ASSIGNED/WORKING/CONFLICTED without a heartbeat) |
| nerve.reviewStaleAfter   | 1 hour (IN_REVIEW without activity)                  |
| nerve.heartbeatInterval  | 15 seconds (`git worker run`)                        |
"""

from __future__ import annotations

from dataclasses import dataclass
import re
from pathlib import Path

from ..errors import UsageError
from ..git import config as gitconfig
from ..git import remote as gitremote
from ..paths import RepoPaths


@dataclass(frozen=True)
class Settings:
    remote: str | None
    #: None when it cannot be told (nothing configured, no remote, the main checkout detached)
    integration_branch: str | None
    branch_prefix: str
    worktree_root: Path
    stale_after: float
    review_stale_after: float
    heartbeat_interval: float

    @property
    def integration(self) -> str:
        """The integration branch; a UsageError only when a command needs it and it cannot be told.

        (Commands on existing tasks use the branch stored with the task, so a
        main checkout on a detached HEAD must not stop them.)
        """
        if not self.integration_branch:
            raise UsageError(
                "cannot tell the integration branch (the main checkout is on a detached HEAD); "
                "set it with `git config nerve.integration <branch>`"
            )
        return self.integration_branch


_DURATION = r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$"  # re.match compiles it when a duration is set


def parse_duration(value: str | None, default: float, key: str) -> float:
    if value is None or value == "":
        return default
    m = re.match(_DURATION, value)
    if not m:
        raise UsageError(f"git config {key}={value!r} is not a duration (e.g. 300, 90s, 5m, 1h)")
    return float(m[1]) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m[2]]



def heartbeat_interval(config) -> float:
    """git config nerve.heartbeatInterval (default 15 s; ``config``: a repository's git config reader), refused when
    not positive: what `git nerve run` and `git worker run` beat at."""
    interval = parse_duration(config.get("nerve.heartbeatInterval"), 15.0, "nerve.heartbeatInterval")
    if interval <= 0:
        raise UsageError("git config nerve.heartbeatInterval must be positive")
    return interval

def _anchor(paths: RepoPaths) -> Path:
    """What the default worktree root is named after and put beside (a relative nerve.worktreeDir too): the main
    checkout when the common dir is its ``.git``, else the common dir itself (a bare repository, a git dir kept
    apart: ``--separate-git-dir``, a submodule's). Not the main checkout (:func:`git_nerve.dotgit.main_checkout`):
    the root must be the same from every worktree, or a task's worktree would fall outside it when asked from
    another, and an existing repository's root never moves."""
    common = paths.common_dir
    return common.parent if common.name == ".git" else common


def repo_name(paths: RepoPaths) -> str:
    name = _anchor(paths).name
    return name[:-4] if name.endswith(".git") and len(name) > 4 else name


def _head_branch(common_dir: Path) -> str | None:
    try:
        head = (common_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return head[len("ref: refs/heads/"):] if head.startswith("ref: refs/heads/") else None


def choose_remote(cfg: gitconfig.GitConfig, remotes: list[str]) -> str | None:
    configured = cfg.get("nerve.remote")
    if configured is not None:
        if configured in ("", "none"):
            return None
        if configured not in remotes:
            raise UsageError(f"git config nerve.remote={configured!r} names no remote (remotes: {', '.join(remotes) or 'none'})")
        return configured
    if "origin" in remotes:
        return "origin"
    return remotes[0] if len(remotes) == 1 else None


def load(paths: RepoPaths, cfg: gitconfig.GitConfig) -> Settings:
    cwd = paths.toplevel or paths.common_dir
    remotes = [k.split(".")[1] for k in cfg.keys_with_prefix("remote.") if k.endswith(".url")]
    remote = choose_remote(cfg, remotes)
    integration = cfg.get("nerve.integration")
    if not integration and remote:
        integration = gitremote.default_branch(cwd, remote, paths.common_dir)
    if not integration:
        integration = _head_branch(paths.common_dir)
    root_cfg = cfg.get("nerve.worktreeDir")
    if root_cfg:
        root = Path(root_cfg).expanduser()
        if not root.is_absolute():
            root = _anchor(paths) / root
    else:
        root = _anchor(paths).parent / f"{repo_name(paths)}.worktrees"
    return Settings(
        remote=remote,
        integration_branch=integration,
        branch_prefix=cfg.get("nerve.branchPrefix", "feat/") or "",
        worktree_root=root,
        stale_after=parse_duration(cfg.get("nerve.staleAfter"), 300.0, "nerve.staleAfter"),
        review_stale_after=parse_duration(cfg.get("nerve.reviewStaleAfter"), 3600.0, "nerve.reviewStaleAfter"),
        heartbeat_interval=parse_duration(cfg.get("nerve.heartbeatInterval"), 15.0, "nerve.heartbeatInterval"),
    )
