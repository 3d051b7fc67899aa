"""The knowledge databases (stdlib sqlite3; separate from the bus, so their SQL lives here).

* :class:`Index`: ``<git-common-dir>/nerve/knowledge.db``, one content-addressed store per repository,
  shared by its worktrees. A *document* is one file's content at one path, keyed by (path, git blob id of
  the content): its chunks and their FTS5 rows (BM25 over path, qualified name, symbol, docstring and
  body; Porter stemming; identifier parts appended by :func:`~git_nerve.knowledge.terms.index_text`) are
  stored once however many worktrees hold that content. Each worktree keeps only its *view* (path ->
  document, with the stat that lets a sync skip unchanged files) and its skip list, so searches stay
  branch-aware: a query joins the matches with the asking worktree's view. Documents no view holds any
  more are swept after a sync (and the file vacuumed when a good part of it is free), as are the views
  of worktrees whose git dir is gone.
* :class:`EmbeddingCache`: ``<git-common-dir>/nerve/embeddings.db``, shared by
  every worktree: one float32 vector per (model, sha256 of the chunk text),
  so no text is embedded twice.

Both are caches: a store whose format is older than this code is dropped
and rebuilt by the next sync (per-worktree indexes of older versions, in
``<git-dir>/nerve/knowledge.db``, are no longer read). Connections run in autocommit mode; writes go
through :meth:`Index.write` (``BEGIN IMMEDIATE``), WAL lets queries read
while a sync writes.

Size: every SQL statement of both knowledge databases lives here (the one module allowed sqlite3 outside
bus/), so it is as long as their reading, writing and reclaiming together.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from collections import namedtuple

from ..errors import DatabaseError
from ..paths import create_file, ensure_local_filesystem, make_dirs
from .terms import index_text

TYPE_CHECKING = False  # a query (an agent's hot path) imports this module: typing's names for readers only
if TYPE_CHECKING:
    from .chunking import Chunk

INDEX_FILE = "knowledge.db"
CACHE_FILE = "embeddings.db"
#: Bump when the schema, the chunking or the indexed text changes: older stores are rebuilt.
INDEX_VERSION = 3
BUSY_TIMEOUT_S = 30.0
#: FTS5's automerge while a sync writes many files (its default: 4)
BULK_AUTOMERGE = 16
#: SQLite page cache per connection, KiB (its default, 2 MiB, makes a first sync of thousands of files thrash)
CACHE_KIB = 65536
#: bm25() weights of the FTS columns: path, title (heading path / qualified name), symbol (the definition's
#: own name, split into words), doc (docstring or comment above it), body.
WEIGHTS = (2.0, 4.0, 4.0, 1.0, 1.0)
#: VACUUM after a sweep when at least this share of the file's pages is free (and a megabyte or more).
VACUUM_FREE_SHARE = 0.25

_INDEX_SCHEMA = """
CREATE TABLE meta(view TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY(view, key)) WITHOUT ROWID;
CREATE TABLE docs(id INTEGER PRIMARY KEY, path TEXT NOT NULL, blob TEXT NOT NULL, chunks INTEGER NOT NULL, UNIQUE(path, blob));
CREATE TABLE views(view TEXT NOT NULL, path TEXT NOT NULL, doc INTEGER NOT NULL, size INTEGER NOT NULL,
                   mtime_ns INTEGER NOT NULL, PRIMARY KEY(view, path)) WITHOUT ROWID;
CREATE INDEX views_doc ON views(doc, view);
CREATE TABLE skipped(view TEXT NOT NULL, path TEXT NOT NULL, reason TEXT NOT NULL, size INTEGER NOT NULL,
                     mtime_ns INTEGER NOT NULL, PRIMARY KEY(view, path)) WITHOUT ROWID;
CREATE TABLE chunks(id INTEGER PRIMARY KEY, doc INTEGER NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
                    title TEXT NOT NULL, text TEXT NOT NULL, hash TEXT NOT NULL);
CREATE INDEX chunks_doc ON chunks(doc);
CREATE INDEX chunks_hash ON chunks(hash);
CREATE VIRTUAL TABLE chunks_fts USING fts5(path, title, symbol, doc, body, tokenize = 'porter unicode61 remove_diacritics 2');
"""

_CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings(model TEXT NOT NULL, hash TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,
                                      PRIMARY KEY(model, hash)) WITHOUT ROWID;
"""

def text_hash(text: str) -> str:
    """The key of a chunk in the embedding cache."""
    import hashlib  # here: a query needs no hashing (start-up)

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


#: A file's chunks as the store writes them (:func:`prepare`; pure, so a process pool can make them): ``fts_path``,
#: and ``chunks``: (start_line, end_line, title, text, hash, FTS title, FTS symbol, FTS doc, FTS body) per chunk
Prepared = namedtuple("Prepared", "fts_path chunks")


