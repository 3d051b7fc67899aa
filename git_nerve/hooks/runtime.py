"""The Python parts of the hooks: pre-push, and what post-commit / post-rewrite cannot do in sh.

Commits, merges and rewrites are recorded by the shim itself (one line in
``<git-dir>/nerve/spool``, ingested by the next reader of the bus:
:mod:`git_nerve.bus.spool`). Python starts for pre-push, for the knowledge
index, for the radar (in the background) and for the CONFLICTED hint after
a rebase that stopped.

Every agent commit pays for this module, so it imports only the standard
library and git_nerve's own standard-library modules (bus, context, git.cli,
worker.heartbeat). The shims start Python with ``-S``; the two parts that
need installed packages (the pre-push merge check, pygit2, and whatever the
knowledge trigger loads) turn site-packages on when they run.

* In a worker's worktree (its git dir holds ``nerve/.worker-ctx.json``)
  pre-push records a heartbeat and refuses pushes that would carry broken
  work. Elsewhere the hooks only trigger the knowledge index.
* post-commit and post-rewrite fail open: any failure of ours is one warning
  line and exit 0. The bus is opened with a short busy timeout, so a locked
  bus delays a commit by at most :data:`BUSY_TIMEOUT` seconds.
* Git runs hooks with GIT_DIR / GIT_INDEX_FILE set for their own worktree;
  git commands here keep them (``inherit_location``) because they all act on
  that worktree.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path

from ..bus import workers
from ..bus.connection import Bus
from ..context import WorkerContext
from ..context import read as read_context
from ..errors import ExitCode, NerveError
from ..git import cli
from ..paths import RepoPaths
from ..text import clean
from ..worker import heartbeat
from ..worker.states import State

#: Seconds a hook waits for a bus that another process holds locked.
BUSY_TIMEOUT = 1.0
#: What a CONFLICTED worker runs once its rebase is finished.
NEXT_AFTER_REBASE = "git worker done --skip-rebase"
KNOWLEDGE_FILE = "knowledge.yaml"
_ZERO = frozenset({"0" * 40, "0" * 64})


# -- where the hook runs -------------------------------------------------------------------


#: The worktree a hook runs for: git_dir, common_dir, toplevel (None when bare).
Where = RepoPaths


def locate(cwd: str | os.PathLike[str] | None = None) -> Where:
    """The worktree a hook runs for, read the way git set it up, without running git.

    Git runs hooks at the top of the work tree (in the git dir when bare),
    with GIT_DIR set for linked worktrees. Anything unusual asks git.
    """
    here = Path(os.path.abspath(cwd or os.getcwd()))
    env_dir = os.environ.get("GIT_DIR")
    if env_dir:
        git_dir = Path(os.path.abspath(here / env_dir))
    elif (here / ".git").is_dir():
        git_dir = here / ".git"
    else:
        from ..paths import discover

        paths = discover(here, inherit_location=True)
        return paths
    env_common = os.environ.get("GIT_COMMON_DIR")
    if env_common:
        common = Path(os.path.abspath(here / env_common))
    else:
        try:
            pointer = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        except OSError:
            pointer = ""
        common = Path(os.path.normpath(git_dir / pointer)) if pointer else git_dir
    env_tree = os.environ.get("GIT_WORK_TREE")
    if env_tree:
        top: Path | None = Path(os.path.abspath(here / env_tree))
    else:
        top = None if os.path.samefile(here, git_dir) else here
    return Where(git_dir, common, top)


def operation_in_progress(git_dir: Path) -> str | None:
    """'rebase', 'merge', 'cherry-pick' or 'revert' when git is in the middle of one here.

    (The same test as ``git.worktrees.operation_in_progress``, without the
    imports that module brings onto every commit.)
    """
    if (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply").is_dir():
        return "rebase"
    if (git_dir / "MERGE_HEAD").is_file():
        return "merge"
    if (git_dir / "CHERRY_PICK_HEAD").is_file():
        return "cherry-pick"
    if (git_dir / "REVERT_HEAD").is_file():
        return "revert"
    return None


# -- output --------------------------------------------------------------------------------


def warn(hook: str, text: str) -> None:
    sys.stderr.write(clean(f"warning: git-nerve {hook}: {text}") + "\n")


def describe(exc: BaseException) -> str:
    """One readable line for a failure of ours."""
    if isinstance(exc, NerveError):
        return exc.message
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower():
        return f"the bus stayed locked by another process for {BUSY_TIMEOUT:g}s"
    if isinstance(exc, sqlite3.DatabaseError):
        return f"the bus is unreadable ({exc})"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def guarded(hook: str, what: str, fn: Callable[..., object], *args, **kwargs) -> object:
    """Run ``fn``; a failure becomes one warning line ``<what>: <why>`` (fail open)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - failing open is the point
        warn(hook, f"{what}: {describe(exc)}")
        return None


