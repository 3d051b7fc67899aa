"""`spawn`: a task's branch and worktree, then its bus row (ASSIGNED); idempotent, rolled back when it
fails half-way, finished when it was killed. Also the hooks a spawn installs (``_ensure_hooks``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ... import clock, faults
from ...bus import messages, workers
from ...context import WorkerContext
from ...context import write as write_ctx
from ...errors import GitError, InvalidTransition, UsageError
from ...git import destroy, location, ownership, refs, worktrees
from ...git import config as gitconfig
from ...git import remote as gitremote
from ...locks import hold
from ...paths import discover
from ...worktree_prep.caps import refuse_over_caps
from ...worktree_prep.prepare import prepare, resume_setup, unprepared
from .. import claims, ids
from ..locking import add_lock, fetch_branches
from ..states import State
from .repo import Repo, _require_tip, door_scope, integration_ref, repair_leftovers


@dataclass
class SpawnResult:
    worker: workers.Worker
    created: bool
    hooks_installed: bool = False
    warnings: list[str] = field(default_factory=list)
    prep: object | None = None  # worktree_prep.prepare.PrepResult of a new task


def spawn(
    repo: Repo,
    task_id: str,
    *,
    description: str = "",
    from_ref: str | None = None,
    fetch: bool = True,
    adopt: bool = False,
    wait: bool = False,
) -> SpawnResult:
    """Create branch ``<prefix><task-id>`` and its worktree, then the bus row (ASSIGNED).

    Idempotent: spawning an existing task returns it. A spawn that fails
    half-way removes what it created; one that was killed is completed by
    running it again (the branch and worktree it made are adopted). A branch
    that existed before (here or on the remote) is refused unless ``adopt``:
    then it is recorded as adopted and git-nerve never deletes it (:mod:`..owned`, :mod:`...git.ownership`).
    Spawns of ids that differ only in case run one at a time (one lock per casefolded
    id), so the later one always gets the collision message.
    """
    ids.validate(task_id)
    ids.validate_description(description)
    gitconfig.refuse_bare(repo.config, repo.paths.toplevel, "spawn workers")
    with hold(repo.lock_path(f"spawn-{workers.task_key(task_id)}"), what=f"the spawn lock of {task_id}"):
        res = _spawn(repo, task_id, description=description, from_ref=from_ref, fetch=fetch, adopt=adopt)
    if res.created or unprepared(repo.bus, task_id):  # outside the spawn lock: no other spawn waits for a setup
        res.prep = prepare(repo.paths, repo.bus, task_id, Path(res.worker.worktree), wait=wait)
        res.warnings += res.prep.warnings
    else:  # a setup its killed spawn left interrupted runs again (a running one: waited for, with --wait)
        res.prep = resume_setup(repo.paths, repo.bus, task_id, Path(res.worker.worktree), wait=wait)
        res.warnings += res.prep.warnings if res.prep is not None else []
    return res


def setup_again(repo: Repo, task_id: str, *, wait: bool = False):
    """`git worker setup T`: run the task's ``[worktree] setup`` again in its worktree (a running one is stopped
    first, its whole process group); its PrepResult. A COMPLETED or FAILED task, or one whose worktree is gone,
    is refused (exit 3), so is a repository without a setup (exit 2)."""
    from ..transitions import get

    w = get(repo.bus, task_id)
    if w.state in (State.COMPLETED.value, State.FAILED.value):
        raise InvalidTransition(f"task {task_id} is {w.state}: nothing started (a FAILED one: `git worker retry "
                                f"{task_id}` first)")
    if not Path(w.worktree).is_dir():
        raise InvalidTransition(f"task {task_id} has no worktree at {w.worktree}: nothing started")
    res = resume_setup(repo.paths, repo.bus, task_id, Path(w.worktree), wait=wait, again=True)
    if res is None:
        raise UsageError("no [worktree] setup in nerve.toml: nothing to run")
    return res


def _spawn(repo: Repo, task_id: str, *, description: str, from_ref: str | None, fetch: bool, adopt: bool) -> SpawnResult:
    gitconfig.refuse_unsupported_object_format(repo.config)
    repair_leftovers(repo)
    existing = workers.get_by_key(repo.bus.conn, task_id)
    unfinished = ownership.spawning(repo.paths.common_dir, task_id)
    if existing is not None:
        ownership.clear_spawning(repo.paths.common_dir, task_id)  # a spawn killed after its bus row: nothing left to finish
    elif unfinished is not None and unfinished["task_id"] != task_id:
        raise UsageError(f"task id {task_id!r} collides with task {unfinished['task_id']!r} (ids are case-insensitive), "
                         f"whose spawn did not finish: run `git worker spawn {unfinished['task_id']}` to finish it")
    if existing is not None:
        return _spawn_existing(repo, existing, task_id, description, from_ref)

    with caps_held(repo):  # with caps set, spawns count and make their worktrees one at a time
        return _spawn_new(repo, task_id, description=description, from_ref=from_ref, fetch=fetch, adopt=adopt,
                          unfinished=unfinished)


def caps_held(repo: Repo):
    """The caps lock, held from the count of live worktrees until the new one exists, when nerve.toml sets a cap
    (two spawns at once never both pass ``max_live``); nothing otherwise."""
    import contextlib

    cfg = refuse_over_caps(repo.paths, repo.bus)  # a bad [worktree] table is refused before anything is made
    if cfg.max_live is None and cfg.max_total_bytes is None:
        return contextlib.nullcontext()
    return hold(repo.lock_path("worktree-caps"), what="the worktree caps lock")


def _spawn_new(repo: Repo, task_id: str, *, description: str, from_ref: str | None, fetch: bool, adopt: bool,
               unfinished) -> SpawnResult:
    refuse_over_caps(repo.paths, repo.bus)  # [worktree] max_live / max_total_bytes, counted under the caps lock
    settings = repo.settings
    cwd = repo.cwd
    base_ref, base_sha = _spawn_base(repo, from_ref, fetch=fetch)
    branch = f"{settings.branch_prefix}{task_id}"
    if not refs.check_ref_format(cwd, f"refs/heads/{branch}"):
        raise UsageError(f"{branch!r} is not a valid branch name (check nerve.branchPrefix)")
    claims.before_spawn(repo.bus, task_id)  # shared mode: this machine's claim on the remote, before anything is made
    adopted, base_sha = _spawn_branch(repo, task_id, branch, unfinished, base_sha, fetch=fetch, adopt=adopt)
    path = (settings.worktree_root / task_id).absolute()
    made = _Made()
    try:
        if unfinished != {"task_id": task_id, "branch": branch, "adopted": adopted}:
            ownership.mark_spawning(repo.paths.common_dir, task_id, branch, adopted=adopted)
        _spawn_worktree(repo, task_id, branch, path, base_sha, made, adopted=adopted)
        row, other = _record_spawn(repo, task_id, branch, path, base_ref, base_sha, description, adopted, made)
        if other is not None:
            return SpawnResult(other, created=False)
    except BaseException:
        _rollback_spawn(repo, task_id, path if made.worktree else None, branch if made.branch else None, base_sha)
        if adopted or not refs.exists(cwd, f"refs/heads/{branch}"):
            ownership.clear_spawning(repo.paths.common_dir, task_id)  # else: a branch an earlier, killed spawn made stays ours
        raise
    faults.point("spawn.after-bus")
    ownership.clear_spawning(repo.paths.common_dir, task_id)
    result = SpawnResult(row, created=True)
    if settings.remote:
        relative = gitremote.relative_url_warning(cwd, settings.remote)
        if relative:
            result.warnings.append(relative)
    result.hooks_installed, warning = _ensure_hooks(repo, path)
    if warning:
        result.warnings.append(warning)
    return result


def _spawn_existing(repo: Repo, existing: workers.Worker, task_id: str, description: str,
                    from_ref: str | None) -> SpawnResult:
    """Spawning a task the bus already has: the same input again completes what is missing (worktree, context
    file, hooks); anything else is refused."""
    if existing.task_id != task_id:
        raise UsageError(f"task id {task_id!r} collides with existing task {existing.task_id!r} (ids are case-insensitive)")
    from .worktree import _ensure_worktree  # here: a new task's spawn does not need it (start-up)

    _refuse_respawn(repo, existing, description, from_ref)
    _ensure_worktree(repo, existing)  # verifies the worktree and repairs its context file
    # a spawn killed after its bus row never reached the hooks: finish that too
    res = SpawnResult(existing, created=False)
    res.hooks_installed, warning = _ensure_hooks(repo, Path(existing.worktree))
    if warning:
        res.warnings.append(warning)
    return res


def _spawn_base(repo: Repo, from_ref: str | None, *, fetch: bool) -> tuple[str, str]:
    """(base ref, base sha) of a new task: ``--from``, else the integration branch's tip (fetched first)."""
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
        local = f"refs/heads/{settings.integration}"
        tip = None if settings.remote else refs.resolve(cwd, local)
        if tip is not None:  # no remote: one rev-parse answers what the three below would ask
            return local, tip
        if refs.resolve(cwd, "HEAD") is None and not refs.exists(cwd, local):
            raise GitError("the repository has no commits yet; make a first commit before spawning workers")
        base_ref = integration_ref(repo, settings.integration, fetch=fetch)
        base_sha = _require_tip(cwd, base_ref, "integration branch")
    return base_ref, base_sha


