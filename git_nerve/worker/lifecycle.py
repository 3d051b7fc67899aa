"""The task lifecycle: spawn, start, done, review, merge, cancel, retry, fail.

Rules every function here keeps:

* The bus is the only source of truth; every state change is a
  compare-and-set (:mod:`.transitions`).
* No git or subprocess work runs while a bus write transaction is open.
* Git work happens first, the bus row last, so a command killed half-way is
  finished by running it again (each command is idempotent).
* Nothing unmerged is ever destroyed: before a branch or worktree is removed
  its tip (and, with ``--force``, a snapshot of uncommitted work) is kept
  under ``refs/nerve/archive/<task-id>``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .. import clock, faults
from ..bus import messages, workers
from ..bus.connection import Bus
from ..context import WorkerContext
from ..context import write as write_ctx
from ..errors import CheckFailed, ConflictError, GitError, InvalidTransition, UsageError
from ..git import cli, destroy, refs, worktrees
from ..git import config as gitconfig
from ..git import remote as gitremote
from ..locks import hold
from ..paths import RepoPaths, discover
from . import ids, repair
from .settings import Settings
from .settings import load as load_settings
from .states import State
from .transitions import Outcome, get, transition, unknown

MERGE_ATTEMPTS = 3


# -- the repository handle -------------------------------------------------------


class Repo:
    """One command's view of a repository: where it lives, its bus, its settings."""

    def __init__(self, paths: RepoPaths, bus: Bus):
        self.paths = paths
        self.bus = bus
        self._config: gitconfig.GitConfig | None = None
        self._settings: Settings | None = None

    @property
    def cwd(self) -> Path:
        """Where repository-wide git commands run.

        The common dir once this worktree is gone (``merge`` or ``cancel
        --cleanup`` run from inside the task's own worktree removes it).
        """
        top = self.paths.toplevel
        return top if top is not None and top.is_dir() else self.paths.common_dir

    @property
    def config(self) -> gitconfig.GitConfig:
        if self._config is None:
            self._config = gitconfig.read(self.cwd)
        return self._config

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.paths, self.config)
        return self._settings

    def lock_path(self, name: str) -> Path:
        return self.paths.nerve_dir / "locks" / f"{name}.lock"

    def close(self) -> None:
        self.bus.close()

    def __enter__(self) -> Repo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def refuse_bare(cwd: str | os.PathLike[str] | None = None) -> None:
    """UsageError in a bare repository, before a command creates anything there (its bus)."""
    paths = discover(cwd)
    if paths.toplevel is None:
        gitconfig.refuse_bare(gitconfig.read(paths.common_dir), None, "spawn workers")


def open_repo(cwd: str | os.PathLike[str] | None = None, *, create: bool = True) -> Repo:
    paths = discover(cwd)
    if paths.toplevel is None:  # a bare repository is a remote: refused before anything is read or made there
        gitconfig.refuse_bare(gitconfig.read(paths.common_dir), None, "run git-nerve")
    return Repo(paths, Bus(paths.bus_path, create=create))


# -- helpers ------------------------------------------------------------------------


def integration_ref(repo: Repo, integration: str, *, fetch: bool) -> str:
    """The ref that holds the integration branch's current tip, fetching first when there is a remote."""
    remote = repo.settings.remote
    if remote:
        if fetch:
            fetch_branches(repo, remote, [integration])
        ref = f"refs/remotes/{remote}/{integration}"
        if refs.exists(repo.cwd, ref):
            return ref
    ref = f"refs/heads/{integration}"
    if not refs.exists(repo.cwd, ref):
        raise GitError(f"the integration branch {integration!r} does not exist (set `git config nerve.integration <branch>`)")
    return ref


def repair_leftovers(repo: Repo) -> list[str]:
    """Remove what killed git processes left (dead `git worktree add`s, stale lock files); one line each."""
    return repair.clean_git_leftovers(repo.paths.common_dir, cwd=repo.cwd, worktree_lock=repo.lock_path("worktrees"),
                                      scope=lambda: door_scope(repo))


def door_scope(repo: Repo) -> destroy.Scope:
    """What the door for destruction (:mod:`..git.destroy`) proves against: the roots, every task's worktree."""
    from .settings import main_checkout

    final = (State.COMPLETED.value, State.FAILED.value)
    rows = [(w.task_id, w.worktree, w.state not in final) for w in workers.all_workers(repo.bus.conn)]
    main = None if repo.paths.is_bare else main_checkout(repo.paths)
    return destroy.scope(repo.paths.common_dir, main, repo.settings.worktree_root, rows)


def fetch_branches(repo: Repo, remote: str, branches: list[str]) -> None:
    """Fetch, one command at a time: concurrent fetches into one repository fail
    ("did not send all necessary objects") when they race on the same objects."""
    with hold(repo.lock_path("fetch"), what="the fetch lock"):
        gitremote.fetch(repo.cwd, remote, branches)


def _require_tip(cwd: Path, rev: str, what: str) -> str:
    sha = refs.resolve(cwd, rev)
    if sha is None:
        raise GitError(f"{what} {rev!r} does not name a commit")
    return sha


def _publish(bus: Bus, task_id: str, kind: str, payload: dict) -> None:
    with bus.write() as conn:
        messages.publish(conn, task_id, kind, payload, clock.now())


@dataclass
class SpawnResult:
    worker: workers.Worker
    created: bool
    hooks_installed: bool = False
    warnings: list[str] = field(default_factory=list)


# -- spawn ----------------------------------------------------------------------------


def spawn(
    repo: Repo,
    task_id: str,
    *,
    description: str = "",
    from_ref: str | None = None,
    fetch: bool = True,
    adopt: bool = False,
) -> SpawnResult:
    """Create branch ``<prefix><task-id>`` and its worktree, then the bus row (ASSIGNED).

    Idempotent: spawning an existing task returns it. A spawn that fails
    half-way removes what it created; one that was killed is completed by
    running it again (the branch and worktree it made are adopted). A branch
    that existed before (here or on the remote) is refused unless ``adopt``:
    then it is recorded as adopted and git-nerve never deletes it (:mod:`.owned`).
    Spawns of ids that differ only in case run one at a time (one lock per casefolded
    id), so the later one always gets the collision message.
    """
    ids.validate(task_id)
    ids.validate_description(description)
    gitconfig.refuse_bare(repo.config, repo.paths.toplevel, "spawn workers")
    with hold(repo.lock_path(f"spawn-{workers.task_key(task_id)}"), what=f"the spawn lock of {task_id}"):
        return _spawn(repo, task_id, description=description, from_ref=from_ref, fetch=fetch, adopt=adopt)