# -- the bus, opened for a hook ----------------------------------------------------------------


def open_bus(common_dir: Path) -> Bus:
    """The bus as a hook opens it: an existing file only, a short busy timeout, one try."""
    return Bus(common_dir / "nerve" / "bus.db", create=False, busy_timeout=BUSY_TIMEOUT, retries=1)


# -- shared parts ----------------------------------------------------------------------------------


def worker_context(where: Where, hook: str) -> WorkerContext | None:
    try:
        return read_context(where.git_dir)
    except NerveError as exc:
        warn(hook, exc.message)
        return None


def knowledge_here(where: Where) -> bool:
    return where.toplevel is not None and (where.toplevel / KNOWLEDGE_FILE).is_file()


def _git(args: list[str]) -> bytes:
    """stdout of a git command on this hook's own worktree."""
    return cli.run(args, inherit_location=True, text=False).stdout


def _names(raw: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p]


_site_loaded = False


def load_site_packages() -> None:
    """Make installed packages importable in a Python the shim started with ``-S``."""
    global _site_loaded
    if sys.flags.no_site and not _site_loaded:
        import site

        site.main()
        _site_loaded = True


def _import_trigger():
    try:
        from ..knowledge import trigger
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("git_nerve") or not sys.flags.no_site or _site_loaded:
            raise
        load_site_packages()
        from ..knowledge import trigger
    return trigger


def schedule_knowledge(where: Where, files: list[str], hook: str) -> None:
    """Ask the knowledge index to re-read ``files``; it must not make git wait."""
    if not files or where.toplevel is None:
        return

    def go() -> None:
        _import_trigger().schedule(where.toplevel, where.git_dir, where.common_dir, files)

    guarded(hook, "knowledge index not scheduled", go)


# -- post-commit -----------------------------------------------------------------------------------


def post_commit(where: Where) -> int:
    """The parts of post-commit the shim cannot do: the radar and the knowledge index.

    The commit itself is recorded by the shim (one line in the worktree's
    spool, see :mod:`.spool`); the radar's notice is printed by the shim too.
    """
    hook = "post-commit"
    ctx = worker_context(where, hook)
    knowledge = knowledge_here(where) and not os.environ.get("NERVE_HOOK_BACKGROUND")
    if ctx is None and not knowledge:
        return 0
    if ctx is not None and operation_in_progress(where.git_dir) != "rebase":
        guarded(hook, "conflict radar not refreshed", _radar, where, ctx.task_id)
    if knowledge:
        files = guarded(hook, "knowledge index not scheduled", _commit_files)
        schedule_knowledge(where, files or [], hook)
    return 0


#: the live states the radar compares (git_nerve.radar.scan.LIVE; that module imports pygit2)
RADAR_STATES = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")


def _radar(where: Where, task_id: str) -> None:
    """Start the radar's recompute of this task's pairs (never waited on); print what it found last time."""
    from ..radar import background

    if where.toplevel is None:
        return
    with open_bus(where.common_dir) as bus:
        others = [w for w in workers.all_workers(bus.conn, states=RADAR_STATES) if w.task_id != task_id]
    if others:  # alone, there is nothing to collide with but the integration branch: `git worker conflicts`
        background.spawn(where.toplevel, task_id, where.common_dir / "nerve" / "radar.log")


def _commit_files() -> list[str]:
    return _names(_git(["diff-tree", "-r", "-z", "--no-commit-id", "--name-only", "--root",
                        "--diff-merges=first-parent", "HEAD"]))


# -- post-rewrite ---------------------------------------------------------------------------------


def parse_rewrites(text: str) -> list[list[str]]:
    """git's post-rewrite input: ``<old-sha> <new-sha> [<extra>]`` per line."""
    pairs = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            pairs.append([parts[0], parts[1]])
    return pairs


