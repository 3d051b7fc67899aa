"""Searching the index: full text (FTS5, BM25), fused with embeddings when they are configured.

Full text always runs. When ``nerve.toml`` configures embeddings and the
shared cache holds vectors for this index's chunks, the query is embedded,
compared by cosine with every stored vector in memory, and both lists are
fused by reciprocal rank fusion; the result says which ranking it used. An
endpoint that fails is a warning and the full-text ranking, never an error.

``-g`` (:func:`search_everywhere`) runs the same search in every worktree of
the registry and merges the lists: by score when every index ranked the same
way, else by reciprocal rank fusion of the per-index lists.
"""

from __future__ import annotations

from collections.abc import Callable
from collections import namedtuple
from pathlib import Path
TYPE_CHECKING = False  # a query is an agent's hot path: typing's names for readers only

from .. import nerve_toml
from ..errors import NerveError, UsageError
from ..paths import RepoPaths
from . import prior, terms
from .ranking import nearest, rrf
from .store import cache_path, index_path, open_index

if TYPE_CHECKING:
    from .config import EmbeddingsConfig

#: How many candidates each ranking contributes before fusion.
CANDIDATES = 100

FULL_TEXT = "full-text"
FUSION = "fusion"
#: The rankings a caller may ask for (bench/knowledge_questions.py compares them): "auto" fuses what is there.
MODES = ("full-text", "embeddings", "auto")
MIXED = "mixed"
DESCRIPTIONS = {
    FULL_TEXT: "full text (SQLite FTS5, BM25)",
    FUSION: "full text + embeddings (reciprocal rank fusion)",
    MIXED: "per repository: full text, or full text + embeddings; merged by reciprocal rank fusion",
    "embeddings": "embeddings alone (cosine similarity)",
}


class Hit(namedtuple("Hit", "repo path start_line end_line score title snippet text hash common_dir")):
    """One chunk found: ``repo`` is the worktree's top directory. (Named tuples, no dataclasses: a query is an
    agent's hot path, and `git nerve thread`'s hints run one.)"""

    __slots__ = ()

    def as_dict(self) -> dict:
        return {
            "repo": self.repo, "path": self.path, "start_line": self.start_line, "end_line": self.end_line,
            "score": round(self.score, 6), "title": self.title, "snippet": self.snippet, "text": self.text,
        }


class QueryResult:
    """A query's answer: its hits, the ranking used, warnings (why it may be stale or partial), the repositories."""

    __slots__ = ("query", "ranking", "hits", "warnings", "repos")

    def __init__(self, query: str, ranking: str, hits: list[Hit] | None = None, warnings: list[str] | None = None,
                 repos: list[str] | None = None):
        self.query, self.ranking = query, ranking
        self.hits, self.warnings, self.repos = list(hits or []), list(warnings or []), list(repos or [])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueryResult) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        return f"QueryResult({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"

    @property
    def ranking_description(self) -> str:
        return DESCRIPTIONS[self.ranking]

    def as_dict(self) -> dict:
        return {
            "query": self.query, "ranking": self.ranking, "ranking_description": self.ranking_description,
            "repos": self.repos, "results": [h.as_dict() for h in self.hits], "warnings": list(self.warnings),
        }


Embedder = Callable[["EmbeddingsConfig", str], list[float]]


def embedder() -> Embedder:
    """Embeds a query once per endpoint and model (a failure is remembered too)."""
    memo: dict[tuple, object] = {}

    def embed(cfg: EmbeddingsConfig, text: str) -> list[float]:
        from .embeddings import (  # urllib: loaded only when embeddings are used
            EmbeddingClient,
            EmbeddingError,
        )

        key = (cfg.endpoint, cfg.model, cfg.api_key_env, text)
        if key not in memo:
            try:
                memo[key] = EmbeddingClient(cfg).embed([text])[0]
            except EmbeddingError as exc:
                memo[key] = exc
        value = memo[key]
        if isinstance(value, EmbeddingError):
            raise value
        return value

    return embed


def _check(text: str, limit: int) -> str:
    if limit < 1:
        raise UsageError("--limit must be at least 1")
    match = terms.fts_query(text)
    if match is None:
        raise UsageError("the query has no words to search for")
    return match