def _spawn(repo: Repo, task_id: str, *, description: str, from_ref: str | None, fetch: bool, adopt: bool) -> SpawnResult:
    from . import owned

    gitconfig.refuse_unsupported_object_format(repo.config)
    repair_leftovers(repo)
    existing = workers.get_by_key(repo.bus.conn, task_id)
    unfinished = owned.spawning(repo.paths, task_id)
    if existing is not None:
        owned.clear_spawning(repo.paths, task_id)  # a spawn killed after its bus row: nothing left to finish
    elif unfinished is not None and unfinished["task_id"] != task_id:
        raise UsageError(f"task id {task_id!r} collides with task {unfinished['task_id']!r} (ids are case-insensitive), "
                         f"whose spawn did not finish: run `git worker spawn {unfinished['task_id']}` to finish it")
    if existing is not None:
        if existing.task_id != task_id:
            raise UsageError(f"task id {task_id!r} collides with existing task {existing.task_id!r} (ids are case-insensitive)")
        _refuse_respawn(repo, existing, description, from_ref)
        _ensure_worktree(repo, existing)
        _repair_ctx(existing)
        # a spawn killed after its bus row never reached the hooks: finish that too
        res = SpawnResult(existing, created=False)
        res.hooks_installed, warning = _ensure_hooks(repo, Path(existing.worktree))
        if warning:
            res.warnings.append(warning)
        return res

    settings = repo.settings
    cwd = repo.cwd
    if from_ref:
        full = refs.full_name(cwd, from_ref) or ""
        if fetch and settings.remote and full.startswith(f"refs/remotes/{settings.remote}/"):
            fetch_branches(repo, settings.remote, [full[len(f"refs/remotes/{settings.remote}/"):]])
        base_ref = full or from_ref
        base_sha = refs.resolve(cwd, from_ref)
        if base_sha is None:
            raise UsageError(f"--from {from_ref!r} does not name a commit")
    else:
        if refs.resolve(cwd, "HEAD") is None and not refs.exists(cwd, f"refs/heads/{settings.integration}"):
            raise GitError("the repository has no commits yet; make a first commit before spawning workers")
        base_ref = integration_ref(repo, settings.integration, fetch=fetch)
        base_sha = _require_tip(cwd, base_ref, "integration branch")

    branch = f"{settings.branch_prefix}{task_id}"
    if not cli.ok(["check-ref-format", f"refs/heads/{branch}"], cwd=cwd):
        raise UsageError(f"{branch!r} is not a valid branch name (check nerve.branchPrefix)")
    if unfinished is not None and unfinished["branch"] == branch:
        adopted = bool(unfinished.get("adopted"))  # our own killed spawn made (or adopted) it: finish it
    else:
        found, remote_tip = _existing_branch(repo, branch, fetch=fetch)
        if found and not adopt:
            raise UsageError(f"branch {branch} already exists {found} and is not git-nerve's; "
                             f"`git worker spawn {task_id} --adopt` makes the task work on it (git-nerve then never "
                             "deletes it), or choose another task id")
        adopted = found is not None
        if remote_tip is not None and not refs.exists(cwd, f"refs/heads/{branch}"):
            base_sha = remote_tip  # adopting a branch only the remote has: start from its tip
    path = (settings.worktree_root / task_id).absolute()
    created_branch = created_worktree = False
    try:
        if unfinished != {"task_id": task_id, "branch": branch, "adopted": adopted}:
            owned.mark_spawning(repo.paths, task_id, branch, adopted=adopted)
        with hold(repo.lock_path("worktrees"), what="the worktree lock"):
            wt = worktrees.find_for_branch(cwd, f"refs/heads/{branch}")
            if wt is not None and wt.path.resolve() != path.resolve():
                raise UsageError(f"branch {branch} is already checked out at {wt.path}")
            if wt is None:
                if path.is_symlink() or (path.exists() and (not path.is_dir() or any(path.iterdir()))):
                    raise UsageError(f"{path} already exists and is not this task's worktree")
                path.parent.mkdir(parents=True, exist_ok=True)
                # set before git runs: a `git worktree add` that fails half-way (e.g. a failing
                # post-checkout hook) has already created the branch and the worktree
                created_branch = not refs.exists(cwd, f"refs/heads/{branch}")
                # recorded before git creates them (a kill leaves at most a record of something missing)
                destroy.record(repo.paths.common_dir, "worktree", os.fspath(path), task=task_id)
                if created_branch:
                    destroy.record(repo.paths.common_dir, "branch", branch, task=task_id)
                created_worktree = True
                worktrees.add(cwd, path, branch=branch, start=base_sha if created_branch else None)
                faults.point("spawn.after-worktree")
        ts = clock.now()
        write_ctx(
            worktrees.git_dir_of(path),
            WorkerContext(task_id=task_id, branch=branch, worktree=str(path), created_at=clock.iso(ts) or "", description=description),
        )
        faults.point("spawn.after-ctx")
        row = workers.Worker(
            task_id=task_id, state=State.ASSIGNED.value, branch=branch, worktree=str(path), base=base_ref,
            integration=settings.integration, description=description, assigned_at=ts, state_changed_at=ts,
            last_heartbeat=None, last_activity=ts, approved_at=None, heartbeat_status=None, progress=None,
            adopted=int(adopted),
        )
        with repo.bus.write() as conn:
            other = workers.get_by_key(conn, task_id)
            if other is not None:
                if other.task_id != task_id:  # a concurrent spawn of an id differing only in case won
                    raise UsageError(f"task id {task_id!r} collides with existing task {other.task_id!r} (ids are case-insensitive)")
                # lost a race with a concurrent spawn of the same task: theirs stands
                created_branch = created_worktree = False
                return SpawnResult(other, created=False)
            workers.insert(conn, row)
            messages.publish(
                conn, task_id, "task_assign",
                {"to": "ASSIGNED", "branch": branch, "worktree": str(path), "base": base_ref, "base_sha": base_sha,
                 "description": description, "adopted": adopted},
                ts,
            )
            faults.point("spawn.before-commit")  # killed holding the bus write lock
    except BaseException:
        _rollback_spawn(repo, task_id, path if created_worktree else None, branch if created_branch else None, base_sha)
        if adopted or not refs.exists(cwd, f"refs/heads/{branch}"):
            owned.clear_spawning(repo.paths, task_id)  # else: a branch an earlier, killed spawn made stays ours
        raise
    faults.point("spawn.after-bus")
    owned.clear_spawning(repo.paths, task_id)
    result = SpawnResult(row, created=True)
    if settings.remote:
        relative = gitremote.relative_url_warning(cwd, settings.remote)
        if relative:
            result.warnings.append(relative)
    result.hooks_installed, warning = _ensure_hooks(repo, path)
    if warning:
        result.warnings.append(warning)
    return result


def _rollback_spawn(repo: Repo, task_id: str, path: Path | None, branch: str | None, base_sha: str) -> None:
    """Take back what a failed spawn made, through the door (best effort: the error that stopped it counts)."""
    try:
        sc = door_scope(repo)
        if path is not None:
            destroy.discard(repo.cwd, path, sc, task=task_id)
        if branch is not None:
            destroy.delete_branch(repo.cwd, repo.paths.common_dir, branch, owned_by_task=task_id, old=base_sha)
    except Exception:  # noqa: BLE001 - a rollback must not hide the cause
        pass


def _existing_branch(repo: Repo, branch: str, *, fetch: bool) -> tuple[str | None, str | None]:
    """Where ``branch`` exists before the spawn ("locally", "on origin"), and the remote's tip when only the
    remote has it (fetched). The remote is asked (`git ls-remote`) unless ``fetch`` is off; then its
    remote-tracking branch is what counts."""
    cwd = repo.cwd
    local = refs.exists(cwd, f"refs/heads/{branch}")
    remote = repo.settings.remote
    if not remote:
        return ("locally" if local else None), None
    tracking = f"refs/remotes/{remote}/{branch}"
    on_remote = gitremote.has_branch(cwd, remote, branch) if fetch else refs.exists(cwd, tracking)
    if local:
        return "locally", None
    if not on_remote:
        return None, None
    if fetch:
        fetch_branches(repo, remote, [branch])
    return f"on {remote}", refs.resolve(cwd, tracking)


def _refuse_respawn(repo: Repo, w: workers.Worker, description: str, from_ref: str | None) -> None:
    """Spawning an existing task again is idempotent only for the same input: a finished task's name is not
    reused, and a different -d or --from is refused rather than silently dropped."""
    if w.state == State.COMPLETED.value:
        raise InvalidTransition(f"task {w.task_id} is COMPLETED (merged into {w.integration}); its name stays with its "
                                "history: choose another task id")
    if w.state == State.FAILED.value:
        raise InvalidTransition(f"task {w.task_id} is FAILED; assign it again with `git worker retry {w.task_id}`, "
                                "or choose another task id")
    if description and description != w.description:
        raise UsageError(f"task {w.task_id} already exists with another description ({w.description or 'none'!r}); "
                         "nothing changed (spawn it again without -d, or choose another task id)")
    if from_ref and (refs.full_name(repo.cwd, from_ref) or from_ref) != w.base:
        raise UsageError(f"task {w.task_id} already exists on another base ({w.base}); nothing changed "
                         "(spawn it again without --from, or choose another task id)")


def _ensure_hooks(repo: Repo, worktree: Path | None = None) -> tuple[bool, str | None]:
    """Install the hooks where they are missing; (installed now?, warning). Never fails a spawn.

    The hooks directory is shared by all worktrees, except under a relative
    ``core.hooksPath``, which git resolves per worktree: then the task's own
    worktree gets them too.
    """
    from ..hooks import install as hooks_install

    targets = [repo.paths]
    hooks_path = repo.config.get("core.hooksPath")
    if worktree is not None and hooks_path and not os.path.isabs(os.path.expanduser(hooks_path)) and worktree.is_dir():
        targets.append(discover(worktree, inherit_location=False))
    installed_now, problems = False, []
    for paths in targets:
        try:
            if hooks_install.installed(paths):
                continue
            report = hooks_install.install(paths)
            installed_now = True
            problems += [c.message or f"{c.name}: not installed" for c in report.conflicts]
        except Exception as exc:  # a hook problem must not fail the spawn
            problems.append(str(exc))
    return installed_now, ("could not install git hooks: " + "; ".join(problems)) if problems else None


def _repair_ctx(w: workers.Worker) -> None:
    """Spawning an existing task rewrites its worktree's .worker-ctx.json if it is corrupt or missing."""
    from ..context import repair as repair_context  # not .repair (git's leftovers)

    path = Path(w.worktree)
    if w.state in (State.COMPLETED.value, State.FAILED.value) or not path.is_dir():
        return
    repair_context(worktrees.git_dir_of(path), WorkerContext(task_id=w.task_id, branch=w.branch, worktree=str(path),
                                                     created_at=clock.iso(w.assigned_at) or "", description=w.description))