def _spawn_branch(repo: Repo, task_id: str, branch: str, unfinished: dict | None, base_sha: str, *, fetch: bool,
                  adopt: bool) -> tuple[bool, str]:
    """(adopted?, base sha): a branch that exists before the spawn is refused unless ``adopt``; one only the
    remote has is started from its tip; one our own killed spawn made (or adopted) is finished."""
    if unfinished is not None and unfinished["branch"] == branch:
        return bool(unfinished.get("adopted")), base_sha  # our own killed spawn made (or adopted) it: finish it
    found, remote_tip = _existing_branch(repo, branch, fetch=fetch)
    if found and not adopt:
        raise UsageError(f"branch {branch} already exists {found} and is not git-nerve's; "
                         f"`git worker spawn {task_id} --adopt` makes the task work on it (git-nerve then never "
                         "deletes it), or choose another task id")
    adopted = found is not None
    if remote_tip is not None and not refs.exists(repo.cwd, f"refs/heads/{branch}"):
        base_sha = remote_tip  # adopting a branch only the remote has: start from its tip
    return adopted, base_sha


@dataclass
class _Made:
    """What this spawn made so far (set before git runs), so that a failure takes back exactly that."""

    branch: bool = False
    worktree: bool = False


def _spawn_worktree(repo: Repo, task_id: str, branch: str, path: Path, base_sha: str, made: _Made, *,
                    adopted: bool = False) -> None:
    """The task's worktree on its branch (both created when missing), under the lock of its path only (adds of
    other paths run side by side)."""
    cwd = repo.cwd
    with hold(add_lock(repo, path), what="the worktree lock"):
        had_branch = refs.exists(cwd, f"refs/heads/{branch}")  # none: no worktree has it checked out
        wt = worktrees.find_for_branch(cwd, f"refs/heads/{branch}") if had_branch else None
        if wt is not None and wt.path.resolve() != path.resolve():
            raise UsageError(f"branch {branch} is already checked out at {wt.path}")
        if wt is None:
            if path.is_symlink() or (path.exists() and (not path.is_dir() or any(path.iterdir()))):
                raise UsageError(f"{path} already exists and is not this task's worktree")
            path.parent.mkdir(parents=True, exist_ok=True)
            # set before git runs: a `git worktree add` that fails half-way (e.g. a failing
            # post-checkout hook) has already created the branch and the worktree
            made.branch = not had_branch
            # recorded before git creates them (a kill leaves at most a record of something missing)
            ownership.record(repo.paths.common_dir, "worktree", os.fspath(path), task=task_id)
            # the task's branch, made here or adopted (then never deleted but by this spawn's own rollback)
            ownership.record(repo.paths.common_dir, "branch", branch, task=task_id, adopted=adopted)
            made.worktree = True
            worktrees.add(cwd, path, branch=branch, start=base_sha if made.branch else None)
            faults.point("spawn.after-worktree")