def post_rewrite(where: Where, source: str, stdin: str) -> int:
    """The parts of post-rewrite the shim cannot do: the hint to a CONFLICTED task, the knowledge index.

    The rewrite itself is recorded by the shim (see :mod:`.spool`).
    """
    hook = "post-rewrite"
    pairs = parse_rewrites(stdin)
    ctx = worker_context(where, hook)
    knowledge = knowledge_here(where)
    if ctx is not None and guarded(hook, "task state not read", _conflicted_rebase_finished, where, ctx.task_id, source):
        sys.stderr.write(f"git-nerve: {ctx.task_id} is CONFLICTED and its rebase is finished; next: {NEXT_AFTER_REBASE}\n")
    if knowledge and pairs:
        old_tip = pairs[-1][0]
        files = guarded(hook, "knowledge index not scheduled", lambda: _names(_git(["diff", "--name-only", "-z", old_tip, "HEAD", "--"])))
        schedule_knowledge(where, files or [], hook)
    return 0


def _conflicted_rebase_finished(where: Where, task_id: str, source: str) -> bool:
    """True when the next step is ``done --skip-rebase``."""
    # git runs post-rewrite "rebase" as the rebase's last step, before it removes its state
    if not (source == "rebase" or operation_in_progress(where.git_dir) != "rebase"):
        return False
    with open_bus(where.common_dir) as bus:
        w = workers.get(bus.conn, task_id)
    return w is not None and w.state == State.CONFLICTED.value


# -- pre-push ------------------------------------------------------------------------------------


class RefUpdate(namedtuple("RefUpdate", "local_ref local_sha remote_ref remote_sha")):
    """One line of pre-push's input."""

    __slots__ = ()

    @property
    def deletes(self) -> bool:
        return self.local_sha in _ZERO


def parse_updates(text: str) -> list[RefUpdate]:
    """git's pre-push input: ``<local ref> <local sha> <remote ref> <remote sha>`` per line."""
    updates = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4:
            updates.append(RefUpdate(*parts))
    return updates


#: pre-push's exit status when it refuses (the shim lets any other failure of ours through).
REFUSED = int(ExitCode.CHECK_FAILED)


def refuse(reason: str) -> None:
    sys.stderr.write(clean(f"git-nerve: push refused: {reason}") + "\n")


def _is_nerve_remote(remote: str, url: str) -> bool:
    """Is this push aimed at the remote git-nerve merges into (``nerve.remote``, else ``origin``, else the only
    remote)? A push of the integration branch to another remote (a backup mirror) is none of our business."""
    raw = cli.run(["config", "-z", "--get-regexp", r"^(nerve\.remote|remote\..+\.(url|pushurl))$"],
                  inherit_location=True, check=False).stdout
    configured, urls = None, {}
    for entry in (e for e in raw.split("\0") if e):
        key, _, value = entry.partition("\n")
        if key == "nerve.remote":
            configured = value
        else:
            urls.setdefault(key[len("remote."):key.rfind(".")], []).append(value)
    if configured is not None:
        ours = None if configured in ("", "none") else configured
    else:
        ours = "origin" if "origin" in urls else (next(iter(urls)) if len(urls) == 1 else None)
    if ours is None:
        return False
    return remote == ours or (bool(url) and url in urls.get(ours, [])) or (remote in urls.get(ours, []))


def pre_push(where: Where, remote: str, stdin: str, url: str = "") -> int:
    """Refuse (exit :data:`REFUSED`, one line per reason) a push that would carry broken work."""
    hook = "pre-push"
    ctx = worker_context(where, hook)
    if ctx is None:
        return 0
    updates = parse_updates(stdin)
    worker = guarded(hook, "push not checked against the bus", _push_heartbeat, where, ctx.task_id)
    reasons: list[str] = []

    op = operation_in_progress(where.git_dir)
    if op in ("rebase", "merge"):
        reasons.append(f"a {op} is in progress in this worktree; finish it (git {op} --continue) or abort it (git {op} --abort)")
    if worker is not None:
        if worker.state == State.CONFLICTED.value and os.environ.get("NERVE_INTERNAL_PUSH") != "done":
            reasons.append(f"task {worker.task_id} is CONFLICTED; resolve the rebase, then run `{NEXT_AFTER_REBASE}` (it pushes)")
        target = f"refs/heads/{worker.integration}"
        if any(u.remote_ref == target for u in updates) and _is_nerve_remote(remote, url):
            reasons.append(
                f"this push updates {worker.integration}, the integration branch; only `git worker merge` does that "
                f"(push {ctx.branch} instead)"
            )
    marked = guarded(hook, "conflict-marker check skipped", _marked_files, worker, updates)
    tips = {u.local_sha for u in updates}
    base = None
    if worker is not None and any(m.commit not in tips for m in marked or []):
        found = guarded(hook, "integration branch not read", _integration_tip, remote, worker.integration)
        base = found[0].split("/", 2)[-1] if found else worker.integration  # origin/main, or main
    for m in marked or []:
        reasons.append(conflict_block_reason(m.path, m.commit, at_tip=m.commit in tips, integration=base))
    if reasons:
        for reason in reasons:
            refuse(reason)
        return REFUSED
    if worker is not None:
        guarded(hook, "merge check against the integration branch skipped", _warn_if_conflicting, where, remote, worker, updates)
    return 0


