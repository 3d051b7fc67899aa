"""The commit spool: what the hook shims record without starting Python, and its ingestion.

In a worker's worktree the shim (``hooks/git-nerve-hook``) appends one line
per event to ``<git-dir>/nerve/spool`` (the worktree's own git dir, so
nothing shows in ``git status``)::

    commit<TAB><sha>                     post-commit (commit, amend, cherry-pick, revert, merge commit)
    merge<TAB><sha><TAB><squash 0|1>     post-merge (git merge / pull, fast-forward or not)
    rewrite<TAB><source><TAB><old>:<new> <old>:<new> ...   post-rewrite (amend, rebase)

:func:`ingest` turns pending lines into what the hooks used to write
themselves: a ``heartbeat`` per event and a ``commit`` / ``rewrite`` message.
It runs whenever the bus is opened (:class:`git_nerve.bus.connection.Bus`),
so every reader (``git worker status/show/done/merge``, ``git nerve thread``,
the workflow runner, the radar) sees every commit first. Standard library only.

Crash safety and idempotence: a spool is first renamed to
``spool.claimed-<pid>-<ns>`` (the shim's later lines go to a fresh spool),
its lines are ingested in one bus transaction in which each event is keyed
(a commit by its sha, a rewrite by its pairs) so an event already on the bus
is skipped, and the claimed file is removed only after the commit. A reader
that dies half-way leaves the claimed file; the next reader ingests it, and
what was already recorded is not recorded twice.

An agent's box (issue 41, :mod:`git_nerve.workflow.sandbox`) cannot write the bus: the task's box spool
``<common-dir>/nerve/box/<task>/spool`` is the one place it may write, named by :data:`BOX_ENV`. The hooks'
lines go there, and so do ``git nerve post`` (``post<TAB><json>``) and ``git worker heartbeat``
(``heartbeat<TAB><json>``) run inside the box. Its lines are attributed to the task the directory is named
after, never to what a file inside the box claims.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..filedoor import Refused, remove_own_file

SPOOL = "spool"
CLAIMED = "spool.claimed-"
SOURCES = {"commit": "post-commit", "merge": "post-merge", "rewrite": "post-rewrite"}
BOX = "box"
#: inside an agent's box: the task's box spool directory (set by the box, read by git-nerve's own commands)
BOX_ENV = "NERVE_BOX_SPOOL"
#: the kinds of line only git-nerve's own commands inside a box write (the hooks write the others)
BOXED = ("post", "heartbeat", "deliver")
#: the most of one post's content a box spool line carries
MAX_BOX_LINE = 256 * 1024


def box_dir(common_dir: str | os.PathLike[str], task_id: str) -> Path:
    """The box spool directory of ``task_id``: the one place of the repository its boxed agent writes to."""
    return Path(common_dir) / "nerve" / BOX / task_id


def box_spool() -> Path | None:
    """Inside an agent's box: its spool directory; None outside."""
    where = os.environ.get(BOX_ENV)
    return Path(where) if where else None