def _ensure_worktree(repo: Repo, w: workers.Worker) -> None:
    """Make a live task's worktree complete: recreate it when missing (after a crash or a manual removal),
    adopt an existing one only once verified (:func:`_verify_worktree`), and rewrite a missing or wrong
    context file."""
    if w.state in (State.COMPLETED.value, State.FAILED.value):
        return
    w = follow_moved_worktree(repo, w)
    path = Path(w.worktree)
    if not path.exists() or not _registered(repo, path):
        with hold(repo.lock_path("worktrees"), what="the worktree lock"):
            destroy.prune_entry(repo.cwd, path, door_scope(repo))
            if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                destroy.remove_empty_dirs([path])  # an empty directory git never filled
            if path.exists() and not _registered(repo, path):
                raise GitError(f"{path} exists but is not a git worktree; move it away, then run this command again")
            if not path.exists():
                if not refs.exists(repo.cwd, f"refs/heads/{w.branch}"):
                    archived = refs.resolve(repo.cwd, refs.archive_name(w.task_id))
                    if archived is None:
                        raise GitError(f"branch {w.branch} of task {w.task_id} is gone and no archive ref exists")
                    destroy.record(repo.paths.common_dir, "branch", w.branch, task=w.task_id)
                    refs.update(repo.cwd, f"refs/heads/{w.branch}", _archived_tip(repo, w.task_id), None, "nerve: restore from archive")
                path.parent.mkdir(parents=True, exist_ok=True)
                destroy.record(repo.paths.common_dir, "worktree", os.fspath(path), task=w.task_id)
                worktrees.add(repo.cwd, path, branch=w.branch, start=None)
    _verify_worktree(repo, w)


def follow_moved_worktree(repo: Repo, w: workers.Worker) -> workers.Worker:
    """A task's worktree moved with `git worktree move`: find it where git says it is now (the worktree that
    has the task's branch checked out), record that path on the bus and in its context file."""
    recorded = Path(w.worktree)
    if recorded.is_dir() and (recorded / ".git").exists():
        return w
    from ..context import read as read_ctx

    now = worktrees.find_for_branch(repo.cwd, f"refs/heads/{w.branch}")
    if now is None or os.path.realpath(now.path) == os.path.realpath(recorded) or not now.path.is_dir():
        return w
    git_dir = worktrees.git_dir_of(now.path)
    try:
        ctx = read_ctx(git_dir)
    except UsageError:
        ctx = None
    if ctx is None or ctx.task_id != w.task_id:
        return w  # the branch checked out by hand somewhere else (the main checkout): not the task's worktree
    write_ctx(git_dir, WorkerContext(task_id=w.task_id, branch=w.branch, worktree=str(now.path),
                                     created_at=clock.iso(w.assigned_at) or "", description=w.description))
    with repo.bus.write() as conn:
        workers.update(conn, w.task_id, worktree=str(now.path))
        messages.publish(conn, w.task_id, "worktree_moved", {"from": str(recorded), "to": str(now.path)}, clock.now())
    repair.say(f"the worktree of {w.task_id} was moved to {now.path} (git worktree move); recorded its new place")
    return get(repo.bus, w.task_id)


def _registered(repo: Repo, path: Path) -> bool:
    real = os.path.realpath(path)
    return any(os.path.realpath(wt.path) == real and not wt.prunable for wt in worktrees.list_all(repo.cwd))


def _verify_worktree(repo: Repo, w: workers.Worker) -> None:
    """A task's worktree is adopted only when it is on the task's branch (or mid-operation there) and its
    context file names the task; a missing or wrong context file is rewritten (one `repaired:` line)."""
    from ..context import read as read_ctx

    path = Path(w.worktree)
    git_dir = worktrees.git_dir_of(path)
    head = refs.symbolic(path, "HEAD")
    if head != f"refs/heads/{w.branch}" and worktrees.operation_in_progress(git_dir) is None:
        raise GitError(f"the worktree {path} of {w.task_id} is not on its branch {w.branch} (HEAD: {head or 'detached'}); "
                       f"check {w.branch} out there again")
    try:
        ctx = read_ctx(git_dir)
    except UsageError:
        ctx = None
    if ctx is None or ctx.task_id != w.task_id or ctx.branch != w.branch or ctx.worktree != str(path):
        write_ctx(git_dir, WorkerContext(task_id=w.task_id, branch=w.branch, worktree=str(path),
                                         created_at=clock.iso(w.assigned_at) or "", description=w.description))
        repair.say(f"wrote the missing context file of {w.task_id} in {path}")


# -- agent commands -------------------------------------------------------------------------


def start(repo: Repo, task_id: str) -> Outcome:
    """ASSIGNED -> WORKING, with a first heartbeat. Idempotent when already WORKING.

    Also CONFLICTED -> WORKING once the agent has aborted the stopped rebase
    (``git rebase --abort``) to go on working before trying ``done`` again.
    """
    repair_leftovers(repo)
    w = get(repo.bus, task_id)
    if w.state == State.CONFLICTED.value:
        wt = Path(w.worktree)
        if wt.is_dir() and worktrees.operation_in_progress(worktrees.git_dir_of(wt)) == "rebase":
            raise ConflictError(
                f"the rebase of {task_id} is still in progress in {wt}",
                files=worktrees.conflicted_files(wt),
                details=[*REBASE_STEPS, "or, to go back to work first: git rebase --abort, then git worker start"],
            )
    ts = clock.now()
    return transition(
        repo.bus, task_id, State.WORKING, allowed_from=[State.ASSIGNED, State.CONFLICTED], already=[State.WORKING], verb="start",
        extra_messages=[("heartbeat", {"source": "start"})], columns={"last_heartbeat": ts},
    )


def fail(repo: Repo, task_id: str, reason: str) -> Outcome:
    """The agent gives up: ASSIGNED/WORKING/CONFLICTED -> FAILED."""
    if not reason.strip():
        raise UsageError("give a reason: git worker fail <reason>")
    return transition(
        repo.bus, task_id, State.FAILED,
        allowed_from=[State.ASSIGNED, State.WORKING, State.CONFLICTED], already=[State.FAILED], verb="fail",
        extra_messages=[("task_failed", {"reason": reason, "by": "agent"})],
    )


@dataclass
class DoneResult:
    outcome: Outcome | None
    rebased: bool = False
    rewritten: list[tuple[str, str]] = field(default_factory=list)
    pushed: bool = False
    tip: str | None = None
    already: bool = False


REBASE_STEPS = [
    "To resolve:",
    "  1. fix the conflicts in the worktree",
    "  2. git add <files>",
    "  3. git rebase --continue",
    "  4. git worker done --skip-rebase",
]