def prepare(path: str, chunks: Sequence[Chunk]) -> Prepared:
    """The rows of ``chunks``: the stored text with its hash, and the words FTS5 indexes (:func:`index_text`)."""
    return Prepared(index_text(path), [
        (c.start_line, c.end_line, c.title, c.text, text_hash(c.text), index_text(c.title), index_text(c.symbol), c.doc,
         index_text(c.text)) for c in chunks
    ])


# named tuples, no dataclasses: a query (an agent's hot path) imports this module
FileRow = namedtuple("FileRow", "hash size mtime_ns chunks")
SkipRow = namedtuple("SkipRow", "reason size mtime_ns")
ChunkRow = namedtuple("ChunkRow", "id path start_line end_line title text hash")


def _connect(path: Path) -> sqlite3.Connection:
    try:  # mkdir -p honouring the umask, as the bus makes its own (whose package a query does not load)
        make_dirs(path.parent)
    except OSError as exc:
        raise DatabaseError(f"cannot create {path.parent}: {exc.strerror or exc}") from exc
    ensure_local_filesystem(path.parent)
    try:  # created 0600 here (SQLite would use 0644 minus the umask); its WAL takes the same mode
        if not os.path.lexists(path):
            os.close(create_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        pass
    except OSError as exc:
        raise DatabaseError(f"cannot create {path}: {exc.strerror or exc}") from exc
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")  # a cap, grown only as pages are read: bulk writes keep their b-trees in memory
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


class _Open:
    """A store file held open (``conn``) until :meth:`close` or the end of a ``with`` block."""

    conn: sqlite3.Connection

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):  # the Index or EmbeddingCache itself
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Index(_Open):
    """The repository's store, seen through one worktree's view (``view``: that worktree's git dir)."""

    def __init__(self, path: str | os.PathLike[str], view: str, *, create: bool = True):
        self.path = Path(path)
        self.view = view
        if not create and not self.path.is_file():
            raise DatabaseError(f"no knowledge index at {self.path}")
        self.conn = _connect(self.path)
        #: True when a store of an older format was dropped on opening
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

    def write(self):
        """A ``BEGIN IMMEDIATE`` transaction for the ``with`` block."""
        return _transaction(self.conn)

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Many files written (a first sync): FTS5 merges its segments less eagerly meanwhile (measured on
        Django: a tenth less CPU, queries as fast), then goes back to its default."""
        self.conn.execute(f"INSERT INTO chunks_fts(chunks_fts, rank) VALUES('automerge', {BULK_AUTOMERGE})")
        try:
            yield
        finally:
            self.conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES('automerge', 4)")

    # -- meta ------------------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta WHERE view = ?", (self.view,)))

    def set_meta(self, conn: sqlite3.Connection, values: dict[str, object]) -> None:
        conn.executemany("INSERT OR REPLACE INTO meta(view, key, value) VALUES (?, ?, ?)",
                         [(self.view, k, str(v)) for k, v in values.items()])

    # -- this worktree's view --------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        return {r[0]: FileRow(*r[1:]) for r in self.conn.execute(
            "SELECT v.path, d.blob, v.size, v.mtime_ns, d.chunks FROM views v JOIN docs d ON d.id = v.doc WHERE v.view = ?",
            (self.view,))}

    def skipped(self) -> dict[str, SkipRow]:
        return {r[0]: SkipRow(*r[1:]) for r in self.conn.execute(
            "SELECT path, reason, size, mtime_ns FROM skipped WHERE view = ?", (self.view,))}

    def has_doc(self, path: str, blob: str) -> bool:
        """Whether the store holds the chunks of this content at this path already (another worktree's, say)."""
        return self.conn.execute("SELECT 1 FROM docs WHERE path = ? AND blob = ?", (path, blob)).fetchone() is not None

    def put_file(self, conn: sqlite3.Connection, path: str, blob: str, size: int, mtime_ns: int,
                 chunks: Prepared | Sequence[Chunk] | Callable[[], Prepared | Sequence[Chunk]]) -> int | None:
        """Point the view's ``path`` at the document (path, ``blob``), stored from ``chunks`` unless the store
        holds it already (``chunks`` may be :func:`prepare`'s rows, or a function, called only then: another
        worktree's sweep may have reclaimed the document since :meth:`has_doc`). The number of chunks
        written, None if none were. Inside the caller's write transaction (the chunk ids are numbered here)."""
        row = conn.execute("SELECT id FROM docs WHERE path = ? AND blob = ?", (path, blob)).fetchone()
        written = None
        if row is None:
            if callable(chunks):
                chunks = chunks()
            rows = chunks if isinstance(chunks, Prepared) else prepare(path, chunks)
            written = len(rows.chunks)
            doc = conn.execute("INSERT INTO docs(path, blob, chunks) VALUES (?, ?, ?)", (path, blob, written)).lastrowid
            first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0]
            conn.executemany("INSERT INTO chunks(id, doc, start_line, end_line, title, text, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(first + i, doc, *c[:5]) for i, c in enumerate(rows.chunks)])
            conn.executemany("INSERT INTO chunks_fts(rowid, path, title, symbol, doc, body) VALUES (?, ?, ?, ?, ?, ?)",
                             [(first + i, rows.fts_path, *c[5:]) for i, c in enumerate(rows.chunks)])
        else:
            doc = row[0]
        conn.execute("DELETE FROM skipped WHERE view = ? AND path = ?", (self.view, path))
        conn.execute("INSERT OR REPLACE INTO views(view, path, doc, size, mtime_ns) VALUES (?, ?, ?, ?, ?)",
                     (self.view, path, doc, size, mtime_ns))
        return written

    def touch_file(self, conn: sqlite3.Connection, path: str, size: int, mtime_ns: int) -> None:
        """Same content, new stat (the file was rewritten or touched)."""
        conn.execute("UPDATE views SET size = ?, mtime_ns = ? WHERE view = ? AND path = ?", (size, mtime_ns, self.view, path))

    def remove_file(self, conn: sqlite3.Connection, path: str) -> None:
        conn.execute("DELETE FROM views WHERE view = ? AND path = ?", (self.view, path))
        conn.execute("DELETE FROM skipped WHERE view = ? AND path = ?", (self.view, path))

    def skip_file(self, conn: sqlite3.Connection, path: str, reason: str, size: int, mtime_ns: int) -> None:
        conn.execute("DELETE FROM views WHERE view = ? AND path = ?", (self.view, path))
        conn.execute("INSERT OR REPLACE INTO skipped(view, path, reason, size, mtime_ns) VALUES (?, ?, ?, ?, ?)",
                     (self.view, path, reason, size, mtime_ns))

    def clear(self, conn: sqlite3.Connection) -> None:
        """Forget this view (a full rebuild follows; :meth:`sweep` drops what no other view holds)."""
        for table in ("views", "skipped"):
            conn.execute(f"DELETE FROM {table} WHERE view = ?", (self.view,))

    # -- reclaiming ------------------------------------------------------------------------------
    def sweep(self, live_view: Callable[[str], bool]) -> int:
        """Drop the views of worktrees ``live_view`` says are gone, then the documents no view holds; VACUUM
        when much of the file is free. The number of documents dropped."""
        with self.write() as conn:
            for (view,) in conn.execute("SELECT DISTINCT view FROM views UNION SELECT DISTINCT view FROM skipped").fetchall():
                if view != self.view and not live_view(view):
                    for table in ("views", "skipped", "meta"):
                        conn.execute(f"DELETE FROM {table} WHERE view = ?", (view,))
            dead = conn.execute("SELECT id FROM docs d WHERE NOT EXISTS (SELECT 1 FROM views v WHERE v.doc = d.id)").fetchall()
            for (doc,) in dead:
                ids = conn.execute("SELECT id FROM chunks WHERE doc = ?", (doc,)).fetchall()
                conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", ids)  # by rowid: FTS5 scans for IN
                conn.execute("DELETE FROM chunks WHERE doc = ?", (doc,))
                conn.execute("DELETE FROM docs WHERE id = ?", (doc,))
        if dead:
            pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
            free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = self.conn.execute("PRAGMA page_size").fetchone()[0]
            if free * size >= 1 << 20 and free >= VACUUM_FREE_SHARE * pages:
                with contextlib.suppress(sqlite3.OperationalError):  # busy (another worktree's sync): next time
                    self.conn.execute("VACUUM")
        return len(dead)

    # -- reading ---------------------------------------------------------------------------------
    def counts(self) -> tuple[int, int]:
        """(files, chunks) in this view."""
        row = self.conn.execute(
            "SELECT count(*), coalesce(sum(d.chunks), 0) FROM views v JOIN docs d ON d.id = v.doc WHERE v.view = ?", (self.view,)
        ).fetchone()
        return row[0], row[1]

    def skip_counts(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT reason, count(*) FROM skipped WHERE view = ? GROUP BY reason", (self.view,)))

    def search(self, match: str, limit: int) -> list[tuple[int, float, str]]:
        """(chunk id, bm25, path) of this view's best chunks for an FTS5 MATCH expression; lower bm25 is better."""
        w = ", ".join(str(x) for x in WEIGHTS)
        return self.conn.execute(
            f"SELECT f.rowid, bm25(chunks_fts, {w}) AS rank, d.path FROM chunks_fts f JOIN chunks c ON c.id = f.rowid "
            "JOIN docs d ON d.id = c.doc JOIN views v ON v.doc = c.doc AND v.view = ? "
            "WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (self.view, match, limit),
        ).fetchall()

    def paths(self, ids: Sequence[int]) -> dict[int, str]:
        """The path of each chunk id."""
        out: dict[int, str] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start:start + 500])
            out.update(self.conn.execute(
                f"SELECT c.id, d.path FROM chunks c JOIN docs d ON d.id = c.doc WHERE c.id IN ({','.join('?' * len(part))})", part))
        return out

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        ids = list(ids)
        rows: dict[int, ChunkRow] = {}
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ",".join("?" * len(part))
            for r in self.conn.execute(
                f"SELECT c.id, d.path, c.start_line, c.end_line, c.title, c.text, c.hash FROM chunks c JOIN docs d ON d.id = c.doc "
                f"WHERE c.id IN ({marks})", part,
            ):
                rows[r[0]] = ChunkRow(*r)
        return rows

    def chunk_hashes(self) -> set[str]:
        return {r[0] for r in self.conn.execute(
            "SELECT DISTINCT c.hash FROM views v JOIN chunks c ON c.doc = v.doc WHERE v.view = ?", (self.view,))}

    def texts(self, hashes: Sequence[str]) -> dict[str, str]:
        """One chunk text for each of ``hashes``."""
        out: dict[str, str] = {}
        for start in range(0, len(hashes), 500):
            part = list(hashes[start:start + 500])
            marks = ",".join("?" * len(part))
            out.update(self.conn.execute(f"SELECT hash, min(text) FROM chunks WHERE hash IN ({marks}) GROUP BY hash", part))
        return out

    def vectors(self, cache_path: Path, model: str) -> list[tuple[int, bytes]]:
        """(chunk id, vector blob) of every chunk of this view the cache holds a vector for under ``model``."""
        if not cache_path.is_file():
            return []
        self.conn.execute("ATTACH DATABASE ? AS cache", (str(cache_path),))
        try:
            return self.conn.execute(
                "SELECT c.id, e.vector FROM views v JOIN chunks c ON c.doc = v.doc "
                "JOIN cache.embeddings e ON e.model = ? AND e.hash = c.hash WHERE v.view = ?", (model, self.view)
            ).fetchall()
        finally:
            self.conn.execute("DETACH DATABASE cache")

    def embedded_count(self, cache_path: Path, model: str) -> int:
        """How many chunks of this view have a vector under ``model``."""
        if not cache_path.is_file():
            return 0
        self.conn.execute("ATTACH DATABASE ? AS cache", (str(cache_path),))
        try:
            return self.conn.execute(
                "SELECT count(*) FROM views v JOIN chunks c ON c.doc = v.doc WHERE v.view = ? AND "
                "EXISTS (SELECT 1 FROM cache.embeddings e WHERE e.model = ? AND e.hash = c.hash)",
                (self.view, model),
            ).fetchone()[0]
        finally:
            self.conn.execute("DETACH DATABASE cache")