def append_box(kind: str, payload: dict) -> None:
    """One ``post`` / ``heartbeat`` line for git-nerve outside the box (one append, one write)."""
    import json

    where = box_spool()
    assert where is not None
    line = f"{kind}\t{json.dumps(payload, separators=(',', ':'))}\n".encode()
    if len(line) > MAX_BOX_LINE:
        from ..errors import UsageError

        raise UsageError(f"too long for the box's spool ({len(line)} bytes, at most {MAX_BOX_LINE})")
    fd = os.open(where / SPOOL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def spool_path(git_dir: str | os.PathLike[str]) -> Path:
    return Path(git_dir) / "nerve" / SPOOL


def _nerve_dirs(common_dir: Path) -> list[Path]:
    """The ``nerve`` dirs of every git dir of the repository (the main one and each linked worktree's), then
    the box spool directories (:func:`box_dir`)."""
    found = [common_dir / "nerve"]
    for parent, sub in ((common_dir / "worktrees", "nerve"), (common_dir / "nerve" / BOX, "")):
        try:
            entries = os.scandir(parent)
        except OSError:
            continue
        with entries:
            for e in entries:
                found.append(Path(e.path) / sub if sub else Path(e.path))
    return found


def _pending(nerve_dir: Path) -> list[str]:
    try:
        names = os.listdir(nerve_dir)
    except OSError:
        return []
    return [n for n in names if n == SPOOL or n.startswith(CLAIMED)]


def _claim(nerve_dir: Path, names: list[str]) -> list[Path]:
    """Rename a live spool to a claimed file; with earlier claimed files left by a reader that died."""
    claimed = []
    for name in sorted(names):
        path = nerve_dir / name
        if name == SPOOL:
            target = nerve_dir / f"{CLAIMED}{os.getpid()}-{_ns()}"
            try:
                os.rename(path, target)
            except FileNotFoundError:
                continue  # another reader claimed it first
            claimed.append(target)
        else:
            claimed.append(path)
    return claimed


def _ns() -> int:
    import time

    return time.time_ns()


def parse(line: str) -> tuple | None:
    """One spool line as ``(kind, sha-or-source, extra)``; None when it is not one of ours."""
    parts = line.rstrip("\n").split("\t")
    kind = parts[0]
    if kind == "commit" and len(parts) >= 2 and _is_sha(parts[1]):
        return ("commit", parts[1], None)
    if kind == "merge" and len(parts) >= 2 and _is_sha(parts[1]):
        return ("merge", parts[1], (parts[2] if len(parts) > 2 else "0") == "1")
    if kind in ("post", "heartbeat", "deliver") and len(parts) == 2:
        payload = _json_object(parts[1])
        return (kind, payload, None) if payload is not None else None
    if kind == "rewrite" and len(parts) >= 3:
        pairs = []
        for item in parts[2].split():
            old, _, new = item.partition(":")
            if _is_sha(old) and _is_sha(new):
                pairs.append([old, new])
        return ("rewrite", parts[1], pairs)
    return None


def _json_object(text: str) -> dict | None:
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _read(path: Path) -> tuple[list[str], float, int]:
    """A spool's lines; nothing from what is not a regular file (a boxed agent may have put a FIFO or a
    symlink there: neither blocks nor redirects the reader)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return [], 0.0, 0
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return [], 0.0, 0
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
    except OSError:
        return [], 0.0, 0
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").splitlines(), st.st_mtime, len(data)


def _commit_info(common_dir: Path, shas: list[str]) -> dict[str, tuple[float, str]]:
    """sha -> (committer time, subject); commits git no longer has are left out."""
    if not shas:
        return {}
    from ..git import history

    return history.commit_times_and_subjects(common_dir, shas)


def ingest(bus, common_dir: str | os.PathLike[str] | None = None) -> int:
    """Record every pending spool line of the repository on ``bus``; returns how many events were new.

    Never raises for a spool it cannot read or a task that is gone: such
    lines are dropped (a task that is gone has no one to tell).
    """
    common = Path(common_dir) if common_dir is not None else bus.path.parent.parent
    work = []  # (git_dir, claimed files)
    for nerve_dir in _nerve_dirs(common):
        names = _pending(nerve_dir)
        if names:
            claimed = _claim(nerve_dir, names)
            if claimed:
                work.append((nerve_dir, claimed))
    if not work:
        return 0
    from .. import clock, faults

    faults.point("spool.after-claim")
    batches = []  # (task_id, [(kind, a, b, mtime)])
    done_files = []
    for nerve_dir, claimed in work:
        task_id = _task_of(nerve_dir, common)
        events = []
        for path in claimed:
            lines, mtime, size = _read(path)
            done_files.append((path, size))
            for line in lines:
                event = parse(line)
                if event is not None:
                    events.append((*event, mtime))
        if task_id is not None and events:
            batches.append((task_id, events))
    shas = [e[1] for _, events in batches for e in events if e[0] in ("commit", "merge")]
    shas += [e[2][-1][1] for _, events in batches for e in events if e[0] == "rewrite" and e[2]]
    info = _commit_info(common, shas) if shas else {}
    now = clock.now()
    new = 0
    if batches:
        with bus.write() as conn:
            for task_id, events in batches:
                new += _record(conn, task_id, events, info, now)
    faults.point("spool.after-record")
    for path, size in done_files:
        try:
            if path.stat().st_size > size:
                continue  # a shim appended while we read: the next reader takes the rest (keys skip the rest)
            remove_own_file(path, within=path.parent, kind="spool-claimed")
        except (OSError, Refused):
            pass
    return new


def _task_of(nerve_dir: Path, common: Path) -> str | None:
    """Whose lines a spool holds: a box spool's, the task its directory is named after (never what the box
    wrote); a worktree's, the task of its context file."""
    if nerve_dir.parent == common / "nerve" / BOX:
        return nerve_dir.name
    from ..context import read as read_context
    from ..errors import NerveError

    try:
        ctx = read_context(nerve_dir.parent)
    except NerveError:
        return None
    return ctx.task_id if ctx is not None else None