def done(repo: Repo, task_id: str, *, skip_rebase: bool = False, allow_empty: bool = False) -> DoneResult:
    """WORKING/CONFLICTED -> IN_REVIEW: rebase onto the integration branch, push, ask for review.

    The rebase runs in memory first (pygit2); a clean result moves the branch
    (only if it did not move meanwhile) and the worktree with it. On a
    conflict, git's own ``git rebase`` is started in the worktree so that the
    agent sees git's usual state and ``git rebase --continue`` works; the task
    becomes CONFLICTED and :class:`ConflictError` (exit 6) is raised.
    """
    w = get(repo.bus, task_id)
    if w.state in (State.IN_REVIEW.value, State.APPROVED.value, State.COMPLETED.value):
        return DoneResult(None, already=True)
    if w.state not in (State.WORKING.value, State.CONFLICTED.value):
        raise InvalidTransition(
            f"cannot finish {task_id}: it is {w.state}" + (" (run `git worker start` first)" if w.state == "ASSIGNED" else "")
        )
    w = follow_moved_worktree(repo, w)
    wt = Path(w.worktree)
    if not wt.is_dir():
        raise GitError(f"the worktree of {task_id} is missing ({wt}); run `git worker spawn {task_id}` to recreate it")
    repair_leftovers(repo)
    git_dir = worktrees.git_dir_of(wt)
    for line in (repair.undo_partial_reset(wt, git_dir), repair.abort_killed_rebase(wt, git_dir, w.branch)):
        if line:
            repair.say(line)
    op = worktrees.operation_in_progress(git_dir)
    if op:
        files = worktrees.conflicted_files(wt)
        if op == "rebase" and files and w.state == State.WORKING.value:
            # a `done` killed after git's rebase stopped on a conflict: record what it found
            _record_rebase_conflict(repo, w, files, (git_dir / "rebase-merge" / "onto"),
                                    integration_ref(repo, w.integration, fetch=False))
        raise ConflictError(
            f"a {op} is in progress in {wt}" + (f"; conflicting files: {', '.join(files)}" if files else ""),
            files=files, details=REBASE_STEPS if op == "rebase" else [f"finish or abort the {op} first"],
        )
    _refuse_branch_gone(repo, w, "done")
    if refs.symbolic(wt, "HEAD") != f"refs/heads/{w.branch}":
        raise GitError(f"the worktree {wt} is not on branch {w.branch}; check it out again first")
    dirty = worktrees.dirty_files(wt, untracked=False)
    if dirty:
        raise GitError(f"the worktree has uncommitted changes ({', '.join(dirty[:5])}{', ...' if len(dirty) > 5 else ''}); commit or stash them first")
    tip = _require_tip(wt, "HEAD", "branch")
    onto_ref = integration_ref(repo, w.integration, fetch=True)
    onto = _require_tip(repo.cwd, onto_ref, "integration branch")
    result = DoneResult(None, tip=tip)
    empty = refs.is_ancestor(wt, tip, onto)
    if empty and not allow_empty:
        raise InvalidTransition(
            f"nothing to review: {task_id} has no commits that are not on {w.integration}; commit the work first "
            "(or pass --allow-empty to finish it with nothing to merge)"
        )

    if not refs.is_ancestor(wt, onto, tip):
        _refuse_dropped(repo, w, tip, onto, onto_ref, verb="done")
        if skip_rebase:
            raise ConflictError(
                f"{w.branch} does not contain the latest {w.integration}; run `git worker done` (without --skip-rebase) to rebase",
            )
        new_tip, rewritten = _rebase(repo, w, wt, tip, onto, onto_ref)
        result.rebased, result.rewritten, result.tip = True, rewritten, new_tip
        tip = new_tip

    remote = repo.settings.remote
    if remote:
        push = gitremote.push(wt, remote, f"refs/heads/{w.branch}", w.branch, force_with_lease=True,
                              env_extra={"NERVE_INTERNAL_PUSH": "done"})
        if not push.ok:
            raise _push_failed(push, w, remote)
        result.pushed = True
        faults.point("done.after-push")
        if not w.pushed:  # only a branch git-nerve pushed itself is ever deleted on the remote (owned.keep_on_remote)
            with repo.bus.write() as conn:
                workers.update(conn, task_id, pushed=1)
                messages.publish(conn, task_id, "branch_pushed", {"remote": remote, "branch": w.branch, "sha": tip},
                                 clock.now())
    result.outcome = transition(
        repo.bus, task_id, State.IN_REVIEW, allowed_from=[State.WORKING, State.CONFLICTED],
        already=[State.IN_REVIEW, State.APPROVED, State.COMPLETED], verb="done",
        extra_messages=[("review_request", {"sha": tip, "onto": onto, "pushed": result.pushed,
                                            **({"empty": "allowed"} if empty else
                                               {"empty": "upstream"} if result.rebased and refs.is_ancestor(wt, tip, onto)
                                               else {})})],
    )
    return result


def _rebase(repo: Repo, w: workers.Worker, wt: Path, tip: str, onto: str, onto_ref: str) -> tuple[str, list[tuple[str, str]]]:
    from ..git import objects  # pygit2 loads only when a rebase is needed

    base = cli.out(["merge-base", tip, onto], cwd=wt)
    committer = objects.identity(wt)
    rb = objects.rebase_in_memory(repo.paths.common_dir, tip, base, onto, committer)
    if rb.clean:
        faults.point("done.after-rebase")  # rebased in memory, nothing moved yet
        if refs.resolve(wt, "HEAD") != tip:
            raise ConflictError(f"{w.branch} moved while it was being rebased; run `git worker done` again")
        git_dir = worktrees.git_dir_of(wt)
        repair.set_marker(git_dir, "done-reset", {"from": tip, "to": rb.tip})
        cli.run(["reset", "--quiet", "--keep", rb.tip], cwd=wt)
        repair.clear_marker(git_dir, "done-reset")
        faults.point("done.after-reset")
        if refs.resolve(wt, "ORIG_HEAD") != tip:  # a commit slipped in between: put it back
            cli.run(["reset", "--quiet", "--keep", "ORIG_HEAD"], cwd=wt, check=False)
            raise ConflictError(f"{w.branch} moved while it was being rebased; run `git worker done` again")
        # libgit2 runs no hooks: record what post-rewrite would have
        _publish(repo.bus, w.task_id, "rewrite", {"source": "rebase", "pairs": [list(p) for p in rb.rewritten], "by": "done"})
        return rb.tip, rb.rewritten
    # A conflict: hand over to git's own rebase so the agent gets git's normal state.
    git_dir = worktrees.git_dir_of(wt)
    repair.set_marker(git_dir, "done-rebase", {"tip": tip, "onto": onto})
    proc = cli.run(["rebase", onto], cwd=wt, check=False, env=cli.clean_env({"GIT_EDITOR": "true"}))
    if proc.returncode != 0 and worktrees.operation_in_progress(git_dir) is None:
        repair.clear_marker(git_dir, "done-rebase")
        raise GitError(f"git rebase onto {w.integration} failed: {cli.last_line(proc.stderr)}")
    if proc.returncode == 0 or worktrees.conflicted_files(wt):
        repair.clear_marker(git_dir, "done-rebase")  # finished, or stopped on a conflict: the agent's now
    if proc.returncode == 0:  # git resolved what libgit2 could not (e.g. renames): carry on
        new_tip = _require_tip(wt, "HEAD", "branch")
        return new_tip, []
    files = worktrees.conflicted_files(wt) or rb.conflicts
    faults.point("done.after-git-rebase")  # git's rebase stopped, the task not CONFLICTED yet
    if w.state != State.CONFLICTED.value:
        _record_rebase_conflict(repo, w, files, onto, onto_ref)
    raise ConflictError(
        f"rebase conflict with {w.integration}; {w.task_id} is CONFLICTED",
        files=files,
        details=[f"Conflicting files: {', '.join(files)}", f"Worktree: {wt}", *REBASE_STEPS],
    )


def _record_rebase_conflict(repo: Repo, w: workers.Worker, files: list[str], onto: str | Path, onto_ref: str) -> None:
    """WORKING -> CONFLICTED. ``onto`` is the sha, or git's ``rebase-merge/onto`` file that holds it."""
    if isinstance(onto, Path):
        try:
            onto = onto.read_text(encoding="utf-8").strip()
        except OSError:
            onto = ""
    transition(
        repo.bus, w.task_id, State.CONFLICTED, allowed_from=[State.WORKING], already=[State.CONFLICTED],
        verb="done", extra_messages=[("rebase_conflict", {"files": files, "onto": onto, "onto_ref": onto_ref})],
    )


# -- review ---------------------------------------------------------------------------------------


def approve(repo: Repo, task_id: str, *, by: str | None = None, comment: str | None = None) -> Outcome:
    """IN_REVIEW -> APPROVED. A comment also becomes a `reviewer` round in the task's thread."""
    comment = _blank_to_none(comment)
    payload = {"by": by, "comment": comment}
    return transition(
        repo.bus, task_id, State.APPROVED, allowed_from=[State.IN_REVIEW], already=[State.APPROVED], verb="approve",
        extra_messages=[("review_approved", payload)], columns={"approved_at": clock.now()},
        round_=_review_round("approved", by, comment),
        also_when_already=_new_comment(repo, task_id, State.APPROVED, "review_approved", comment),
    )


def request_changes(repo: Repo, task_id: str, *, comment: str | None = None, by: str | None = None) -> Outcome:
    """IN_REVIEW (or APPROVED) -> WORKING. The comment reaches the agent through its thread; on a task already
    WORKING a new comment is added to the thread all the same (never dropped), the same comment again is an
    idempotent rerun. `git worker request-changes` and the console both call this: the same rules."""
    comment = _blank_to_none(comment)
    with hold(task_lock(repo, get(repo.bus, task_id)), what=f"the lock of {task_id} (a merge of it is publishing)"):
        _refuse_merged_on_remote(repo, task_id, "request changes for")
        return transition(
            repo.bus, task_id, State.WORKING, allowed_from=[State.IN_REVIEW, State.APPROVED], already=[State.WORKING],
            verb="request changes for", extra_messages=[("changes_requested", {"by": by, "comment": comment})],
            columns={"approved_at": None}, round_=_review_round("changes_requested", by, comment),
            also_when_already=_new_comment(repo, task_id, State.WORKING, "changes_requested", comment),
        )


def _blank_to_none(comment: str | None) -> str | None:
    """An empty or blank comment is no comment (the console's empty field, `--comment ""`), everywhere alike."""
    return comment if comment is not None and comment.strip() else None