class EmbeddingCache(_Open):
    """``<git-common-dir>/nerve/embeddings.db``: vectors keyed by (model, chunk text hash)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.conn = _connect(self.path)
        try:
            self.conn.execute(_CACHE_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise DatabaseError(f"the embedding cache {self.path} is unreadable ({exc}); delete it and sync again") from exc

    def known(self, model: str) -> set[str]:
        """The text hashes that have a vector under ``model``."""
        return {r[0] for r in self.conn.execute("SELECT hash FROM embeddings WHERE model = ?", (model,))}

    def put(self, model: str, items: Iterable[tuple[str, int, bytes]]) -> None:
        """Store (hash, dimensions, blob) triples."""
        with _transaction(self.conn) as conn:
            conn.executemany("INSERT OR REPLACE INTO embeddings(model, hash, dim, vector) VALUES (?, ?, ?, ?)",
                             [(model, h, d, b) for h, d, b in items])


def index_path(common_dir: Path) -> Path:
    """The repository's store (one for all its worktrees)."""
    return Path(common_dir) / "nerve" / INDEX_FILE


def view_of(git_dir: Path) -> str:
    """The name of a worktree's view in the store: its git dir."""
    return os.path.realpath(git_dir)


def open_index(paths, *, create: bool = True) -> Index:
    """The store of ``paths``' repository, seen through its worktree's view."""
    return Index(index_path(paths.common_dir), view_of(paths.git_dir), create=create)


def blob_id(data: bytes) -> str:
    """Git's blob id of ``data`` (SHA-1 of ``blob <size>\\0`` + the bytes): the key of a file's content."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def cache_path(common_dir: Path) -> Path:
    return Path(common_dir) / "nerve" / CACHE_FILE