def _record_spawn(repo: Repo, task_id: str, branch: str, path: Path, base_ref: str, base_sha: str, description: str,
                  adopted: bool, made: _Made) -> tuple[workers.Worker, workers.Worker | None]:
    """The context file, then the bus row (ASSIGNED) and its ``task_assign``: (the row, None), or (the row,
    the other spawn's row) when a concurrent spawn of the same task won (then nothing of ours is taken back)."""
    ts = clock.now()
    write_ctx(
        location.linked_git_dir(path),
        WorkerContext(task_id=task_id, branch=branch, worktree=str(path), created_at=clock.iso(ts) or "", description=description),
    )
    faults.point("spawn.after-ctx")
    row = workers.Worker(
        task_id=task_id, state=State.ASSIGNED.value, branch=branch, worktree=str(path), base=base_ref,
        integration=repo.settings.integration, description=description, assigned_at=ts, state_changed_at=ts,
        last_heartbeat=None, last_activity=ts, approved_at=None, heartbeat_status=None, progress=None,
        adopted=int(adopted),
    )
    with repo.bus.write() as conn:
        other = workers.get_by_key(conn, task_id)
        if other is not None:
            if other.task_id != task_id:  # a concurrent spawn of an id differing only in case won
                raise UsageError(f"task id {task_id!r} collides with existing task {other.task_id!r} (ids are case-insensitive)")
            # lost a race with a concurrent spawn of the same task: theirs stands
            made.branch = made.worktree = False
            return row, other
        workers.insert(conn, row)
        messages.publish(
            conn, task_id, "task_assign",
            {"to": "ASSIGNED", "branch": branch, "worktree": str(path), "base": base_ref, "base_sha": base_sha,
             "description": description, "adopted": adopted, "integration": row.integration},
            ts,
        )
        faults.point("spawn.before-commit")  # killed holding the bus write lock
    return row, None