def _new_comment(repo: Repo, task_id: str, state: State, kind: str, comment: str | None) -> bool:
    """A review command rerun on a task already in ``state``: does it bring a comment not yet recorded?"""
    w = workers.get(repo.bus.conn, task_id)
    if not comment or w is None or w.state != state.value:
        return False
    last = messages.for_task(repo.bus.conn, task_id, kinds=(kind,))
    return not last or last[-1].payload.get("comment") != comment


def _refuse_dropped(repo: Repo, w: workers.Worker, tip: str, ours: str, target_ref: str, *, verb: str = "merge") -> None:
    """Refuse to publish again a commit the integration branch dropped (force-pushed backwards)."""
    from . import merged

    merged.refuse_dropped(repo, w, tip, ours, target_ref, verb=verb)


def _refuse_merged_on_remote(repo: Repo, task_id: str, verb: str) -> None:
    """An APPROVED task whose merge reached the remote unrecorded (a merge killed after its push) is
    recorded COMPLETED, and the command refused: its work is published. Call holding the task's lock."""
    from . import merged

    before = get(repo.bus, task_id).state
    w = merged.reconcile(repo, task_id, fetch=True, lock="held")
    if before == State.APPROVED.value and w.state == State.COMPLETED.value:
        raise InvalidTransition(
            f"cannot {verb} {task_id}: its merge already reached the remote{merged.merged_note(repo, task_id)}; "
            "recorded it as COMPLETED"
        )


def _review_round(verdict: str, by: str | None, comment: str | None) -> dict | None:
    if not comment:
        return None
    meta = {"verdict": verdict}
    if by:
        meta["by"] = by
    return {"role": "reviewer", "content": comment, "metadata": meta}


# -- merge -----------------------------------------------------------------------------------------


@dataclass
class MergeResult:
    outcome: Outcome | None
    commit: str | None = None
    into: str = ""
    pushed: bool = False
    attempts: int = 0
    archive_ref: str | None = None
    removed_worktree: bool = False
    deleted_branch: bool = False
    already: bool = False
    #: no merge commit was made: "empty" (an --allow-empty task) or "on-integration" (its commits got there another way)
    nothing: str | None = None
    warnings: list[str] = field(default_factory=list)
    submodule_archives: list[str] = field(default_factory=list)  # "<path>: <ref>" in each submodule's repository
    ignored_removed: list[str] = field(default_factory=list)  # ignored paths the removal deleted (never archived)
    #: why the branch was kept, here or on the remote (:mod:`.owned`): one line each
    kept: list[str] = field(default_factory=list)


def merge(
    repo: Repo,
    task_id: str,
    *,
    delete_branch: bool = False,
    check: str | None = None,
    force: bool = False,
) -> MergeResult:
    """APPROVED -> COMPLETED: a ``--no-ff`` merge built in memory, published by compare-and-set.

    With a remote: fetch, merge, push (a lease on the tip that was merged),
    retrying up to three times when the push loses a race. A conflict sends
    the task back to WORKING (exit 6). ``check`` runs on the merge result in a
    temporary worktree before anything moves; if it fails nothing moves
    (exit 7). Afterwards the worker's worktree is removed (its tip archived).
    """
    check_argv = _parse_check(check)
    repair_leftovers(repo)
    w = follow_moved_worktree(repo, get(repo.bus, task_id))
    if w.state == State.COMPLETED.value:
        res = MergeResult(None, already=True, into=w.integration)
        _cleanup(repo, w, res, delete_branch=delete_branch, force=force)
        return res
    if w.state != State.APPROVED.value:
        raise InvalidTransition(f"cannot merge {task_id}: it is {w.state} (merge needs APPROVED)")
    cwd = repo.cwd
    settings = repo.settings
    integration = w.integration
    wt = Path(w.worktree)
    if wt.is_dir():
        _refuse_branch_gone(repo, w, "merge")
    if wt.is_dir() and not force and not repair.removal_interrupted(wt, repo.paths.common_dir):
        dirty = worktrees.dirty_files(wt)
        if dirty:
            raise GitError(
                f"the worktree of {task_id} has uncommitted changes ({', '.join(dirty[:5])}); "
                "commit them (and have them reviewed) or pass --force to archive them"
            )
        _refuse_submodule_work(wt)  # before COMPLETED: its cleanup must not fail afterwards
    if wt.is_dir():
        from . import archive

        archive.refuse_homeless_submodules(repo, w)  # the cleanup keeps submodule work: refuse now if it cannot
    branch_ref = f"refs/heads/{w.branch}"
    tip = refs.resolve(cwd, branch_ref) or refs.resolve(cwd, refs.archive_name(task_id))
    if tip is None:
        raise GitError(f"branch {w.branch} of {task_id} does not exist")

    from ..git import objects

    res = MergeResult(None, into=integration)
    committer = objects.identity(cwd)
    author = objects.identity(cwd, "GIT_AUTHOR_IDENT")
    message = f"Merge {w.branch} ({task_id})\n" + (f"\n{w.description}\n" if w.description else "")
    with hold(repo.lock_path("merge"), what="the merge lock"):
        # looked at under the lock: a merge fast-forwarding this checkout makes it look dirty meanwhile
        target_wt = worktrees.find_for_branch(cwd, f"refs/heads/{integration}")
        _undo_killed_fast_forward(target_wt)
        if target_wt is not None and worktrees.dirty_files(target_wt.path, untracked=False):
            raise GitError(
                f"{integration} is checked out at {target_wt.path} with uncommitted changes; commit or stash them, then merge again"
            )
        for attempt in range(1, MERGE_ATTEMPTS + 1):
            res.attempts = attempt
            target_ref = integration_ref(repo, integration, fetch=True)
            ours = _require_tip(cwd, target_ref, "integration branch")
            if refs.is_ancestor(cwd, tip, ours):
                # already merged (a previous run was interrupted after publishing), or nothing to merge
                made = _merged_as(repo, w, tip, target_ref)
                res.pushed = made is not None and target_ref.startswith("refs/remotes/")
                with hold(task_lock(repo, w), what=f"the lock of {task_id}"):
                    _record_merge(repo, w, res, made, tip, target_ref, target_wt)
                break
            _refuse_dropped(repo, w, tip, ours, target_ref)
            mr = objects.merge_commit(repo.paths.common_dir, ours, tip, message, author, committer)
            if mr.commit is None:
                transition(
                    repo.bus, task_id, State.WORKING, allowed_from=[State.APPROVED], verb="merge",
                    extra_messages=[("merge_conflict", {"files": mr.conflicts, "into": integration, "onto": ours})],
                    columns={"approved_at": None},
                )
                raise ConflictError(
                    f"merging {task_id} into {integration} conflicts; the task is back to WORKING",
                    files=mr.conflicts,
                    details=[f"Conflicting files: {', '.join(mr.conflicts)}", "To resolve:",
                             f"  1. in {wt}: git worker done   (rebases onto {integration})",
                             "  2. get it approved again", f"  3. git worker merge {task_id}"],
                )
            faults.point("merge.after-commit")  # the merge commit exists, nothing moved
            if check_argv:
                _run_check(repo, mr.commit, check_argv)
            # publish and record under the task's lock: request-changes and cancel wait for it, so the
            # task cannot leave APPROVED between the integration branch moving and COMPLETED
            with hold(task_lock(repo, w), what=f"the lock of {task_id}"):
                now = get(repo.bus, task_id)
                if now.state != State.APPROVED.value:
                    raise InvalidTransition(
                        f"cannot merge {task_id}: it became {now.state} while the merge was prepared; nothing was merged"
                    )
                if target_ref.startswith("refs/remotes/"):  # (not for an integration branch the remote lacks)
                    push = _push_from_checkout(repo, settings.remote, mr.commit, integration, ours)
                    if push.rejected:
                        continue  # the remote moved between fetch and push: merge again on the new tip
                    if push.hook_refused:
                        raise _gate_refused(push, integration, settings.remote, task_id)
                    if push.remote_refused:
                        raise _remote_refused(push, integration, settings.remote,
                                              f"nothing was merged ({task_id} is still APPROVED)")
                    if not push.ok:
                        raise GitError(f"could not push {integration} to {settings.remote}: {push.message}")
                    faults.point("merge.after-push")  # the remote moved, the local branch not yet
                    res.pushed = True
                elif not _advance_local(repo, integration, ours, mr.commit, target_wt):
                    continue
                _record_merge(repo, w, res, mr.commit, tip, target_ref, target_wt)
            break
        else:
            raise GitError(f"{integration} kept moving; gave up after {MERGE_ATTEMPTS} attempts (run merge again)")
    faults.point("merge.after-transition")  # recorded, not cleaned up
    _cleanup(repo, w, res, delete_branch=delete_branch, force=force)
    return res


