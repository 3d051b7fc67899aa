"""What the console's buttons do: the very functions `git nerve tell` and `git worker
approve / request-changes / merge` call, each on a bus connection of its own.

A merge runs in the console's process (in a worker thread), like `git worker
merge` runs in its own: it takes the same merge and task locks, so a merge
from the console and one from a terminal cannot interleave. Nothing here
shells out to git-nerve itself.
"""

from __future__ import annotations

from typing import Any

from ..bus.connection import Bus
from ..errors import UsageError
from ..paths import RepoPaths
from ..steer import tell as steer_tell
from ..worker import lifecycle
from ..worker.status import row


#: the characters of a commit id
HEX = frozenset("0123456789abcdef")


def _open(paths: RepoPaths) -> lifecycle.Repo:
    return lifecycle.Repo(paths, Bus(paths.bus_path, create=False))


def _text(body: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise UsageError(f"missing {key!r}")
        return None
    if not isinstance(value, str):
        raise UsageError(f"{key!r} must be a string")
    return value


def _task(body: dict[str, Any]) -> str:
    return _text(body, "task", required=True)  # type: ignore[return-value]


def _by(repo: lifecycle.Repo, body: dict[str, Any]) -> str | None:
    return _text(body, "by") or repo.config.get("user.name")


def _comment(body: dict[str, Any]) -> str | None:
    """The comment as given: the lifecycle function decides (an empty one is none, as `--comment ""` is)."""
    value = body.get("comment")
    if value is not None and not isinstance(value, str):
        raise UsageError("'comment' must be a string")
    return value


def tell(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    """`git nerve tell [--task T | --all] [--kind K] TEXT` (outside any worktree: a stop without a task goes to the merge queue)."""
    all_tasks = body.get("all", False)
    if not isinstance(all_tasks, bool):
        raise UsageError("'all' must be true or false")
    with _open(paths) as repo:
        told = steer_tell.tell(repo.bus, _text(body, "text") or "", task=_text(body, "task"), all_tasks=all_tasks,
                               kind=_text(body, "kind"), locks_dir=repo.lock_path("x").parent)
        return {"told": told.as_dict(), "describe": told.describe()}


def approve(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    task = _task(body)
    with _open(paths) as repo:
        outcome = lifecycle.approve(repo, task, by=_by(repo, body), comment=_comment(body))
        return _reviewed(task, outcome)


def _reviewed(task: str, outcome) -> dict[str, Any]:
    """A review's answer; a task another machine holds (PostgreSQL) as its claim moved, with that machine."""
    if outcome.worker is None:
        return {"changed": outcome.changed, "worker": {"task_id": task, "state": outcome.current,
                                                       "machine": outcome.holder}}
    return {"changed": outcome.changed, "worker": row(outcome.worker, None)}


def _line_comments(body: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """``comments``: ``[{"path", "line", "text"[, "side", "at"]}]`` as the ``path:line: text`` lines the agent reads
    in its thread, and as the records request-changes keeps (``side``: "new", the default, or "old" for a removed
    line; ``at``: the commit whose version of the file the line is numbered in, as the page's diff named it)."""
    given = body.get("comments")
    if given is None:
        return [], []
    if not isinstance(given, list):
        raise UsageError("'comments' must be a list of {path, line, text}")
    lines, records = [], []
    for i, c in enumerate(given):
        if not isinstance(c, dict):
            raise UsageError(f"comments[{i}] must be an object with path, line and text")
        path, line, text = c.get("path"), c.get("line"), c.get("text")
        side, at = c.get("side") or "new", c.get("at")
        if not isinstance(path, str) or not path or "\n" in path:
            raise UsageError(f"comments[{i}]: 'path' must be a file path")
        if isinstance(line, bool) or not isinstance(line, int) or line < 1:
            raise UsageError(f"comments[{i}]: 'line' must be a line number (1 or more)")
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"comments[{i}]: 'text' must say something")
        if side not in ("new", "old"):
            raise UsageError(f"comments[{i}]: 'side' must be 'new' or 'old'")
        if at is not None and not (isinstance(at, str) and 4 <= len(at) <= 64 and all(ch in HEX for ch in at)):
            raise UsageError(f"comments[{i}]: 'at' must be a commit id")
        body_lines = text.strip().splitlines()
        lines.append(f"{path}:{line}: {body_lines[0]}" + "".join(f"\n    {rest}" for rest in body_lines[1:]))
        records.append({"path": path, "line": line, "side": side, "at": at, "text": text.strip()})
    return lines, records


def request_changes(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    """`git worker request-changes --comment TEXT`; line comments become ``path:line: text`` lines of that comment
    (and are recorded with it: the console shows them on their lines after the next round)."""
    task = _task(body)
    comment = _comment(body)
    lines, records = _line_comments(body)
    if lines:
        comment = "\n".join(([comment.strip()] if comment and comment.strip() else []) + lines)
    with _open(paths) as repo:
        outcome = lifecycle.request_changes(repo, task, comment=comment, by=_by(repo, body), line_comments=records)
        return _reviewed(task, outcome)


def _check(paths: RepoPaths, body: dict[str, Any]) -> str | None:
    """``check``: true runs nerve.toml's ``[run] test_command`` (as a person would pass it to ``--check``); a
    string is the ``--check`` command itself; false or absent: no check."""
    check = body.get("check", False)
    if check is False or check is None:
        return None
    if isinstance(check, str):
        lifecycle.parse_check(check)
        return check
    if check is not True:
        raise UsageError("'check' must be true, false or a command")
    from .. import trust

    if paths.toplevel is None:
        raise UsageError("no check command: set [run] test_command in nerve.toml (or send the command as 'check'); "
                         "nothing was merged")
    return trust.default_check(paths.common_dir, paths.toplevel)  # refused (exit 7) until you trusted it


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if not isinstance(value, bool):
        raise UsageError(f"{key!r} must be true or false")
    return value


def _merged(repo: lifecycle.Repo, task: str, res) -> dict[str, Any]:
    from ..bus import workers

    return {"task_id": task, "already": res.already, "into": res.into, "merge_commit": res.commit,
            "pushed": res.pushed, "archive_ref": res.archive_ref, "worktree_removed": res.removed_worktree,
            "branch_deleted": res.deleted_branch, "warnings": res.warnings, "nothing_merged": res.nothing,
            "branch_kept": res.kept, "holder": res.holder,
            "state": "COMPLETED" if res.holder else workers.get(repo.bus.conn, task).state}  # (holder: PostgreSQL)


def merge(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    """`git worker merge [--check CMD] [--delete-branch] [--force]`."""
    task = _task(body)
    check = _check(paths, body)
    with _open(paths) as repo:
        res = lifecycle.merge(repo, task, delete_branch=_flag(body, "delete_branch"), check=check,
                              force=_flag(body, "force"))
        return _merged(repo, task, res)


def cancel(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    """`git worker cancel [--reason R] [--cleanup [--force]]`."""
    task = _task(body)
    with _open(paths) as repo:
        res = lifecycle.cancel(repo, task, reason=_text(body, "reason"), cleanup=_flag(body, "cleanup"),
                               force=_flag(body, "force"))
        return {"changed": res.outcome.changed, "worker": row(res.outcome.worker, None), "warnings": res.warnings,
                "archive_ref": res.archive_ref, "worktree_removed": res.removed_worktree,
                "branch_deleted": res.deleted_branch, "branch_kept": res.kept}


def retry(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    """`git worker retry`."""
    task = _task(body)
    with _open(paths) as repo:
        outcome = lifecycle.retry(repo, task)
        return {"changed": outcome.changed, "worker": row(outcome.worker, None)}


def spawn(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    """`git worker spawn NAME -d DESCRIPTION` (the same checks first: bad input leaves nothing behind)."""
    from ..worker import ids

    name = _text(body, "name", required=True)
    description = _text(body, "description") or ""
    ids.validate(name)
    ids.validate_description(description)
    with _open(paths) as repo:
        res = lifecycle.spawn(repo, name, description=description, fetch=not _flag(body, "no_fetch"))
        if res.created:  # knowledge fresh by default, as `git worker spawn` does
            from ..knowledge.trigger import after_spawn

            warning = after_spawn(repo.config.get("nerve.knowledge"), res.worker.worktree, repo.paths.common_dir)
            res.warnings += [warning] if warning else []
        return {"created": res.created, "worker": row(res.worker, None), "warnings": res.warnings}


def merge_all(paths: RepoPaths, body: dict[str, Any]) -> dict[str, Any]:
    """`git worker merge --all [--check CMD]`: the merge queue, run to its end (or a stop)."""
    from ..steer.queue import merge_all as run_queue

    check = _check(paths, body)
    said: list[str] = []
    with _open(paths) as repo:
        result = run_queue(repo, check=check, delete_branch=_flag(body, "delete_branch"), force=_flag(body, "force"),
                           say=said.append)
        out = {"merged": [_merged(repo, t, res) for t, res in result.merged],
               "failed": [{"task_id": t, "error": e.message, "code": int(e.exit_code), "details": list(e.details),
                           **({"files": e.files} if getattr(e, "files", None) else {})} for t, e in result.failed],
               "skipped": result.skipped, "pending": result.pending, "stopped": result.stopped,
               "outbox": result.lines, "said": said, "code": result.exit_code,
               "summary": result.summary() if (result.merged or result.failed or result.skipped or result.pending
                                               or result.stopped) else "nothing to merge: no task is APPROVED"}
        if result.error is not None:
            raise result.error
        return out


#: per action: the state it moves a task to and the states it starts from (None: any the table allows)
RULES: dict[str, tuple[str, frozenset[str] | None]] = {
    "approve": ("APPROVED", frozenset({"IN_REVIEW"})),
    "request_changes": ("WORKING", frozenset({"IN_REVIEW", "APPROVED"})),
    "merge": ("COMPLETED", frozenset({"APPROVED"})),
    "cancel": ("FAILED", None),
    "retry": ("ASSIGNED", frozenset({"FAILED"})),
}


#: the actions that, in shared mode (git remote or PostgreSQL), run here on a task another machine holds (as the CLI
#: runs them from any machine: :mod:`..worker.lifecycle.review_elsewhere`, :mod:`..worker.lifecycle.merge_elsewhere`)
FROM_ANY_MACHINE = ("approve", "request_changes", "merge")


def reviews_here(repo: lifecycle.Repo) -> bool:
    """Does this repository's shared store run review and merge of another machine's task here (shared mode)? The
    test `git worker merge` itself makes (:func:`..worker.lifecycle.merge_elsewhere.merges_elsewhere`)."""
    from ..worker.lifecycle.merge_elsewhere import merges_elsewhere

    return merges_elsewhere(repo)


def allowed_actions(state: str, *, elsewhere: bool = False, from_here: bool = False) -> list[str]:
    """The task actions the state machine (worker/states.py) allows from ``state``; the server refuses the rest
    anyway (the lifecycle's own refusal). For a task another machine holds (shared mode, ``elsewhere``): where
    the store allows it (``from_here``: every shared backend since issue 36) its review and merge (:data:`FROM_ANY_MACHINE`), else none: it is read-only here,
    as the CLI refuses every verb on it (exit 8; see :func:`held_elsewhere`)."""
    from ..worker.states import can_transition

    allowed = [a for a, (to, froms) in RULES.items() if (froms is None or state in froms) and can_transition(state, to)]
    if elsewhere:
        return [a for a in allowed if a in FROM_ANY_MACHINE] if from_here else []
    return allowed


def held_elsewhere(task_id: str, state: str, machine: str, *, from_here: bool = False) -> str:
    """What the console shows with a task another machine holds: the commands to run on that machine, those the
    CLI's refusal names (:data:`..worker.claims.RUN_THERE`); in shared mode (``from_here``) that its review and
    merge run here, the rest (cancel, retry, its worktree) on that machine."""
    from ..worker.claims import RUN_THERE

    if from_here:
        return (f"held by machine {machine}: its review and merge run from here (shared mode); "
                f"cancel, retry and its worktree stay on machine {machine}")
    there = [f"git worker {a.replace('_', '-')} {task_id}" for a in allowed_actions(state)
             if a.replace("_", "-") in RUN_THERE.values()]
    return (f"held by machine {machine}: read-only here"
            + (f"; run {' or '.join(f'`{c}`' for c in there)} on machine {machine}" if there else ""))


ACTIONS = {"tell": tell, "approve": approve, "request-changes": request_changes, "request_changes": request_changes,
           "merge": merge, "cancel": cancel, "retry": retry, "spawn": spawn, "merge_all": merge_all,
           "merge-all": merge_all}

__all__ = ["ACTIONS", "FROM_ANY_MACHINE", "RULES", "allowed_actions", "approve", "cancel", "held_elsewhere", "merge",
           "merge_all", "request_changes", "retry", "reviews_here", "spawn", "tell"]
