"""Ranking: reciprocal rank fusion and cosine similarity over float32 blobs. Pure (no I/O).

Vectors are stored normalised to unit length as little-endian float32
(4 bytes a dimension), so cosine similarity is a dot product.
"""

from __future__ import annotations

import heapq
import math
import sys
from array import array
from collections.abc import Hashable, Iterable, Sequence
from operator import mul
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

#: The usual constant of reciprocal rank fusion (Cormack et al. 2009): dampens the weight of the very top ranks.
RRF_K = 60


def rrf(rankings: Iterable[Sequence[K]], k: int = RRF_K) -> list[tuple[K, float]]:
    """Fuse ranked lists: each item scores the sum of ``1 / (k + rank)`` over the lists holding it (rank from 1).

    Ties keep the order in which items were first seen.
    """
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    order = {key: i for i, key in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def normalize(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0] * len(vector)


def pack(vector: Sequence[float]) -> bytes:
    """A unit-length little-endian float32 blob."""
    arr = array("f", normalize(vector))
    if sys.byteorder != "little":
        arr.byteswap()
    return arr.tobytes()


def unpack(blob: bytes) -> array:
    """The float32 array stored by :func:`pack`."""
    arr = array("f")
    arr.frombytes(blob)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr


def nearest(query: Sequence[float], candidates: Iterable[tuple[K, bytes]], limit: int) -> list[tuple[K, float]]:
    """The ``limit`` candidates most similar to ``query`` by cosine similarity (best first).

    The candidates' blobs come from :func:`pack` (unit length), so the similarity is a dot product.

    Blobs of another dimension than the query's (a model changed its output) are ignored.
    """
    q = array("f", normalize(query))
    dim = len(q)
    scored = (
        (key, sum(map(mul, q, vec)))
        for key, blob in candidates
        if len(blob) == 4 * dim
        for vec in (unpack(blob),)
    )
    return heapq.nlargest(limit, scored, key=lambda kv: kv[1])