def _push_from_checkout(repo: Repo, remote: str, commit: str, integration: str, expect: str) -> gitremote.PushResult:
    """Push the merge from a real checkout of it (a temporary detached worktree, removed afterwards), so that
    every pre-push gate (pre-commit, lefthook, husky, the user's own) runs as for a person's push."""
    from .settings import main_checkout

    config = gitremote.from_checkout_config(main_checkout(repo.paths), remote)
    with worktrees.checkout_at(repo.cwd, repo.paths.common_dir, commit, what="push") as path:
        faults.point("merge.in-checkout")  # the temporary checkout exists, nothing pushed
        return gitremote.push(path, remote, commit, integration, expect=expect, config=config,
                              env_extra={"NERVE_INTERNAL_PUSH": "merge"})


def _gate_refused(push: gitremote.PushResult, integration: str, remote: str, task_id: str) -> CheckFailed:
    """A pre-push hook refused the merge's push: its own output, and the promise that nothing moved."""
    output = [ln for ln in push.output.splitlines() if ln.strip() and not ln.startswith("error: failed to push some refs")]
    return CheckFailed(
        f"a pre-push hook refused the push of {integration} to {remote}; nothing was merged "
        f"({task_id} is still APPROVED: fix what it says, then run the merge again)",
        details=output[-40:],
    )


def _remote_refused(push: gitremote.PushResult, branch: str, remote: str, then: str) -> GitError:
    """The remote's own hook (pre-receive, update) declined the push: the remote's words, as the remote's."""
    return GitError(f"{remote} refused the push of {branch}: its own hook (pre-receive or update) declined it; {then}",
                    details=list(push.remote_said[-40:]) or [push.message])


def _push_failed(push: gitremote.PushResult, w: workers.Worker, remote: str) -> GitError:
    """done's push failed: the pre-push gate's own reasons (git-nerve's guard names the commit and what to do)
    or the remote's, never only git's "failed to push some refs"."""
    then = f"nothing was pushed ({w.task_id} is still {w.state}; run `git worker done` again once it is fixed)"
    if push.hook_refused:
        said = [ln for ln in push.output.splitlines() if ln.strip() and not ln.startswith("error: failed to push some refs")]
        return GitError(f"the pre-push hook refused the push of {w.branch} to {remote}; {then}", details=said[-40:])
    if push.remote_refused:
        return _remote_refused(push, w.branch, remote, then)
    return GitError(f"could not push {w.branch} to {remote}: {push.message}")


def unfinished_cleanups(repo: Repo) -> list[str]:
    """COMPLETED tasks whose worktree is still there, or still registered with git (a removal killed after git
    deleted the files): a merge killed between COMPLETED and the end of its cleanup."""
    done = workers.all_workers(repo.bus.conn, states=(State.COMPLETED.value,))
    if not done:
        return []
    registered = {os.path.abspath(info.path) for info in worktrees.list_all(repo.cwd)}
    return [w.task_id for w in done if Path(w.worktree).exists() or os.path.abspath(w.worktree) in registered]


def task_lock(repo: Repo, w: workers.Worker) -> Path:
    """The lock a merge holds from publishing to COMPLETED, and that moves out of APPROVED wait for."""
    return repo.lock_path(f"task-{workers.task_key(w.task_id)}")


def _merged_as(repo: Repo, w: workers.Worker, tip: str, target_ref: str) -> str | None:
    """For a tip the integration branch already contains: the merge commit that brought it in (a merge whose
    record was interrupted), else None, with ``nothing to merge`` said honestly by the caller. A task that went
    through `done` with nothing of its own is COMPLETED as "nothing to merge" only when that was allowed
    (--allow-empty); one whose commits reached the integration branch another way (a person's fast-forward)
    is COMPLETED as "already on <branch>"; never as a merge commit that is not its own."""
    from . import merged

    made = merged.merge_commit_on(repo.cwd, tip, target_ref)
    if made is not None:
        return made
    if _empty_task(repo, w, tip) and not _last_review_request(repo, w).get("empty"):
        raise InvalidTransition(
            f"cannot merge {w.task_id}: it has no commits of its own (nothing to merge); send it back "
            f"(git worker request-changes {w.task_id} --comment ...) or cancel it"
        )
    return None


def _last_review_request(repo: Repo, w: workers.Worker) -> dict:
    found = messages.for_task(repo.bus.conn, w.task_id, kinds=("review_request",))
    return found[-1].payload if found else {}


def _empty_task(repo: Repo, w: workers.Worker, tip: str) -> bool:
    """The tip is on the integration branch as it was when the task asked for review: nothing of its own."""
    onto = _last_review_request(repo, w).get("onto")
    if not onto:
        assigned = messages.for_task(repo.bus.conn, w.task_id, kinds=("task_assign",))
        onto = assigned[0].payload.get("base_sha") if assigned else None
    return bool(onto) and refs.resolve(repo.cwd, onto) is not None and refs.is_ancestor(repo.cwd, tip, onto)


def _record_merge(repo: Repo, w: workers.Worker, res: MergeResult, merged: str | None, tip: str, target_ref: str,
                  target_wt: worktrees.WorktreeInfo | None) -> None:
    """A published merge: bring the local integration branch up to a pushed one, then APPROVED -> COMPLETED.
    ``merged`` None: no merge commit was made (nothing to merge, or the tip already on the branch)."""
    if merged is None:
        # "allowed": done --allow-empty; "upstream": done's rebase dropped every commit (already on the branch)
        res.nothing = "empty" if _last_review_request(repo, w).get("empty") == "allowed" else "on-integration"
        res.commit = None
        res.outcome = transition(
            repo.bus, w.task_id, State.COMPLETED, allowed_from=[State.APPROVED], already=[State.COMPLETED], verb="merge",
            extra_messages=[("merged", {"commit": None, "into": w.integration, "tip": tip, "pushed": False,
                                        "nothing": res.nothing})],
        )
        return
    if target_ref.startswith("refs/remotes/"):
        warning = _sync_local_integration(repo, w.integration, merged, target_wt)
        if warning:
            res.warnings.append(warning)
    faults.point("merge.before-transition")  # published, not recorded
    res.commit = merged
    res.outcome = transition(
        repo.bus, w.task_id, State.COMPLETED, allowed_from=[State.APPROVED], already=[State.COMPLETED], verb="merge",
        extra_messages=[("merged", {"commit": merged, "into": w.integration, "tip": tip, "pushed": res.pushed})],
    )


def _parse_check(check: str | None) -> list[str] | None:
    """``--check CMD`` as an argv; None only when no --check was given. An empty or blank
    command (a script's ``--check "$CHECK"`` with CHECK unset) is a usage error, not "no check"."""
    if check is None:
        return None
    try:
        argv = shlex.split(check)
    except ValueError as exc:
        raise UsageError(f"--check: {exc}") from None
    if not argv:
        raise UsageError("--check needs a command (it was given an empty one); nothing was merged")
    return argv


parse_check = _parse_check


def _run_check(repo: Repo, commit: str, argv: list[str]) -> None:
    # a temporary checkout of ours (recorded, under <common>/nerve/tmp/): one a killed merge leaves is removed
    # by the next command, never left registered
    with worktrees.checkout_at(repo.cwd, repo.paths.common_dir, commit, what="check") as path:
        try:
            proc = subprocess.run(argv, cwd=path, env=cli.clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except FileNotFoundError:
            raise CheckFailed(f"--check: command not found: {argv[0]}; nothing was merged") from None
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.splitlines()[-15:])
            raise CheckFailed(
                f"--check `{shlex.join(argv)}` failed with exit {proc.returncode}; nothing was merged",
                details=[tail] if tail else [],
            )


def _advance_local(repo: Repo, integration: str, old: str, new: str, target_wt: worktrees.WorktreeInfo | None) -> bool:
    """Move local ``integration`` from ``old`` to ``new``; False if it moved meanwhile."""
    if target_wt is None:
        return refs.update(repo.cwd, f"refs/heads/{integration}", new, old, f"nerve: merge into {integration}")
    if refs.resolve(target_wt.path, "HEAD") != old:
        return False
    # `git merge --ff-only` updates the checkout before the ref: a lock file left by a killed git
    # would make it fail half-way, so refuse before it starts
    wt_git_dir = worktrees.git_dir_of(target_wt.path)
    for lock in (repo.paths.common_dir / "refs" / "heads" / f"{integration}.lock", wt_git_dir / "index.lock",
                 wt_git_dir / "HEAD.lock"):
        if refs.stale_lock(lock):
            raise GitError(f"cannot move {integration}: {cli.stale_lock_message(str(lock))}")
    proc = _fast_forward(target_wt, old, new)
    if proc.returncode != 0:
        if refs.resolve(target_wt.path, "HEAD") != old:
            return False
        said = cli.message(proc.stderr)
        raise GitError(f"could not fast-forward {integration} in {target_wt.path}: {said}"
                       f"{cli.disk_full_hint(said, target_wt.path)}")
    return True