def search(paths: RepoPaths, text: str, limit: int = 10, *, mode: str = "auto", wait: bool = True) -> QueryResult:
    """Search one worktree's index. ``mode``: one of :data:`MODES`. ``wait``: a view being made (a new task's)
    is waited for (:data:`FIRST_VIEW_WAIT`) rather than refused."""
    match = _check(text, limit)
    hits, ranking, warnings = _search_index(paths, text, match, limit, embedder(), mode, wait)
    return QueryResult(text, ranking, hits, warnings, [str(paths.toplevel)])


def search_everywhere(text: str, limit: int = 10) -> QueryResult:
    """Search every worktree this user has indexed."""
    from . import registry

    match = _check(text, limit)
    entries = registry.entries()
    if not entries:
        raise UsageError("no repository has been indexed yet; run `git nerve knowledge sync` in one")
    embed = embedder()
    lists: list[tuple[list[Hit], str]] = []
    warnings: list[str] = []
    for entry in entries:
        try:
            hits, ranking, warns = _search_index(entry.paths(), text, match, limit, embed)
        except NerveError as exc:
            warnings.append(f"{entry.toplevel}: skipped: {exc.message}")
            continue
        lists.append((hits, ranking))
        warnings.extend(f"{entry.toplevel}: {w}" for w in warns)
    rankings = {r for hits, r in lists if hits}
    seen: set[tuple] = set()
    unique: list[list[Hit]] = []
    for hits, _ in lists:
        kept = []
        for h in hits:
            key = (h.common_dir, h.path, h.start_line, h.end_line, h.hash)
            if key not in seen:  # two worktrees of one repository holding the same chunk
                seen.add(key)
                kept.append(h)
        unique.append(kept)
    if len(rankings) <= 1:
        ranking = rankings.pop() if rankings else FULL_TEXT
        merged = sorted((h for hits in unique for h in hits), key=lambda h: -h.score)
    else:
        ranking = MIXED
        by_key = {id(h): h for hits in unique for h in hits}
        fused = rrf([[id(h) for h in hits] for hits in unique])
        merged = []
        for key, score in fused:
            merged.append(by_key[key]._replace(score=score))
    return QueryResult(text, ranking, merged[:limit], warnings, [e.toplevel for e in entries])


def _search_index(paths: RepoPaths, text: str, match: str, limit: int, embed: Embedder, mode: str = "auto",
                  wait: bool = False) -> tuple[list[Hit], str, list[str]]:
    toplevel = paths.require_worktree()
    ipath = index_path(paths.common_dir)
    if not ipath.is_file() and not (wait and _first_view(paths, lambda: ipath.is_file())):
        raise UsageError(f"no knowledge index for {toplevel} yet; run `git nerve knowledge sync` there")
    emb, untrusted = _embeddings(paths.common_dir, toplevel)
    warnings: list[str] = [untrusted] if untrusted else []
    ranking = FULL_TEXT
    with open_index(paths, create=False) as index:
        if index.rebuilt:
            warnings.append("the index was built by another version of git-nerve and was cleared; run `git nerve knowledge sync`")
        elif "synced" not in index.meta() and not (wait and _first_view(paths, lambda: "synced" in index.meta())):
            raise UsageError(f"no knowledge index for {toplevel} yet; run `git nerve knowledge sync` there")
        warnings += freshness(paths, index.meta())
        found = index.search(match, max(limit, CANDIDATES))
        usage = prior.usage_question(text)
        scores = {cid: -bm25 * prior.factor(path, usage) for cid, bm25, path in found}
        order = sorted(scores, key=lambda cid: -scores[cid])
        if mode == "embeddings" and emb is None:
            raise UsageError("embeddings are not configured in nerve.toml ([knowledge.embeddings])")
        if emb is not None and mode != "full-text":
            cfile = cache_path(paths.common_dir)
            have = index.embedded_count(cfile, emb.model)
            total = index.counts()[1]
            if total and not have:
                warnings.append(
                    f"embeddings are configured (model {emb.model}) but no chunk has one yet; "
                    "run `git nerve knowledge sync`; full-text results only"
                )
            elif have:
                from .embeddings import EmbeddingError

                try:
                    vector = embed(emb, text)
                except EmbeddingError as exc:
                    warnings.append(f"embeddings unavailable ({exc.message}); full-text results only")
                else:
                    near = nearest(vector, index.vectors(cfile, emb.model), max(limit, CANDIDATES))
                    where = index.paths([cid for cid, _ in near])
                    near = sorted(((cid, sim * prior.factor(where.get(cid, ""), usage)) for cid, sim in near), key=lambda kv: -kv[1])
                    if mode == "embeddings":
                        order, scores, ranking = [cid for cid, _ in near], dict(near), "embeddings"
                    else:
                        fused = rrf([order, [cid for cid, _ in near]])
                        order, scores, ranking = [cid for cid, _ in fused], dict(fused), FUSION
                    if have < total:
                        warnings.append(f"embeddings cover {have} of {total} chunks; run `git nerve knowledge sync`")
        top = order[:limit]
        rows = index.chunks(top)
    wanted = terms.query_terms(text)
    hits = [
        Hit(str(toplevel), r.path, r.start_line, r.end_line, scores[cid], r.title, terms.snippet(r.text, wanted), r.text, r.hash,
            str(paths.common_dir))
        for cid in top
        if (r := rows.get(cid)) is not None
    ]
    return hits, ranking, warnings


