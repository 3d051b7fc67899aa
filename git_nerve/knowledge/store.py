"""The knowledge databases (stdlib sqlite3; separate from the bus, so their SQL lives here).

* :class:`Index`: ``<git-dir>/nerve/knowledge.db``, one per worktree: the
  files indexed (content hash and stat), the files skipped and why, the
  chunks, and an FTS5 table over them (BM25 ranking, Porter stemming, with
  identifier parts appended by :func:`~git_nerve.knowledge.terms.index_text`).
* :class:`EmbeddingCache`: ``<git-common-dir>/nerve/embeddings.db``, shared by
  every worktree: one float32 vector per (model, sha256 of the chunk text),
  so no text is embedded twice.

Both are caches: an index whose format is older than this code is dropped
and rebuilt by the next sync. Connections run in autocommit mode; writes go
through :meth:`Index.write` (``BEGIN IMMEDIATE``), WAL lets queries read
while a sync writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..bus.connection import make_private_dir
from ..errors import DatabaseError
from ..paths import ensure_local_filesystem
from .chunking import Chunk
from .terms import index_text

INDEX_FILE = "knowledge.db"
CACHE_FILE = "embeddings.db"
#: Bump when the schema, the chunking or the indexed text changes: older indexes are rebuilt.
INDEX_VERSION = 2
BUSY_TIMEOUT_S = 30.0
#: bm25() weights of the FTS columns: path, title (heading path / qualified name), symbol (the definition's
#: own name, split into words), doc (docstring or comment above it), body.
WEIGHTS = (2.0, 4.0, 4.0, 2.0, 1.0)

_INDEX_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(path TEXT PRIMARY KEY, hash TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                   chunks INTEGER NOT NULL);
CREATE TABLE skipped(path TEXT PRIMARY KEY, reason TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL);
CREATE TABLE chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
                    title TEXT NOT NULL, text TEXT NOT NULL, hash TEXT NOT NULL);
CREATE INDEX chunks_path ON chunks(path);
CREATE INDEX chunks_hash ON chunks(hash);
CREATE VIRTUAL TABLE chunks_fts USING fts5(path, title, symbol, doc, body, tokenize = 'porter unicode61 remove_diacritics 2');
"""

_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings(model TEXT NOT NULL, hash TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,
                                      PRIMARY KEY(model, hash)) WITHOUT ROWID;
"""


def text_hash(text: str) -> str:
    """The key of a chunk in the embedding cache."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class FileRow:
    hash: str
    size: int
    mtime_ns: int
    chunks: int


@dataclass(frozen=True)
class SkipRow:
    reason: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class ChunkRow:
    id: int
    path: str
    start_line: int
    end_line: int
    title: str
    text: str
    hash: str