#: the marker a fast-forward of the integration branch's checkout leaves while it runs
FF_MARKER = "integration-ff"


def _fast_forward(target_wt: worktrees.WorktreeInfo, old: str, new: str):
    """``git merge --ff-only NEW`` in the integration checkout, marked while it runs: a kill or a failure half-way
    (files written, HEAD not moved) is undone by the next merge (:func:`_undo_killed_fast_forward`)."""
    git_dir = worktrees.git_dir_of(target_wt.path)
    repair.set_marker(git_dir, FF_MARKER, {"from": old, "to": new})
    proc = cli.run(["merge", "--ff-only", "--quiet", new], cwd=target_wt.path, check=False)
    if proc.returncode == 0:
        repair.clear_marker(git_dir, FF_MARKER)
    # a failure keeps the marker: git may have written some files before it gave up (a full disk), and the
    # next merge puts back exactly those (only files holding NEW's content, or the start of it)
    return proc


def _undo_killed_fast_forward(target_wt: worktrees.WorktreeInfo | None) -> None:
    if target_wt is not None:
        line = repair.undo_partial_reset(target_wt.path, worktrees.git_dir_of(target_wt.path), FF_MARKER)
        if line:
            repair.say(line)


def _sync_local_integration(repo: Repo, integration: str, merged: str, target_wt: worktrees.WorktreeInfo | None) -> str | None:
    """After a push, bring the local integration branch (and its checkout) up to the remote."""
    local = refs.resolve(repo.cwd, f"refs/heads/{integration}")
    if local is None or local == merged:
        return None
    if not refs.is_ancestor(repo.cwd, local, merged):
        return f"local {integration} has commits that are not on the remote; it was left as it is"
    if target_wt is not None:
        proc = _fast_forward(target_wt, local, merged)
        if proc.returncode != 0:
            said = cli.message(proc.stderr)
            return f"could not fast-forward {integration} in {target_wt.path}: {said}{cli.disk_full_hint(said, target_wt.path)}"
        return None
    refs.update(repo.cwd, f"refs/heads/{integration}", merged, local, f"nerve: sync {integration}")
    return None


# -- cleanup, cancel, retry --------------------------------------------------------------------------


def _archived_tip(repo: Repo, task_id: str) -> str:
    """The branch tip kept in the archive (a snapshot's parent, when uncommitted work was archived)."""
    ref = refs.archive_name(task_id)
    sha = _require_tip(repo.cwd, ref, "archive")
    if cli.out(["log", "-1", "--format=%s", sha], cwd=repo.cwd).startswith("nerve snapshot"):
        return cli.out(["rev-parse", f"{sha}^1"], cwd=repo.cwd)
    return sha


def _archive(repo: Repo, w: workers.Worker, *, force: bool, kept: list[str] | None = None) -> str | None:
    """Keep everything the task holds under refs/nerve/archive/<task> (see :mod:`.archive`)."""
    from . import archive

    wt = Path(w.worktree)
    if wt.is_dir() and repair.removal_interrupted(wt, repo.paths.common_dir) and refs.exists(repo.cwd, refs.archive_name(w.task_id)):
        return refs.archive_name(w.task_id)  # archived before the removal that was killed
    return archive.archive(repo, w, force=force, kept=kept)


def _cleanup(repo: Repo, w: workers.Worker, res: MergeResult | CancelResult, *, delete_branch: bool,
             force: bool, always_archive: bool = False) -> None:
    """The one cleanup of a task (after merge, and `cancel --cleanup`): archive what it holds, remove its worktree
    and (``delete_branch``) its branch, each through the door; what the door cannot prove ours is kept and said."""
    wt = Path(w.worktree)
    if always_archive or wt.is_dir() or (delete_branch and refs.exists(repo.cwd, f"refs/heads/{w.branch}")):
        res.archive_ref = _archive(repo, w, force=force, kept=res.submodule_archives)
    faults.point("cleanup.after-archive")
    if wt.is_dir():
        ignored = worktrees.ignored_files(wt)  # deleted with it, never archived (they may hold secrets)
        try:
            repair.remove_worktree(repo.cwd, wt, force=force, scope=door_scope(repo), task=w.task_id,
                                   common=repo.paths.common_dir)
            res.removed_worktree, res.ignored_removed = True, ignored
        except destroy.Refused as exc:  # e.g. moved (`git worktree move`) out of the worktree root: the person's now
            res.warnings.append(f"{exc.message}; its work is archived under {res.archive_ref}: remove it yourself "
                                f"with `git worktree remove {wt}` once you no longer need it")
    else:
        _prune_missing(repo, wt)
    if delete_branch:
        res.deleted_branch = _delete_branch(repo, w, res.warnings, res.kept)
    if always_archive or res.removed_worktree or res.deleted_branch:
        _publish(repo.bus, w.task_id, "cleanup", {"archive": res.archive_ref, "worktree_removed": res.removed_worktree,
                                                  "branch_deleted": res.deleted_branch})


def _prune_missing(repo: Repo, wt: Path) -> None:
    """A worktree deleted by hand leaves git's entry for it behind ("prunable"): drop it."""
    if any(info.path == wt or os.path.abspath(info.path) == os.path.abspath(wt) for info in worktrees.list_all(repo.cwd)):
        destroy.prune_entry(repo.cwd, wt, door_scope(repo))


def _delete_branch(repo: Repo, w: workers.Worker, warnings: list[str] | None = None, kept: list[str] | None = None) -> bool:
    """Delete the task's branch here, and on the remote, as far as :mod:`.owned` allows (``kept`` says why not)."""
    from . import owned

    deleted = False
    why = owned.keep_branch(w)
    if why:  # adopted: the person's, here and on every remote
        if kept is not None:
            kept.append(why)
        return deleted
    ref = f"refs/heads/{w.branch}"
    elsewhere = worktrees.find_for_branch(repo.cwd, ref)
    if elsewhere is not None:  # never delete a branch some worktree has checked out (the task's own is gone by now)
        if warnings is not None:
            warnings.append(f"{w.branch} was not deleted: it is checked out at {elsewhere.path}")
        return deleted
    sha = refs.resolve(repo.cwd, ref)
    # the door proves it again: a branch owned.py keeps (adopted, or from an older bus) is never deleted
    owner = {"owned_by_task": w.task_id, "row_branch": w.branch, "owned": owned.keep_branch(w) is None}
    if sha is not None:
        destroy.delete_branch(repo.cwd, repo.paths.common_dir, w.branch, old=sha, **owner)
        deleted = True
    remote = repo.settings.remote
    if remote and refs.exists(repo.cwd, f"refs/remotes/{remote}/{w.branch}"):
        why = owned.keep_on_remote(w, remote)
        if why:  # found there, not pushed there by git-nerve
            if kept is not None:
                kept.append(why)
            return deleted
        push = _delete_from_checkout(repo, remote, w)
        if not push.ok and _remote_has_branch(repo, remote, w.branch):
            # the task is already COMPLETED/FAILED: say so, do not fail the command for it
            said = "; ".join(ln.strip() for ln in push.output.splitlines()
                             if ln.strip() and not ln.startswith("error: failed to push some refs"))[-500:]
            if warnings is not None:
                warnings.append(f"{w.branch} was not deleted on {remote}: {said or push.message}")
            return deleted
        destroy.delete_tracking_ref(repo.cwd, repo.paths.common_dir, remote, w.branch, **owner)
        deleted = True
    return deleted


def _delete_from_checkout(repo: Repo, remote: str, w: workers.Worker) -> gitremote.PushResult:
    """Delete the task's branch on the remote from a real checkout (as :func:`_push_from_checkout`)."""
    from . import owned
    from .settings import main_checkout

    at = refs.resolve(repo.cwd, f"refs/remotes/{remote}/{w.branch}")
    config = gitremote.from_checkout_config(main_checkout(repo.paths), remote)
    with worktrees.checkout_at(repo.cwd, repo.paths.common_dir, at or "HEAD", what="push") as path:
        return destroy.delete_remote_branch(path, repo.paths.common_dir, remote, w.branch, owned_by_task=w.task_id,
                                            owned=owned.keep_on_remote(w, remote) is None, row_branch=w.branch,
                                            config=config)


def _remote_has_branch(repo: Repo, remote: str, branch: str) -> bool:
    return gitremote.has_branch(repo.cwd, remote, branch)