def _rollback_spawn(repo: Repo, task_id: str, path: Path | None, branch: str | None, base_sha: str) -> None:
    """Take back what a failed spawn made, through the door (best effort: the error that stopped it counts)."""
    try:
        sc = door_scope(repo)
        if path is not None:
            destroy.discard(repo.cwd, path, sc, task=task_id)
        if branch is not None:
            destroy.delete_branch(repo.cwd, repo.paths.common_dir, branch, owned_by_task=task_id, old=base_sha,
                                  made_now=True)
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
    install = repo.hook_installer  # passed in by the command that opened the repository (hooks are a front end)
    if install is None:
        return False, None
    targets = [repo.paths]
    hooks_path = repo.config.get("core.hooksPath")
    if worktree is not None and hooks_path and not os.path.isabs(os.path.expanduser(hooks_path)) and worktree.is_dir():
        targets.append(discover(worktree, inherit_location=False))
    # the "already installed?" check of this worktree answered from the configuration this spawn read (no git),
    # when git, run there, finds the same repository the hooks check would (no location variables set)
    own = repo.config if not any(os.environ.get(v) for v in ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR")) else None
    installed_now, problems = False, []
    for paths in targets:
        try:
            missing = install(paths, own) if paths is repo.paths and own is not None else install(paths)
            if missing is None:
                continue
            installed_now = True
            problems += missing
        except Exception as exc:  # a hook problem must not fail the spawn
            problems.append(str(exc))
    return installed_now, ("could not install git hooks: " + "; ".join(problems)) if problems else None
