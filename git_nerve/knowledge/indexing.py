"""Reading, chunking and writing the files a sync planned (:mod:`.sync` decides which).

Files are read and written a batch at a time, each batch in one transaction. A file whose content the
store holds already (another worktree's, an earlier commit's) is not chunked. With :data:`POOL_MIN` files
or more to read and a batch with :data:`POOL_BATCH_MIN` to chunk (a first sync), a pool of processes over
the machine's cores chunks the next batch (:func:`~.store.prepare`: chunks, their hashes and the words
FTS5 indexes) while this process writes the last; only this process writes the store. The pool forks
on Linux when this process runs no other thread, else it spawns (macOS; the console's or MCP server's
threads), so a program calling a sync needs the usual ``if __name__ == "__main__"`` guard.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from .chunking import chunk_file
from .store import Index, Prepared, blob_id, prepare

BINARY_SNIFF = 8000
SKIP_BINARY = "binary"
#: Files read, then written in one transaction.
BATCH = 256
#: Files to read before a sync spreads the chunking over a pool of processes, and the most it starts.
POOL_MIN = 400
POOL_MAX = 4
#: ... started at the first batch with this many files to chunk (a new worktree's first sync chunks only what
#: the store lacks: often nothing)
POOL_BATCH_MIN = 64
#: Files per task handed to a pool worker.
POOL_TASK = 32


def read_file(path: Path) -> bytes | None:
    """The file's bytes, None when it is binary."""
    data = path.read_bytes()
    return None if b"\0" in data[:BINARY_SNIFF] else data


def digest(data: bytes) -> str:
    """The key of a file's content in the store: its git blob id."""
    return blob_id(data)


def read_and_index(index: Index, toplevel: Path, read: list, report, full: bool, progress=None) -> None:
    """Read, chunk and write ``read`` ((path, size, mtime_ns, indexed row) each: a sync's plan) a batch at a
    time, into ``report``'s counts. With many files, a pool of processes chunks the next batch while this one
    writes the last (the store is written by this process alone), and FTS5 merges less eagerly meanwhile."""
    total = len(read)
    batches = [read[start:start + BATCH] for start in range(0, total, BATCH)]
    with index.bulk() if total >= POOL_MIN else contextlib.nullcontext():
        _batches(index, toplevel, batches, total, report, full, progress)


def _batches(index: Index, toplevel: Path, batches: list, total: int, report, full: bool, progress) -> None:
    pool = None
    try:
        pending = None
        for k, batch in enumerate(batches):
            work = _read_batch(index, toplevel, batch, full)
            todo = [(i, w[1], w[3][1]) for i, w in enumerate(work) if w[0] == "chunk"]
            items = [(path, data) for _, path, data in todo]
            if pool is None and total >= POOL_MIN and len(items) >= POOL_BATCH_MIN:
                pool = _pool()  # None on one core
            chunked = [pool.submit(_prepare_many, items[i:i + POOL_TASK]) for i in range(0, len(items), POOL_TASK)] if pool else None
            if pending is not None:
                _write_batch(index, *pending, report)
            pending = (work, todo, chunked)
            if progress and k:
                progress("reading", k * BATCH, total)
        if pending is not None:
            _write_batch(index, *pending, report)
        if progress and total:
            progress("reading", total, total)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _pool():
    """A process pool over the machine's cores; None on one core (chunked here)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        cores = os.cpu_count() or 1
    if cores < 2:
        return None
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    # fork (nothing re-imported) where it is safe: Linux, a process running no other thread; else spawn (macOS,
    # the console's or MCP server's threads), whose workers import this module afresh
    how = "fork" if sys.platform.startswith("linux") and threading.active_count() == 1 else "spawn"
    return ProcessPoolExecutor(max_workers=min(cores, POOL_MAX), mp_context=multiprocessing.get_context(how))


def _prepare_many(items: list[tuple[str, bytes]]) -> list[Prepared]:
    """Chunk files and make their rows (in a pool worker, or here)."""
    return [prepare(path, chunk_file(path, data.decode("utf-8", "replace"))) for path, data in items]


def _read_batch(index: Index, toplevel: Path, batch: list, full: bool) -> list[tuple]:
    """(action, path, indexed row, extra, size, mtime_ns) for each file of ``batch``: read and hashed, not yet chunked."""
    work = []
    for path, size, mtime_ns, row in batch:
        try:
            data = read_file(toplevel / path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            work.append(("gone", path, row, None, size, mtime_ns))
            continue
        except PermissionError:
            work.append(("skip", path, row, "unreadable", size, mtime_ns))
            continue
        if data is None:
            work.append(("skip", path, row, SKIP_BINARY, size, mtime_ns))
            continue
        h = digest(data)
        if row is not None and row.hash == h and not full:
            work.append(("touch", path, row, None, size, mtime_ns))
        elif index.has_doc(path, h):  # another worktree (or an earlier commit) holds this content: no chunking
            work.append(("put", path, row, (h, lambda path=path, data=data: _prepare_many([(path, data)])[0]), size, mtime_ns))
        else:
            work.append(("chunk", path, row, (h, data), size, mtime_ns))
    return work


def _write_batch(index: Index, work: list[tuple], todo: list, chunked, report) -> None:
    if chunked is None:
        prepared = _prepare_many([(path, data) for _, path, data in todo])
    else:
        prepared = [rows for future in chunked for rows in future.result()]
    for (i, _, _), rows in zip(todo, prepared):
        action, path, row, (h, _), size, mtime_ns = work[i]
        work[i] = ("put", path, row, (h, rows), size, mtime_ns)
    with index.write() as conn:
        for action, path, row, extra, size, mtime_ns in work:
            if action == "gone":
                index.remove_file(conn, path)
                report.removed += row is not None
            elif action == "skip":
                index.skip_file(conn, path, extra, size, mtime_ns)
                report.skipped[extra] = report.skipped.get(extra, 0) + 1
                report.removed += row is not None
            elif action == "touch":
                index.touch_file(conn, path, size, mtime_ns)
                report.unchanged += 1
            else:
                h, chunks = extra
                report.chunks_written += index.put_file(conn, path, h, size, mtime_ns, chunks) or 0
                if row is None:
                    report.added += 1
                elif row.hash == h:
                    report.unchanged += 1
                else:
                    report.changed += 1