def _connect(path: Path) -> sqlite3.Connection:
    make_private_dir(path.parent)
    ensure_local_filesystem(path.parent)
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error as exc:
        raise DatabaseError(f"cannot open {path} ({exc}); it is only a cache: delete it and sync again") from exc
    return conn


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class Index:
    """One worktree's ``knowledge.db``."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise DatabaseError(f"no knowledge index at {self.path}")
        self.conn = _connect(self.path)
        #: True when an index of an older format was dropped on opening
        self.rebuilt = False
        try:
            if self.conn.execute("PRAGMA user_version").fetchone()[0] != INDEX_VERSION:
                self._create()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise DatabaseError(f"the knowledge index {self.path} is unreadable ({exc}); delete it and sync again") from exc

    def _create(self) -> None:
        with _transaction(self.conn) as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]  # again, under the write lock
            if version == INDEX_VERSION:
                return
            if version != 0:
                names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table') AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'chunks_fts_%'")]
                for name in names:
                    conn.execute(f'DROP TABLE IF EXISTS "{name}"')
                self.rebuilt = True
            for statement in _INDEX_SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={INDEX_VERSION}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def write(self):
        """A ``BEGIN IMMEDIATE`` transaction for the ``with`` block."""
        return _transaction(self.conn)

    # -- meta ------------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def set_meta(self, conn: sqlite3.Connection, values: dict[str, object]) -> None:
        conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", [(k, str(v)) for k, v in values.items()])

    # -- files -----------------------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        return {r[0]: FileRow(*r[1:]) for r in self.conn.execute("SELECT path, hash, size, mtime_ns, chunks FROM files")}

    def skipped(self) -> dict[str, SkipRow]:
        return {r[0]: SkipRow(*r[1:]) for r in self.conn.execute("SELECT path, reason, size, mtime_ns FROM skipped")}

    def put_file(self, conn: sqlite3.Connection, path: str, digest: str, size: int, mtime_ns: int, chunks: Sequence[Chunk]) -> None:
        """Replace everything indexed for ``path`` by ``chunks``."""
        self._drop_chunks(conn, path)
        conn.execute("DELETE FROM skipped WHERE path = ?", (path,))
        for c in chunks:
            cur = conn.execute(
                "INSERT INTO chunks(path, start_line, end_line, title, text, hash) VALUES (?, ?, ?, ?, ?, ?)",
                (path, c.start_line, c.end_line, c.title, c.text, text_hash(c.text)),
            )
            conn.execute(
                "INSERT INTO chunks_fts(rowid, path, title, symbol, doc, body) VALUES (?, ?, ?, ?, ?, ?)",
                (cur.lastrowid, index_text(path), index_text(c.title), index_text(c.symbol), c.doc, index_text(c.text)),
            )
        conn.execute(
            "INSERT OR REPLACE INTO files(path, hash, size, mtime_ns, chunks) VALUES (?, ?, ?, ?, ?)",
            (path, digest, size, mtime_ns, len(chunks)),
        )

    def touch_file(self, conn: sqlite3.Connection, path: str, size: int, mtime_ns: int) -> None:
        """Same content, new stat (the file was rewritten or touched)."""
        conn.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))

    def remove_file(self, conn: sqlite3.Connection, path: str) -> None:
        self._drop_chunks(conn, path)
        conn.execute("DELETE FROM files WHERE path = ?", (path,))
        conn.execute("DELETE FROM skipped WHERE path = ?", (path,))

    def skip_file(self, conn: sqlite3.Connection, path: str, reason: str, size: int, mtime_ns: int) -> None:
        self._drop_chunks(conn, path)
        conn.execute("DELETE FROM files WHERE path = ?", (path,))
        conn.execute("INSERT OR REPLACE INTO skipped(path, reason, size, mtime_ns) VALUES (?, ?, ?, ?)", (path, reason, size, mtime_ns))

    def _drop_chunks(self, conn: sqlite3.Connection, path: str) -> None:
        # by rowid, one at a time: FTS5 would scan its whole table for `rowid IN (subquery)`
        ids = conn.execute("SELECT id FROM chunks WHERE path = ?", (path,)).fetchall()
        if ids:
            conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ids)
            conn.execute("DELETE FROM chunks WHERE path = ?", (path,))

    def clear(self, conn: sqlite3.Connection) -> None:
        """Forget every file (a full rebuild follows)."""
        # dropping the FTS table is far cheaper than deleting its rows one by one
        conn.execute("DROP TABLE chunks_fts")
        conn.execute(next(s for s in _INDEX_SCHEMA.split(";") if "chunks_fts USING" in s))
        for table in ("chunks", "files", "skipped"):
            conn.execute(f"DELETE FROM {table}")

    # -- reading ---------------------------------------------------------------------------------
    def counts(self) -> tuple[int, int]:
        """(files, chunks) indexed."""
        files = self.conn.execute("SELECT count(*) FROM files").fetchone()[0]
        chunks = self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return files, chunks

    def skip_counts(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT reason, count(*) FROM skipped GROUP BY reason"))

    def search(self, match: str, limit: int) -> list[tuple[int, float]]:
        """(chunk id, bm25) of the best chunks for an FTS5 MATCH expression; lower bm25 is better."""
        w = ", ".join(str(x) for x in WEIGHTS)
        return self.conn.execute(
            f"SELECT rowid, bm25(chunks_fts, {w}) AS rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, limit),
        ).fetchall()

    def paths(self, ids: Sequence[int]) -> dict[int, str]:
        """The path of each chunk id."""
        out: dict[int, str] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start:start + 500])
            out.update(self.conn.execute(f"SELECT id, path FROM chunks WHERE id IN ({','.join('?' * len(part))})", part))
        return out

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        ids = list(ids)
        rows: dict[int, ChunkRow] = {}
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ",".join("?" * len(part))
            for r in self.conn.execute(f"SELECT id, path, start_line, end_line, title, text, hash FROM chunks WHERE id IN ({marks})", part):
                rows[r[0]] = ChunkRow(*r)
        return rows

    def chunk_hashes(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT DISTINCT hash FROM chunks")}

    def texts(self, hashes: Sequence[str]) -> dict[str, str]:
        """One chunk text for each of ``hashes``."""
        out: dict[str, str] = {}
        for start in range(0, len(hashes), 500):
            part = list(hashes[start:start + 500])
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(f"SELECT hash, min(text) FROM chunks WHERE hash IN ({marks}) GROUP BY hash", part))
        return out

    def vectors(self, cache_path: Path, model: str) -> list[tuple[int, bytes]]:
        """(chunk id, vector blob) of every chunk the cache holds a vector for under ``model``."""
        if not cache_path.is_file():
            return []
        self.conn.execute("ATTACH DATABASE ? AS cache", (str(cache_path),))
        try:
            return self.conn.execute(
                "SELECT c.id, e.vector FROM chunks c JOIN cache.embeddings e ON e.model = ? AND e.hash = c.hash", (model,)
            ).fetchall()
        finally:
            self.conn.execute("DETACH DATABASE cache")

    def embedded_count(self, cache_path: Path, model: str) -> int:
        """How many chunks have a vector under ``model``."""
        if not cache_path.is_file():
            return 0
        self.conn.execute("ATTACH DATABASE ? AS cache", (str(cache_path),))
        try:
            return self.conn.execute(
                "SELECT count(*) FROM chunks c WHERE EXISTS (SELECT 1 FROM cache.embeddings e WHERE e.model = ? AND e.hash = c.hash)",
                (model,),
            ).fetchone()[0]
        finally:
            self.conn.execute("DETACH DATABASE cache")


class EmbeddingCache:
    """``<git-common-dir>/nerve/embeddings.db``: vectors keyed by (model, chunk text hash)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.conn = _connect(self.path)
        try:
            self.conn.execute(_CACHE_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise DatabaseError(f"the embedding cache {self.path} is unreadable ({exc}); delete it and sync again") from exc

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def known(self, model: str) -> set[str]:
        """The text hashes that have a vector under ``model``."""
        return {r[0] for r in self.conn.execute("SELECT hash FROM embeddings WHERE model = ?", (model,))}

    def put(self, model: str, items: Iterable[tuple[str, int, bytes]]) -> None:
        """Store (hash, dimensions, blob) triples."""
        with _transaction(self.conn) as conn:
            conn.executemany("INSERT OR REPLACE INTO embeddings(model, hash, dim, vector) VALUES (?, ?, ?, ?)",
                             [(model, h, d, b) for h, d, b in items])


def index_path(git_dir: Path) -> Path:
    return Path(git_dir) / "nerve" / INDEX_FILE


def cache_path(common_dir: Path) -> Path:
    return Path(common_dir) / "nerve" / CACHE_FILE