def conflict_block_reason(path: str, commit: str, *, at_tip: bool, integration: str | None = None) -> str:
    """Why a push carrying a conflict block is refused, and what fixes it.

    Every pushed commit is checked, not only the tip: `git worker merge` keeps the task's commits as they
    are (--no-ff), so a commit holding a block would land in the integration branch's history (a bisect
    or a build of it stops there). A fixing commit on top therefore does not help; rewriting that commit
    does, or squashing the task's commits into one (the tip's tree, once it is fixed).
    """
    c = commit[:12]
    if at_tip:
        return f"{path} still holds a conflict block (commit {c}, the tip); remove it, then `git commit --amend`"
    return (f"{path} holds a conflict block in commit {c}, before the tip: every pushed commit is checked (merge keeps "
            f"them all), so a fixing commit on top does not help; rewrite {c} (`git rebase -i {c}~1`, edit or squash "
            f"it), or make the task one commit: `git reset --soft $(git merge-base HEAD {integration or 'main'})`, "
            "fix the file if it still holds the block, `git commit`")


def _push_heartbeat(where: Where, task_id: str) -> workers.Worker | None:
    with open_bus(where.common_dir) as bus:
        heartbeat.record(bus, task_id, source="pre-push")
        return workers.get(bus.conn, task_id)


def _marked_files(worker: workers.Worker | None, updates: list[RefUpdate]):
    from ..git import conflicts

    tips = [u.local_sha for u in updates if not u.deletes]
    exclude = ["--remotes", *(u.remote_sha for u in updates if u.remote_sha not in _ZERO)]
    if worker is not None:
        exclude.append(f"refs/heads/{worker.integration}")
    commits = conflicts.pushed_commits(None, tips, exclude, inherit_location=True)
    return conflicts.conflict_blocks(None, commits, inherit_location=True)


def _integration_tip(remote: str, integration: str) -> tuple[str, str] | None:
    """(ref, sha) of the integration branch's tip: the remote's copy if we have one, else the local branch."""
    candidates = [f"refs/remotes/{remote}/{integration}", f"refs/heads/{integration}"]
    out = _git(["for-each-ref", "--format=%(refname) %(objectname)", *candidates]).decode()
    found = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    for ref in candidates:
        if ref in found:
            return ref, found[ref]
    return None


def _warn_if_conflicting(where: Where, remote: str, worker: workers.Worker, updates: list[RefUpdate]) -> None:
    tip = _integration_tip(remote, worker.integration)
    if tip is None:
        return
    ref, onto = tip
    target = f"refs/heads/{worker.integration}"
    for u in updates:
        if u.deletes or not u.remote_ref.startswith("refs/heads/") or u.remote_ref == target or u.local_sha == onto:
            continue
        if cli.ok(["merge-base", "--is-ancestor", onto, u.local_sha], inherit_location=True):
            continue  # already contains the integration tip: nothing to conflict with
        load_site_packages()
        from ..git import conflicts

        files = conflicts.would_conflict(where.common_dir, onto, u.local_sha)
        if files:
            branch = u.remote_ref[len("refs/heads/"):]
            shown = ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else "")
            warn("pre-push", f"{branch} would conflict with {worker.integration} ({ref}) in {shown}; "
                             "`git worker done` rebases onto it")


# -- dispatch ----------------------------------------------------------------------------------------


def run(hook: str, args: list[str], stdin) -> int:
    """Run one hook as git called it."""
    where = locate()
    if hook == "post-commit":
        return post_commit(where)
    if hook == "pre-commit":
        from .precommit import pre_commit  # copied secrets stay out of git (worktree_prep)

        return pre_commit(where)
    text = stdin.read().decode("utf-8", "replace") if stdin is not None else ""
    if hook == "post-merge":
        return 0  # all of it is the shim's line in the spool
    if hook == "post-rewrite":
        return post_rewrite(where, args[0] if args else "", text)
    if hook == "pre-push":
        return pre_push(where, args[0] if args else "", text, args[1] if len(args) > 1 else "")
    raise ValueError(f"no hook named {hook!r}")
