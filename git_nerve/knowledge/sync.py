"""Bringing a worktree's index up to date with its files, incrementally.

The files are what ``git ls-files --cached --others --exclude-standard``
lists (tracked, plus new files git does not ignore), filtered by
``knowledge.yaml``. A file whose size and mtime match the index is not read;
one that is read but whose content hash matches is not re-chunked. Binary
files (a NUL byte in the first 8,000 bytes, git's own test), files over the
size limit and anything that is not a regular file (symlinks, submodules)
are skipped, remembered and counted. Files that left the tree or the
configuration leave the index.

Embeddings, when ``nerve.toml`` configures them, are fetched afterwards for
chunk texts the shared cache does not hold yet; an endpoint failure is a
warning in the report, never a failed sync.

Every sync of a worktree holds ``<git-dir>/nerve/knowledge.lock``; see
:mod:`.trigger` for how background syncs share it.

What the plan says to read is read, chunked and written by :mod:`.indexing` (a process pool chunks
when there are many files).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import locks
from ..errors import NerveError
from ..git import refs, tracked
from ..paths import RepoPaths
from . import config, registry, trigger
from .indexing import SKIP_BINARY, digest, read_and_index, read_file  # noqa: F401  (read_file, digest: re-exported)
from .ranking import pack
from .store import EmbeddingCache, FileRow, Index, SkipRow, cache_path, open_index

#: A background sync given more files than this walks the whole tree instead.
MAX_LISTED = 2000
#: How long a manual sync waits for a running one.
LOCK_WAIT = 600.0

SKIP_LARGE = "too large"
SKIP_SPECIAL = "not a regular file"
SKIP_NAME = "name not UTF-8"

#: progress(stage, done, total); stage is "reading" or "embedding"
Progress = Callable[[str, int, int], None]


@dataclass
class SyncReport:
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  #: reason -> files
    files: int = 0  #: files in the index afterwards
    chunks: int = 0  #: chunks in the index afterwards
    chunks_written: int = 0
    seconds: float = 0.0
    scope: str = "all"  #: "all" (the whole tree) or "files" (only the files given)
    full: bool = False
    config: str = "defaults"
    rebuilt: bool = False  #: an index of an older format was dropped first
    embeddings: dict | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def as_dict(self) -> dict:
        return {
            "added": self.added, "changed": self.changed, "removed": self.removed, "unchanged": self.unchanged,
            "skipped": self.skipped_total, "skipped_by_reason": dict(self.skipped), "files": self.files,
            "chunks": self.chunks, "chunks_written": self.chunks_written, "seconds": round(self.seconds, 3),
            "scope": self.scope, "full": self.full, "config": self.config, "rebuilt": self.rebuilt,
            "embeddings": self.embeddings, "warnings": list(self.warnings),
        }


@dataclass
class Plan:
    """What a sync would do, from stat alone."""

    read: list[tuple[str, int, int, FileRow | None]] = field(default_factory=list)  #: (path, size, mtime_ns, indexed row)
    skip: list[tuple[str, str, int, int]] = field(default_factory=list)  #: newly skipped (path, reason, size, mtime_ns)
    skipped: dict[str, int] = field(default_factory=dict)  #: every skipped file by reason
    remove: list[str] = field(default_factory=list)  #: in the index (or its skip list) and no longer wanted
    unchanged: int = 0
    #: files that were indexed and now leave the index
    removed_indexed: int = 0


def list_files(toplevel: Path, only: list[str] | None = None) -> list[str]:
    """The files git does not ignore (tracked or not), relative to ``toplevel``; only those among ``only`` if given.

    Names that are not UTF-8 come back with surrogate escapes.
    """
    return tracked.files_not_ignored(toplevel, only)


def plan(
    toplevel: Path, cfg: config.KnowledgeConfig, indexed: dict[str, FileRow], skipped: dict[str, SkipRow],
    listed: list[str], considered: set[str] | None, *, full: bool = False,
) -> Plan:
    """Compare the tree with the index by stat. ``considered``: the only paths looked at (None: all)."""
    p = Plan()
    wanted: set[str] = set()
    prefix = f"{toplevel}{os.sep}"  # string joins: pathlib costs more than the lstat itself here

    def skip(path: str, reason: str, size: int, mtime_ns: int) -> None:
        p.skipped[reason] = p.skipped.get(reason, 0) + 1
        old = skipped.get(path)
        if old is None or (old.reason, old.size, old.mtime_ns) != (reason, size, mtime_ns) or path in indexed:
            p.skip.append((path, reason, size, mtime_ns))

    for path in listed:
        if not cfg.included(path):
            continue
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            p.skipped[SKIP_NAME] = p.skipped.get(SKIP_NAME, 0) + 1
            continue
        try:
            st = os.lstat(prefix + path)
        except (FileNotFoundError, NotADirectoryError):
            continue  # tracked, deleted from the work tree: it leaves the index
        wanted.add(path)
        if not stat.S_ISREG(st.st_mode):
            skip(path, SKIP_SPECIAL, 0, 0)
            continue
        if st.st_size > cfg.max_file_size:
            skip(path, SKIP_LARGE, st.st_size, st.st_mtime_ns)
            continue
        row = indexed.get(path)
        if not full and row is not None and row.size == st.st_size and row.mtime_ns == st.st_mtime_ns:
            p.unchanged += 1
            continue
        old_skip = skipped.get(path)
        if not full and old_skip is not None and old_skip.reason == SKIP_BINARY and (old_skip.size, old_skip.mtime_ns) == (st.st_size, st.st_mtime_ns):
            p.skipped[SKIP_BINARY] = p.skipped.get(SKIP_BINARY, 0) + 1
            continue
        p.read.append((path, st.st_size, st.st_mtime_ns, row))
    known = set(indexed) | set(skipped)
    scope = known if considered is None else known & considered
    p.remove = sorted(path for path in scope if path not in wanted)
    p.removed_indexed = sum(1 for path in p.remove if path in indexed) + sum(1 for s in p.skip if s[0] in indexed)
    return p


def sync(
    paths: RepoPaths, *, full: bool = False, files: list[str] | None = None, progress: Progress | None = None,
    on_wait: Callable[[], None] | None = None, lock: bool = True,
) -> SyncReport:
    """Bring this worktree's index up to date.

    ``files``: only these paths (relative to the top of the worktree) changed
    (the post-commit trigger); the whole tree is walked anyway when the index
    is new, was built with another ``knowledge.yaml``, or the list is long.
    ``lock=False``: the caller already holds the knowledge lock.
    """
    toplevel = paths.require_worktree()
    cfg = config.load(toplevel)
    emb, untrusted = config.trusted_embeddings(paths.common_dir, toplevel)  # an endpoint only once trusted
    if not lock:
        return _told(_sync(paths, toplevel, cfg, emb, full, files, progress), untrusted)
    with contextlib.ExitStack() as stack:
        held = locks.try_hold(trigger.lock_path(paths.git_dir))
        if held is None:
            if on_wait:
                on_wait()
            held = locks.hold(trigger.lock_path(paths.git_dir), timeout=LOCK_WAIT, what="another knowledge sync")
            held.__enter__()
        stack.callback(held.__exit__, None, None, None)
        covered = trigger.queued(paths.git_dir)  # queued before this walk: it covers them
        report = _told(_sync(paths, toplevel, cfg, emb, full, files, progress), untrusted)
        if report.scope == "all":
            trigger.clear_pending(covered)
    if trigger.queued(paths.git_dir) and trigger.enabled(toplevel, paths.common_dir):
        trigger.spawn(toplevel, paths.git_dir, paths.common_dir)  # queued while we held the lock
    return report


def _told(report: SyncReport, line: str | None) -> SyncReport:
    if line:
        report.warnings.insert(0, line)
    return report


def _sync(paths, toplevel, cfg, emb, full, files, progress) -> SyncReport:
    started = time.perf_counter()
    report = SyncReport(full=full, config=config.FILE if cfg.exists else "defaults (no knowledge.yaml: every tracked text file)")
    index = open_index(paths)
    try:
        report.rebuilt = index.rebuilt
        meta = index.meta()
        whole = (
            files is None or full or index.rebuilt or len(files) > MAX_LISTED
            or meta.get("config") != cfg.digest or "synced_all" not in meta
        )
        report.scope = "all" if whole else "files"
        listed = list_files(toplevel, None if whole else files)
        # a full sync starts from an empty index, so every skip is recorded anew
        p = plan(toplevel, cfg, index.files(), {} if full else index.skipped(), listed, None if whole else set(files), full=full)
        report.unchanged, report.skipped = p.unchanged, dict(p.skipped)
        report.removed = p.removed_indexed
        with index.write() as conn:
            if full:
                index.clear(conn)
            for path in p.remove:
                index.remove_file(conn, path)
            for path, reason, size, mtime_ns in p.skip:
                index.skip_file(conn, path, reason, size, mtime_ns)
        if full:
            index.sweep(_live_view)  # what only this worktree held is chunked afresh
        read_and_index(index, toplevel, p.read, report, full, progress)
        if p.remove or p.skip or report.changed or report.removed:
            index.sweep(_live_view)
        head = refs.verify(toplevel, "HEAD") or ""
        now = time.time()
        with index.write() as conn:
            values = {"config": cfg.digest, "synced": now, "head": head}
            if whole:
                values["synced_all"] = now
            index.set_meta(conn, values)
        report.files, report.chunks = index.counts()
        if emb is not None:
            report.embeddings = embed_missing(index, cache_path(paths.common_dir), emb, report, progress)
    finally:
        index.close()
    try:
        registry.register(paths)
    except (OSError, NerveError) as exc:
        report.warnings.append(f"could not record this worktree in the registry used by -g: {getattr(exc, 'message', exc)}")
    report.seconds = time.perf_counter() - started
    return report


def _live_view(view: str) -> bool:
    """Whether the worktree of a view still exists (its git dir does); a view of a removed worktree is dropped."""
    return os.path.isdir(view)


def embed_missing(index: Index, cache_file: Path, emb: config.EmbeddingsConfig, report: SyncReport, progress: Progress | None) -> dict:
    """Fetch vectors for the chunk texts the shared cache lacks under the configured model."""
    from .embeddings import (  # urllib: loaded only when embeddings are configured
        EmbeddingClient,
        EmbeddingError,
    )

    result = {**emb.as_dict(), "embedded": 0, "missing": 0, "error": None}
    with EmbeddingCache(cache_file) as cache:
        todo = sorted(index.chunk_hashes() - cache.known(emb.model))
        client = EmbeddingClient(emb)
        for start in range(0, len(todo), emb.batch_size):
            batch = todo[start:start + emb.batch_size]
            texts = index.texts(batch)
            batch = [h for h in batch if h in texts]
            try:
                vectors = client.embed([texts[h] for h in batch])
            except EmbeddingError as exc:
                result["error"] = exc.message
                break
            cache.put(emb.model, [(h, len(v), pack(v)) for h, v in zip(batch, vectors)])
            result["embedded"] += len(batch)
            if progress:
                progress("embedding", min(start + len(batch), len(todo)), len(todo))
        result["missing"] = len(todo) - result["embedded"]
    if result["error"]:
        report.warnings.append(
            f"embeddings: {result['error']}; {result['missing']} chunk texts have no embedding yet "
            "(queries rank them by full text only until a sync reaches the endpoint)"
        )
    return result