def _record(conn, task_id: str, events: list, info: dict, now: float) -> int:
    from . import messages, workers

    w = workers.get(conn, task_id)
    if w is None:
        return 0
    seen_commits = set()
    seen_rewrites = set()
    for m in messages.for_task(conn, task_id, kinds=("commit", "rewrite")):
        if m.kind == "commit":
            seen_commits.add(m.payload.get("sha"))
        else:
            seen_rewrites.add((m.payload.get("source"), _pairs_key(m.payload.get("pairs"))))
    last = w.last_heartbeat or 0.0
    new = 0
    boxed = [e for e in events if e[0] in BOXED]
    if boxed:
        new += _record_boxed(conn, task_id, boxed, now)
        events = [e for e in events if e[0] not in BOXED]
        last = workers.get(conn, task_id).last_heartbeat or 0.0
    for kind, a, b, mtime in events:
        if kind in ("commit", "merge"):
            if a in seen_commits:
                continue
            seen_commits.add(a)
            ct, subject = info.get(a, (mtime, ""))
            ts = min(ct, mtime, now) if kind == "commit" else min(mtime, now)
            payload: dict = {"sha": a, "subject": subject}
            if kind == "merge":
                payload["source"] = "merge"
                if b:
                    payload["squash"] = True
        else:
            key = (a, _pairs_key(b))
            if key in seen_rewrites:
                continue
            seen_rewrites.add(key)
            ts = min(mtime, now)
            payload = {"source": a, "pairs": b}
        messages.publish(conn, task_id, "heartbeat", {"source": SOURCES[kind]}, ts)
        messages.publish(conn, task_id, "commit" if kind in ("commit", "merge") else "rewrite", payload, ts)
        if ts >= last:
            workers.heartbeat(conn, task_id, ts, None, None)
            last = ts
        new += 1
    return new


def _record_boxed(conn, task_id: str, events: list, now: float) -> int:
    """A boxed agent's posts (each once: keyed by the id it was spooled with) and heartbeats."""
    from . import messages, rounds, workers

    new = 0
    for kind, payload, _, mtime in events:
        ts = min(float(payload.get("ts") or mtime), mtime, now)
        if kind == "deliver":
            new += _record_delivered(conn, task_id, payload, ts)
            continue
        if kind == "heartbeat":
            status, progress = payload.get("status"), payload.get("progress")
            status = status[:500] if isinstance(status, str) else None
            progress = float(progress) if isinstance(progress, (int, float)) and 0 <= progress <= 1 else None
            workers.heartbeat(conn, task_id, ts, status, progress)
            facts = {"source": "box", **({"status": status} if status else {}),
                     **({"progress": progress} if progress is not None else {})}
            messages.publish(conn, task_id, "heartbeat", facts, ts)
            new += 1
            continue
        key, role, content = str(payload.get("id") or ""), payload.get("role"), payload.get("content")
        meta = payload.get("metadata") if isinstance(payload.get("metadata"), dict) else {}
        if not (key and isinstance(role, str) and role.strip() and isinstance(content, str)):
            continue
        if conn.execute("SELECT 1 FROM rounds WHERE thread_id = ? AND json_extract(metadata, '$.box_post') = ?",
                        (task_id, key)).fetchone():
            continue  # taken in before a reader died: once
        rounds.append(conn, task_id, role=" ".join(role.split())[:100], content=content,
                      metadata={**meta, "box_post": key}, ts=ts)
        new += 1
    return new


def _record_delivered(conn, task_id: str, payload: dict, ts: float) -> int:
    """Notes a boxed agent was handed (those of the ids that are this task's undelivered notes), recorded."""
    from . import steer, workers

    via = payload.get("via") if payload.get("via") in steer.VIAS else "hook"
    pid = payload.get("pid") if isinstance(payload.get("pid"), int) else None
    reader = " ".join(str(payload.get("reader") or "agent").split())[:60]
    if "stop" in payload:  # the task's last stop reached the agent (only that one: the id must match)
        m = steer.last_stop(conn, task_id)
        if m is None or m.id != payload["stop"]:
            return 0
        return int(steer.stop_delivered(conn, task_id, m, reader=reader, via=via, pid=pid, ts=ts))
    ids = {i for i in payload.get("ids") or () if isinstance(i, int)}
    w = workers.get(conn, task_id)
    notes = [m for m in steer.undelivered_notes(conn, task_id, all_since=w.assigned_at if w else None) if m.id in ids]
    steer.deliver_notes(conn, task_id, notes, reader=reader, via=via, pid=pid, ts=ts)
    return len(notes)


def box_delivered() -> set[int]:
    """Inside a box: the note ids its spool already says were handed over (not yet taken in outside)."""
    where = box_spool()
    found: set[int] = set()
    if where is None:
        return found
    for name in _pending(where):
        for line in _read(where / name)[0]:
            event = parse(line)
            if event is not None and event[0] == "deliver":
                found.update(i for i in event[1].get("ids") or () if isinstance(i, int))
    return found


def _pairs_key(pairs) -> tuple:
    return tuple(tuple(p) for p in pairs or ())


def ingest_quietly(bus) -> None:
    """:func:`ingest` for the bus's open path: a failure is one warning line, never the reader's failure."""
    try:
        ingest(bus)
    except Exception as exc:  # noqa: BLE001 - the spool stays for the next reader
        sys.stderr.write(f"warning: git-nerve: commits recorded by the hooks not read yet ({type(exc).__name__}: {exc})\n")


__all__ = ["BOX_ENV", "SPOOL", "append_box", "box_delivered", "box_dir", "box_spool", "ingest", "ingest_quietly", "parse", "spool_path"]