@dataclass
class CancelResult:
    outcome: Outcome
    archive_ref: str | None = None
    removed_worktree: bool = False
    deleted_branch: bool = False
    warnings: list[str] = field(default_factory=list)
    submodule_archives: list[str] = field(default_factory=list)
    ignored_removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def cancel(repo: Repo, task_id: str, *, reason: str | None = None, cleanup: bool = False, force: bool = False) -> CancelResult:
    """Any live state -> FAILED. ``cleanup`` archives the tip, then removes the worktree and branch."""
    repair_leftovers(repo)
    follow_moved_worktree(repo, get(repo.bus, task_id))
    if cleanup and not force:
        # refuse before the state changes: a refused cleanup leaves the task as it was
        w = get(repo.bus, task_id)
        if w.state != State.COMPLETED.value:
            if Path(w.worktree).is_dir():
                _refuse_branch_gone(repo, w, "cancel --cleanup")
            _refuse_unsaved(Path(w.worktree), repo.paths.common_dir)
    if cleanup and Path(get(repo.bus, task_id).worktree).is_dir():
        from . import archive

        archive.refuse_homeless_submodules(repo, get(repo.bus, task_id))  # before the state changes
    with hold(task_lock(repo, get(repo.bus, task_id)), what=f"the lock of {task_id} (a merge of it is publishing)"):
        _refuse_merged_on_remote(repo, task_id, "cancel")
        outcome = transition(
            repo.bus, task_id, State.FAILED,
            allowed_from=[State.ASSIGNED, State.WORKING, State.CONFLICTED, State.IN_REVIEW, State.APPROVED],
            already=[State.FAILED], verb="cancel",
            extra_messages=[("task_failed", {"reason": reason or "cancelled", "by": "cancel"})],
        )
    res = CancelResult(outcome)
    faults.point("cancel.after-transition")
    if cleanup:
        from ..locks import try_hold

        held = try_hold(repo.lock_path(f"cleanup-{workers.task_key(task_id)}"))
        if held is None:  # two cleanups of one task at once: the other one removes it
            raise GitError(f"another command is cleaning up {task_id} right now; this one removed nothing "
                           f"(run `git worker cancel {task_id} --cleanup` again once it is done)")
        try:  # (try_hold hands back the lock already held)
            _cancel_cleanup(repo, outcome, res, force=force)
        finally:
            held.__exit__(None, None, None)
    return res


def _cancel_cleanup(repo: Repo, outcome: Outcome, res: CancelResult, *, force: bool) -> None:
    w = outcome.worker
    wt = Path(w.worktree)
    if not force:
        if wt.is_dir():
            _refuse_branch_gone(repo, w, "cancel --cleanup")
        _refuse_unsaved(wt, repo.paths.common_dir)
    _cleanup(repo, w, res, delete_branch=True, force=force, always_archive=True)


def _refuse_branch_gone(repo: Repo, w: workers.Worker, verb: str) -> None:
    """GitError naming a branch deleted by hand (rather than "uncommitted changes (every file)")."""
    from . import archive

    if archive.branch_gone(repo, w):
        raise archive.branch_gone_error(repo, w, verb)


def _refuse_unsaved(wt: Path, common: Path | None = None) -> None:
    """GitError when removing ``wt`` would lose a stopped rebase/merge or uncommitted changes."""
    if not wt.is_dir() or repair.removal_interrupted(wt, common):
        return
    op = worktrees.operation_in_progress(worktrees.git_dir_of(wt))
    if op:
        raise GitError(f"a {op} is in progress in {wt}; finish or abort it, or pass --force")
    dirty = worktrees.dirty_files(wt)
    if dirty:
        raise GitError(
            f"the worktree {wt} has uncommitted changes ({', '.join(dirty[:5])}); "
            "commit them, or pass --force to archive them and remove the worktree"
        )
    _refuse_submodule_work(wt)


def _refuse_submodule_work(wt: Path) -> None:
    """GitError when a submodule of ``wt`` holds work its removal would lose (no archive can keep it)."""
    unsaved = worktrees.submodule_unsaved(wt)
    if unsaved:
        raise GitError(
            f"the worktree {wt} has submodules with unsaved work ({', '.join(unsaved[:5])}); "
            "commit and push it in the submodule, or pass --force to remove it anyway"
        )


def retry(repo: Repo, task_id: str) -> Outcome:
    """FAILED -> ASSIGNED, recreating the worktree (from the archive if the branch was removed)."""
    # The worktree comes back first, the bus row moves last: a retry refused half-way (a full disk, a
    # read-only .git) leaves the task FAILED with nothing of the attempt left (what it made is rolled
    # back); a retry killed half-way leaves a FAILED task whose worktree the rerun verifies and adopts.
    # Already ASSIGNED: an older retry that stopped before its worktree was back is finished by running it again.
    repair_leftovers(repo)
    w = get(repo.bus, task_id)
    if w.state == State.FAILED.value:
        path = Path(w.worktree)
        had_dir, had_branch = path.exists(), refs.exists(repo.cwd, f"refs/heads/{w.branch}")
        try:
            _ensure_worktree(repo, w._replace(state=State.ASSIGNED.value))
            outcome = transition(repo.bus, task_id, State.ASSIGNED, allowed_from=[State.FAILED], already=[State.ASSIGNED],
                                 verb="retry", extra_messages=[("task_retry", {})], columns={"last_heartbeat": None})
        except BaseException:
            _undo_retry(repo, w, made_dir=not had_dir, made_branch=not had_branch)
            raise
    else:
        outcome = transition(repo.bus, task_id, State.ASSIGNED, allowed_from=[State.FAILED], already=[State.ASSIGNED],
                             verb="retry", extra_messages=[("task_retry", {})], columns={"last_heartbeat": None})
    _ensure_worktree(repo, outcome.worker)
    return outcome


def _undo_retry(repo: Repo, w: workers.Worker, *, made_dir: bool, made_branch: bool) -> None:
    """Take back what a refused retry made (the task is still FAILED): its new worktree, and the branch it
    restored from the archive ref (which keeps the tip). Best effort: the error that stopped it is what counts."""
    current = workers.get(repo.bus.conn, w.task_id)
    if current is not None and current.state != State.FAILED.value:
        return  # the transition happened after all (or another command moved the task): keep everything
    try:
        if made_dir:
            destroy.discard(repo.cwd, Path(w.worktree), door_scope(repo), task=w.task_id)
        if made_branch:
            tip = refs.resolve(repo.cwd, f"refs/heads/{w.branch}")
            if tip is not None and tip == _archived_tip(repo, w.task_id):
                destroy.delete_branch(repo.cwd, repo.paths.common_dir, w.branch, owned_by_task=w.task_id,
                                      row_branch=w.branch, old=tip)
    except Exception:  # noqa: BLE001 - a rollback must not hide the cause
        pass


# -- reading ------------------------------------------------------------------------------------


def show(repo: Repo, task_id: str) -> tuple[workers.Worker, list[messages.Message]]:
    w = workers.get(repo.bus.conn, task_id)
    if w is None:
        raise unknown(task_id)
    return w, messages.for_task(repo.bus.conn, task_id)


def heartbeat(repo: Repo, task_id: str, *, status: str | None = None, progress: float | None = None) -> float:
    from .heartbeat import record

    return record(repo.bus, task_id, status=status, progress=progress)


__all__ = [
    "Repo", "open_repo", "spawn", "start", "done", "fail", "approve", "request_changes", "merge", "cancel",
    "retry", "show", "heartbeat", "SpawnResult", "DoneResult", "MergeResult", "CancelResult",
]


# -- the merge queue's batches ------------------------------------------------------------


def check_combination(repo: Repo, task_ids: list[str], check: str, *, fetch: bool = False) -> str | None:
    """Run ``check`` once on the integration tip with ``task_ids`` merged onto it in order (in memory,
    then in a temporary detached worktree, as `merge --check` does); None when it passes, else its output.

    A task that does not merge cleanly onto the ones before it raises :class:`ConflictError`
    naming it (its own `merge` then sends it back). Nothing is published and no state changes.
    """
    from ..git import objects

    argv = _parse_check(check)
    assert argv is not None
    integration = repo.settings.integration
    ours = _require_tip(repo.cwd, integration_ref(repo, integration, fetch=fetch), "the integration branch")
    committer = objects.identity(repo.cwd)
    author = objects.identity(repo.cwd, "GIT_AUTHOR_IDENT")
    for task_id in task_ids:
        w = get(repo.bus, task_id)
        tip = _require_tip(repo.cwd, f"refs/heads/{w.branch}", f"the branch of {task_id}")
        mr = objects.merge_commit(repo.paths.common_dir, ours, tip, f"Merge {w.branch} ({task_id}) [queue check]", author, committer)
        if mr.commit is None:
            raise ConflictError(f"{task_id} does not merge onto the tasks before it in the batch", files=mr.conflicts,
                                details=[task_id])
        ours = mr.commit
    try:
        _run_check(repo, ours, argv)
    except CheckFailed as exc:
        return "\n".join([exc.message, *exc.details])
    return None
