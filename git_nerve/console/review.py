"""The console's review reads: a task's changed files, one file's diff, its commits, its agent's output.

Every route here is a GET behind the :class:`~.security.Guard` (token, Host) and only reads: git objects
through :mod:`..git.diffs` (no checkout, no ref moves but one: a task another machine holds, in shared mode, is
shown from the branch it pushed, fetched into its remote-tracking ref), the radar's last result through
:mod:`..radar.flags`, the run logs through :mod:`..workflow.runlog`. Answers are JSON; the page escapes
what it shows (diffs and output are agent-written text).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..bus.connection import Bus
from ..errors import ExitCode, NerveError, UsageError
from ..git import refs
from ..git.diffs import Diffs
from ..paths import RepoPaths
from ..radar import flags as radar_flags
from ..shared.status import elsewhere
from ..trust import changes as trust_changes
from ..workflow import runlog
from ..worker import lifecycle
from . import comments


def error(exc: NerveError) -> JSONResponse:
    """A refusal as JSON: the CLI's message, its details and exit code (``code`` and ``exit_code``)."""
    status = 400 if exc.exit_code == ExitCode.USAGE else 409
    return JSONResponse({"error": exc.message, "details": list(exc.details), "code": int(exc.exit_code),
                         "exit_code": int(exc.exit_code)}, status_code=status)


class _Task:
    """What a review read needs of one task: its state, the open objects, the range it changed. A task another
    machine holds (shared mode): its branch as that machine pushed it (:func:`_pushed_head`), read-only."""

    def __init__(self, repo: lifecycle.Repo, task_id: str):
        held = elsewhere(repo.bus, task_id)
        if held is not None:
            pushed, state = _pushed_head(repo, task_id, held), held["state"]
            self.integration = repo.settings.integration
            self.diffs = Diffs(repo.paths.common_dir)  # opened after the fetch: it sees the objects fetched
            head = self.diffs.tip(pushed)
        else:
            w = lifecycle.get(repo.bus, task_id)
            self.diffs, state = Diffs(repo.paths.common_dir), w.state
            self.integration = w.integration or repo.settings.integration
            head = self.diffs.tip(f"refs/heads/{w.branch}") if w.branch else None
            head = head or self.diffs.tip(refs.archive_name(task_id))
        if head is None:
            raise UsageError(f"{task_id} has no branch tip to show (its branch is gone and no archive holds it)")
        self.integration_tip = _integration_tip(repo, self.diffs, self.integration)
        self.head = head
        base = self.diffs.task_range(head, self.integration_tip)[0] if self.integration_tip else head
        self.hide = self.integration_tip  # its commits: those the integration branch does not have
        if base == head and self.integration_tip and state == "COMPLETED":
            merged = self.diffs.merged_base(head, self.integration_tip)  # merged: what the merge brought
            base = self.hide = merged or base
        self.base = base


#: seconds a task's pushed branch, fetched for its diff, is not fetched again while its published tip is the same
FETCH_TTL = 5.0
_fetched: dict[tuple[str, str], tuple[float, str | None]] = {}


def _pushed_head(repo: lifecycle.Repo, task_id: str, held: dict[str, Any]) -> str:
    """The remote-tracking ref of the branch the holder published for ``task_id`` (its ``task_assign``), fetched
    through :mod:`..git.remote` when it is not at the tip the holder asked review for (or, before that, at most
    every :data:`FETCH_TTL` seconds). The task's rows, worktree and thread stay on the holder."""
    from ..worker.lifecycle.merge_elsewhere import from_cache
    from ..worker.locking import fetch_branches

    info = from_cache(repo, task_id)
    remote = repo.settings.remote
    if info is None or not remote:
        raise UsageError(f"task {task_id} is held by machine {held['machine']}, which has not published its branch "
                         f"{'yet (at its next `git nerve sync`)' if remote else 'to a remote'}: no diff to show here")
    ref = f"refs/remotes/{remote}/{info.branch}"
    key = (str(repo.paths.common_dir), info.branch)
    last = _fetched.get(key)
    current = refs.resolve(repo.cwd, ref)
    fresh = last is not None and last[1] == info.tip and time.monotonic() - last[0] < FETCH_TTL
    if (current is None or current != info.tip) and not fresh:
        fetch_branches(repo, remote, [info.branch])
        _fetched[key] = (time.monotonic(), info.tip)
        current = refs.resolve(repo.cwd, ref)
    if current is None:
        raise UsageError(f"task {task_id} is held by machine {held['machine']}, whose branch {info.branch} is not on "
                         f"{remote} yet (its `git worker done` pushes it): no diff to show here")
    return ref


