"""What `git nerve mcp` does for one task: plain functions, no MCP in sight.

Each function is one MCP tool. It takes the task the server is bound to (the
worktree's ``.worker-ctx.json``, read once at start) and returns the text the
agent is handed: the same words the matching command prints (`git nerve
thread`, `git worker heartbeat`, ...), cleaned of control codes. A refusal is
a :class:`~git_nerve.errors.NerveError` with one line, as on the command line;
the server turns it into an MCP tool error.

Every call opens its own bus and closes it: the SDK runs these functions in a
worker thread, and a SQLite connection belongs to the thread that made it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import clock, context
from ..errors import GitError, UsageError
from ..paths import RepoPaths, discover
from ..text import clean
from .names import RUN_TOOLS, SERVER_NAME, TOOL_NAMES, executable, server_entry  # noqa: F401  (re-exported)

@dataclass(frozen=True)
class Binding:
    """Where the server runs: the repository, and the task of the worktree it was started in (None outside one)."""

    paths: RepoPaths
    task_id: str | None

    def task(self) -> str:
        if self.task_id is None:
            raise UsageError(
                "this MCP server was not started inside a task's worktree, so it has no task; "
                "start it from one (`git worker spawn TASK` makes one) or with --task TASK"
            )
        return self.task_id


def bind(cwd: str | os.PathLike[str] | None = None, task: str | None = None) -> Binding:
    """The repository at ``cwd`` and its worktree's task (``task`` overrides; it must exist on the bus).

    Outside a git repository, or in a repository git-nerve has not initialised: UsageError.
    """
    paths = discover(cwd)
    if not paths.bus_path.exists():
        raise UsageError(f"git-nerve is not set up in {paths.toplevel or paths.common_dir}; run `git nerve init` first")
    task_id = task or None
    if task_id is None:
        ctx = context.read(paths.git_dir)
        task_id = ctx.task_id if ctx is not None else None
    if task_id is not None:
        from ..bus import open_bus, workers

        with open_bus(paths.common_dir, create=False) as bus:
            if workers.get(bus.conn, task_id) is None:
                raise UsageError(f"unknown task {task_id!r}")
    return Binding(paths, task_id)


def _bus(b: Binding):
    from ..bus import open_bus

    return open_bus(b.paths.common_dir, create=False)


def _repo(b: Binding):
    from ..worker.lifecycle import open_repo

    return open_repo(b.paths.toplevel or b.paths.common_dir, create=False)


# -- the tools ---------------------------------------------------------------------


def thread(b: Binding, budget: int | None = None, before: int | None = None) -> str:
    """Exactly what `git nerve thread [--budget N] [--before M]` prints in the task's worktree."""
    from ..thread import service
    from ..thread.select import DEFAULT_BUDGET

    task = b.task()
    with _bus(b) as bus:
        view = service.view(bus, task, before=before, budget=DEFAULT_BUDGET if budget is None else budget,
                            hints=True, here=b.paths, brief=True)
    if not view.empty:
        return view.render()
    empty = service.nothing_before(task, before)
    return f"{empty}\n\n{view.render()}" if view.hints else empty


def post(b: Binding, role: str, content: str, metadata: dict[str, Any] | None = None) -> str:
    """Append a round to the task's thread (as `git nerve post --role ROLE`)."""
    from ..thread import service

    task = b.task()
    with _bus(b) as bus:
        number = service.post(bus, task, role=role, content=content, metadata=metadata)
    return f"round {number} posted to the thread of {task}"


def heartbeat(b: Binding, status: str | None = None, progress: float | None = None) -> str:
    """A heartbeat with a status line (as `git worker heartbeat --status TEXT --progress P`)."""
    from ..worker.heartbeat import record

    if progress is not None and not 0.0 <= progress <= 1.0:
        raise UsageError("progress must be between 0 and 1")
    if status is not None and ("\n" in status or "\r" in status):
        status = " ".join(status.split())
    task = b.task()
    with _bus(b) as bus:
        ts = record(bus, task, status=status, progress=progress, source="mcp")
    return f"heartbeat: {task} at {clock.iso(ts)}"