#: seconds a query waits for the first sync of its worktree's view when one is queued or running (spawn starts it;
#: a whole-tree sync on a loaded machine took over 10 s in CI)
FIRST_VIEW_WAIT = 30.0


def _syncing(paths: RepoPaths) -> tuple[int, bool]:
    """(lists of changed files queued, a sync running) for this worktree's view (the background trigger's)."""
    from .. import locks
    from . import trigger

    return len(trigger.queued(paths.git_dir)), locks.is_held(trigger.lock_path(paths.git_dir))


def _first_view(paths: RepoPaths, ready) -> bool:
    """A worktree whose view is being made (a new task's: spawn queued its sync and started it): wait up to
    :data:`FIRST_VIEW_WAIT` seconds while that sync is queued or running, until ``ready()`` (the index file is
    there; the view is synced); True once it is."""
    import time

    deadline = time.monotonic() + FIRST_VIEW_WAIT
    while any(_syncing(paths)):
        if ready():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return ready()


def freshness(paths: RepoPaths, meta: dict[str, str]) -> list[str]:
    """Why this worktree's answer may be stale (issue 37): commits since its last sync, a refresh queued or running.
    Read from files only (HEAD from git's own files; the trigger's queue and lock): a query starts no git."""
    from ..dotgit import head as head_from_files

    queued, running = _syncing(paths)
    head = head_from_files(str(paths.git_dir), str(paths.common_dir))
    moved = head is not None and meta.get("head") not in (None, "", head)
    if not (moved or queued or running):
        return []
    if queued or running:
        return ["this worktree's index is being refreshed (a background sync " + ("runs" if running else "is queued")
                + "): results may not reflect the latest " + ("commit" if moved else "changes") + " yet"]
    return ["HEAD moved since this worktree's index was last synced: results may be stale; "
            "run `git nerve knowledge sync`"]


def _embeddings(common_dir, toplevel: Path) -> tuple[EmbeddingsConfig | None, str | None]:
    """nerve.toml's ``[knowledge.embeddings]`` once trusted (else None and the line saying so); without one, None
    without loading the TOML reader or the config module (start-up): a file that does not even spell ``knowledge``
    has no such table (the nerve.toml `init` writes)."""
    main = nerve_toml.home(toplevel)
    if not any(nerve_toml.path_in(top).is_file() for top in (toplevel, main)):
        return None, None
    try:
        if b"knowledge" not in nerve_toml.locate(toplevel).read_bytes():
            return None, None
    except OSError:
        pass  # the reader says what is wrong
    from . import config

    return config.trusted_embeddings(common_dir, toplevel)


def open_paths(repo: str | None) -> RepoPaths:
    """The worktree to search: ``--repo PATH`` (any directory inside it) or the current one (found from git's
    files when nothing is unusual, as a heartbeat finds it: no git process at start-up)."""
    from ..paths import discover, find_by_files

    if repo is not None and not Path(repo).is_dir():
        raise UsageError(f"--repo: no such directory: {repo}")
    found = find_by_files() if repo is None else None
    return found if found is not None else discover(repo, inherit_location=repo is None)