#: seconds the integration branch's remote, read from git config, is reused (each read is a git process)
REMOTE_TTL = 5.0
_remotes: dict[str, tuple[float, str | None]] = {}


def _integration_tip(repo: lifecycle.Repo, diffs: Diffs, integration: str) -> str | None:
    """The tip ``lifecycle.integration_ref(fetch=False)`` names (the remote's copy when there is one), read in
    process; the remote's name is reused for :data:`REMOTE_TTL` seconds."""
    key = str(repo.paths.common_dir)
    known = _remotes.get(key)
    if known is None or time.monotonic() - known[0] > REMOTE_TTL:
        try:
            known = (time.monotonic(), repo.settings.remote)
        except NerveError:
            known = (time.monotonic(), None)
        _remotes[key] = known
    remote = known[1]
    return (diffs.tip(f"refs/remotes/{remote}/{integration}") if remote else None) or diffs.tip(f"refs/heads/{integration}")


def _open(paths: RepoPaths) -> lifecycle.Repo:
    # no spool ingest: these reads need the rows and git objects only (the watcher ingests every look)
    return lifecycle.Repo(paths, Bus(paths.bus_path, create=False, ingest=False))


def _reviewed(repo: lifecycle.Repo, t: _Task, task_id: str) -> str | None:
    """The tip the last request-changes reviewed (its ``changes_requested`` message), when it is still an object
    here and not the tip now; None otherwise."""
    from ..bus import messages

    found = messages.for_task(repo.bus.conn, task_id, kinds=("changes_requested",))
    tip = found[-1].payload.get("tip") if found else None
    return tip if isinstance(tip, str) and tip != t.head and t.diffs.is_commit(tip) else None


def _since(repo: lifecycle.Repo, t: _Task, task_id: str) -> tuple[str, set[str]]:
    """"since your last review": (the reviewed tip, the paths the task changes then or now: a file only the
    integration branch changed in between is not the agent's)."""
    old = _reviewed(repo, t, task_id)
    if old is None:
        raise UsageError(f"no earlier review of {task_id} to compare with (request changes records the tip it reviewed)")
    old_base = t.diffs.task_range(old, t.integration_tip)[0] if t.integration_tip else old
    mine = {f.path for f in t.diffs.files(t.base, t.head)} | {f.path for f in t.diffs.files(old_base, old)}
    return old, mine


def files(paths: RepoPaths, task_id: str, commit: str | None = None, since: bool = False) -> dict[str, Any]:
    """The files the task changed against the integration branch (with the radar's flagged lines), or, with
    ``commit``, the files that one of its commits changed against its parent; ``since``: those of its files that
    changed since the tip the last request-changes reviewed (``reviewed``: that tip, when there is one)."""
    with _open(paths) as repo:
        t = _Task(repo, task_id)
        base, head = _range(t, task_id, commit)
        mine = None
        if since and not commit:
            base, mine = _since(repo, t, task_id)
        flagged = radar_flags.for_task(repo.paths.common_dir, task_id) if not commit else {}
        out = []
        for f in t.diffs.files(base, head):
            if mine is None or f.path in mine or f.old_path in mine:
                out.append({**f.as_dict(), "flagged": flagged.get(f.path, [])})
        # issue 35: a change to a setting that runs a command on the person's machine, said first, in words
        trust_flags = trust_changes.between(repo.cwd, base, head) if not commit and base != head else []
        return {"task_id": task_id, "base": base, "head": head, "integration": t.integration, "files": out,
                "trust_flags": trust_flags, "reviewed": _reviewed(repo, t, task_id) if not commit else None,
                "since_review": mine is not None}


