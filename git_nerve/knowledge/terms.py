"""Words for the full-text index: identifier splitting, safe FTS5 queries, snippets. Pure (no I/O).

SQLite's ``unicode61`` tokenizer already splits ``snake_case`` and paths
(``_``, ``/`` and ``.`` separate tokens) but keeps ``parseConfigFile`` whole.
:func:`index_text` therefore appends the parts of every camelCase or
letter-digit identifier to the text it indexes, so ``parse config`` finds
``parseConfigFile`` while ``parseConfigFile`` still finds itself.

User text never reaches FTS5's query syntax: :func:`fts_query` keeps only
word characters, quotes every term and joins them with ``OR``, so input such
as ``foo"bar OR (`` is just the words foo, bar.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")
_ALNUM = re.compile(r"[A-Za-z0-9]+")
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

#: Words too common to help a search (used on queries only; the index keeps everything).
STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours"]
)


def split_identifier(word: str) -> list[str]:
    """The parts of an identifier or path: ``parseHTTPResponse`` -> parse, HTTP, Response;
    ``snake_case_name`` -> snake, case, name; ``src/app.py`` -> src, app, py."""
    parts: list[str] = []
    for piece in _ALNUM.findall(word):
        parts.extend(_HUMP.findall(piece))
    return parts


def index_text(text: str) -> str:
    """``text`` followed by the parts of its distinct camelCase / letter-digit identifiers (what FTS5 indexes)."""
    extra: list[str] = []
    for token in dict.fromkeys(_ALNUM.findall(text)):
        if token.islower() or token.isdigit():
            continue
        parts = _HUMP.findall(token)
        if len(parts) > 1:
            extra.extend(parts)
    return f"{text}\n{' '.join(extra)}" if extra else text


def query_terms(text: str) -> list[str]:
    """The distinct lower-case terms of a query: its words plus their identifier parts. Stop words are
    dropped when they stand alone (unless nothing else is left), kept inside identifiers (``parseRetryAfter``)."""
    found: dict[str, bool] = {}  # term -> whether it may be dropped as a stop word
    for word in _WORD.findall(text):
        if not word.strip("_"):
            continue
        parts = split_identifier(word)
        for candidate, alone in [(word, True), *((p, False) for p in (parts if len(parts) > 1 else []))]:
            term = candidate.lower()
            found[term] = found.get(term, True) and alone and term in STOPWORDS
    kept = [t for t, droppable in found.items() if not droppable]
    return kept or list(found)


def quote(term: str) -> str:
    """One FTS5 string (a phrase of whatever tokens the tokenizer makes of it)."""
    return '"' + term.replace('"', '""') + '"'


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression for free text: quoted terms joined by OR; None when it has no words."""
    terms = query_terms(text)
    return " OR ".join(quote(t) for t in terms) if terms else None


_SUFFIXES = ("ations", "ation", "ings", "ing", "ions", "ion", "ers", "er", "ies", "ied", "es", "ed", "ly", "s", "e", "y")


def stem(word: str) -> str:
    """A crude stem, good enough to find the line of a chunk that matched by substring (FTS5 does the real stemming)."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def snippet(text: str, terms: list[str], width: int = 120) -> str:
    """The line of ``text`` that holds most of the query's terms (else its first non-blank line), trimmed."""
    wanted = {stem(t) for t in terms}
    best, best_hits = "", -1
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        low = stripped.lower()
        hits = sum(1 for w in wanted if w in low)
        if hits > best_hits:
            best, best_hits = stripped, hits
    if len(best) > width:
        best = best[: width - 1].rstrip() + "…"
    return best