def state(b: Binding) -> str:
    """The task's row of `git worker status --json` (its ``usage`` included), plus its unread notes count and
    radar marks, as JSON."""
    from ..bus import steer, usage, workers
    from ..worker.status import row

    task = b.task()
    with _repo(b) as repo:
        w = workers.get(repo.bus.conn, task)
        try:
            settings = repo.settings
        except Exception:  # like `git worker status`: the row without staleness rather than nothing
            settings = None
        data = row(w, settings)
        data["unread_notes"] = len(steer.undelivered_notes(repo.bus.conn, task, all_since=w.assigned_at))
        result = _scan(b)
        mine = result.for_task(task)
        data["attention"] = _attention(repo, w, mine)
        spent = usage.per_task(repo.bus.conn, [task])[task]  # what this task's agents used (issue 39)
        data["usage"] = {k: spent[k] for k in ("input_tokens", "cached_input_tokens", "output_tokens", "cost_usd")}
    data["radar"] = [_mark(p, task, result) for p in mine]
    return clean(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _attention(repo, w, pairs) -> str | None:
    """What needs the person about ``w``, as `git worker status --json` says it (issue 38); ``pairs``: its radar's."""
    from ..worker import attention

    flagged = {w.task_id} if any(p.kind == "conflict" for p in pairs) else set()
    return attention.of_all(repo.bus.conn, {w.task_id: w}, flagged, now=clock.now(),
                            stuck=attention.stuck_after(repo.paths.toplevel))[w.task_id]


def done(b: Binding) -> str:
    """`git worker done` for this task, refused (as `git worker run --done` refuses) without a commit of its own."""
    from ..bus import workers
    from ..git import refs, worktrees
    from ..worker import lifecycle

    task = b.task()
    with _repo(b) as repo:
        w = workers.get(repo.bus.conn, task)
        if w.state in ("WORKING", "CONFLICTED"):
            wt = Path(w.worktree)
            tip = refs.resolve(wt, f"refs/heads/{w.branch}") if wt.is_dir() else None
            onto = refs.resolve(repo.cwd, lifecycle.integration_ref(repo, w.integration, fetch=False))
            if tip is None:
                raise GitError(f"the branch {w.branch} of {task} does not exist")
            dirty = worktrees.dirty_files(wt)
            if dirty:
                named = ", ".join(dirty[:10]) + (" and more" if len(dirty) > 10 else "")
                raise GitError(f"not marked done: uncommitted changes left in the worktree: {named}")
            if onto is not None and refs.is_ancestor(wt, tip, onto):
                raise GitError(f"not marked done: no commit on {w.branch} beyond {w.integration}; commit your work first")
        res = lifecycle.done(repo, task)
        w = workers.get(repo.bus.conn, task)
    if res.already:
        return f"Ready for review: {task} (already {w.state})"
    parts = []
    if res.rebased:
        parts.append(f"rebased {len(res.rewritten)} commit(s) onto {w.integration}")
    if res.pushed:
        parts.append("pushed")
    parts += res.kept  # what the fenced old holder pushed after a takeover, archived and replaced
    return clean(f"Ready for review: {task} ({w.state}, tip {res.tip})" + (f"; {', '.join(parts)}" if parts else ""))


def knowledge_query(b: Binding, text: str, limit: int = 5) -> str:
    """`git nerve knowledge query TEXT --limit N` in this worktree: ``path:start-end  score`` and the chunk."""
    from ..knowledge import query as kquery

    result = kquery.search(b.paths, text, limit)
    lines = [f"warning: {w}" for w in result.warnings]
    if not result.hits:
        lines.append(f"no results for {text!r} (is the index built? `git nerve knowledge sync`)")
    for h in result.hits:
        lines.append(f"{h.path}:{h.start_line}-{h.end_line}  {h.score:.4f}")
        lines.append(h.text.rstrip("\n"))
        lines.append("")
    return clean("\n".join(lines).rstrip("\n"))


def _scan(b: Binding):
    from ..radar import scan

    return scan.cached(b.paths.common_dir)


def _mark(pair, task: str, result) -> str:
    from ..radar.notify import describe

    return describe(pair, task, result.integration)


def conflicts(b: Binding, refresh: bool = False) -> str:
    """The conflict radar for this task (`git worker conflicts`, only the pairs that involve it)."""
    from ..radar import notify, scan

    task = b.task()
    result = _scan(b)
    if refresh or result.at is None:
        with _repo(b) as repo:
            result = scan.recompute(repo)
            notify.after(repo, result)
    mine = result.for_task(task)
    age = f" (computed {clock.ago(result.at)} ago)" if result.at else ""
    if not mine:
        return f"no overlaps between {task} and other live work{age}"
    lines = []
    for p in sorted(mine, key=lambda p: (p.kind != "conflict", p.a, p.b)):
        lines.append(("CONFLICT: " if p.kind == "conflict" else "overlap (merges cleanly): ") + _mark(p, task, result))
    from ..bus import workers

    with _repo(b) as repo:
        w = workers.get(repo.bus.conn, task)
        seen = _attention(repo, w, mine) if w is not None else None
    if seen:  # as the person's `git worker status` shows this task
        lines.append(f"attention: {seen} (what the person's `git worker status` shows for {task})")
    return clean("\n".join(lines) + age)


def notes(b: Binding, reader: str, pid: int | None) -> str:
    """The notes a person sent this task that its agents have not read yet, now marked delivered to ``reader``."""
    from ..steer import delivery

    task = b.task()
    with _bus(b) as bus:
        found = delivery.deliver(bus, task, reader=reader, via="mcp", pid=pid)
    if not found:
        return f"no new notes for {task}"
    return delivery.for_agent(found) + "\nWhen you have acted on them, call note_acted with what you did."


def note_acted(b: Binding, how: str, note_ids: list[int] | None = None) -> str:
    """Record that the delivered notes (or only ``note_ids``) were acted on, and how."""
    from ..steer import delivery

    how = " ".join(str(how).split())
    if not how:
        raise UsageError("say how the notes were acted on (how: one line)")
    task = b.task()
    with _bus(b) as bus:
        done_ = delivery.acted(bus, task, how=how, inbox_ids=note_ids)
    if not done_:
        return f"no delivered note of {task} was waiting to be acted on"
    return "recorded as acted on: " + ", ".join(f"note #{d.inbox_id}" for d in done_)


def reader_name(client_info: Any) -> str:
    """The MCP client's ``name/version`` from its initialize request (``unknown client`` when it sent none)."""
    if client_info is None:
        return "unknown client"
    name = " ".join(str(getattr(client_info, "name", "") or "").split()) or "unknown client"
    version = " ".join(str(getattr(client_info, "version", "") or "").split())
    return clean(f"{name}/{version}" if version else name, newlines=False, tabs=False)[:120]