def _range(t: _Task, task_id: str, commit: str | None) -> tuple[str | None, str]:
    """(base, head) of the task's whole change, or of one of its commits (refused when it is not one of them)."""
    if not commit:
        return t.base, t.head
    if not t.diffs.is_in(commit, t.head, t.hide):
        raise UsageError(f"{commit!r} is not one of the commits of {task_id}")
    return t.diffs.commit_range(commit)


def diff(paths: RepoPaths, task_id: str, path: str, commit: str | None, since: bool = False) -> dict[str, Any]:
    with _open(paths) as repo:
        t = _Task(repo, task_id)
        base, head = _range(t, task_id, commit)
        if since and not commit:
            base = _since(repo, t, task_id)[0]
        fd = t.diffs.file(base, head, path)
        flagged = radar_flags.for_task(repo.paths.common_dir, task_id).get(fd.path, []) if not commit else []
        # the reviewer's earlier line comments, on the lines they were made on (issue 38)
        earlier = comments.placed(t.diffs, comments.recorded(repo.bus.conn, task_id), fd.path, fd.old_path, base,
                                  head) if not commit else []
        return {"task_id": task_id, "base": base, "head": head, **fd.as_dict(), "flagged": flagged,
                "earlier": earlier}


def commits(paths: RepoPaths, task_id: str) -> list[dict[str, Any]]:
    with _open(paths) as repo:
        t = _Task(repo, task_id)
        return t.diffs.commits(t.head, t.hide)


def output(paths: RepoPaths, task_id: str, round_: int | None, after: int | None) -> dict[str, Any]:
    with _open(paths) as repo:
        lifecycle.get(repo.bus, task_id)  # an unknown task: the CLI's refusal
        from ..worktree_prep.secrets import redactor

        # masked again as read (git_nerve/redact.py), by the values known literally: a scan by hash of 256 KiB
        # would take seconds, and a log is masked as it is written
        masking = redactor(repo.bus.conn, task_id).literal_only()
        return {"task_id": task_id, **runlog.read(repo.paths.common_dir, task_id, round_, after, masking=masking)}


def _int(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{name!r} must be a whole number, not {value!r}") from None
    if number < 0:
        raise UsageError(f"{name!r} must not be negative")
    return number


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise UsageError(f"missing {name!r}")
    return value


def _since_flag(request: Request) -> bool:
    """``?since=review``: against the tip the last request-changes reviewed."""
    value = request.query_params.get("since")
    if value not in (None, "", "review"):
        raise UsageError(f"'since' can only be 'review', not {value!r}")
    return value == "review"


def _route(fn: Callable[[Request], Any]):
    async def handler(request: Request) -> Response:
        try:
            return JSONResponse(await run_in_threadpool(fn, request))
        except NerveError as exc:
            return error(exc)
    return handler


def routes(paths: RepoPaths) -> list[Route]:
    """The review routes (GET only), to be listed before ``/api/task/{task_id}``."""
    def tid(r: Request) -> str:
        return r.path_params["task_id"]

    reads: dict[str, Callable[[Request], Any]] = {
        "files": lambda r: files(paths, tid(r), r.query_params.get("commit") or None, _since_flag(r)),
        "diff": lambda r: diff(paths, tid(r), _required(r, "path"), r.query_params.get("commit") or None, _since_flag(r)),
        "commits": lambda r: commits(paths, tid(r)),
        "output": lambda r: output(paths, tid(r), _int(r, "round"), _int(r, "after")),
    }
    return [Route(f"/api/task/{{task_id:path}}/{name}", _route(fn), methods=["GET"]) for name, fn in reads.items()]


__all__ = ["commits", "diff", "error", "files", "output", "routes"]
