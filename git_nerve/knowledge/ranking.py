"""Ranking: reciprocal rank fusion and cosine similarity over float32 blobs. Pure (no I/O).

Vectors are stored normalised to unit length as little-endian float32
(4 bytes a dimension), so cosine similarity is a dot product. The scan runs
in numpy, a block of rows at a time (memory stays at one block whatever the
index's size); numpy is imported only when a query uses embeddings.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Hashable, Iterable, Sequence
from itertools import islice

TYPE_CHECKING = False  # a query (an agent's hot path) imports this module: typing's names for readers only
if TYPE_CHECKING:
    from typing import TypeVar

    K = TypeVar("K", bound=Hashable)

#: The usual constant of reciprocal rank fusion (Cormack et al. 2009): dampens the weight of the very top ranks.
RRF_K = 60
#: Rows of vectors scored at once by :func:`nearest`.
BLOCK = 4096


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
    import numpy as np

    q = np.asarray(normalize(query), dtype=np.float32)
    dim = len(q)
    keys: list[K] = []
    scores = np.empty(0, dtype=np.float32)
    rows = iter(candidates)
    while block := list(islice(rows, BLOCK)):
        fitting = [(key, blob) for key, blob in block if len(blob) == 4 * dim]
        if not fitting:
            continue
        matrix = np.frombuffer(b"".join(blob for _, blob in fitting), dtype="<f4").reshape(len(fitting), dim)
        keys += [key for key, _ in fitting]
        scores = np.concatenate((scores, matrix @ q))
        if len(keys) > limit:  # keep the best so far; a stable sort keeps ties in the order seen
            best = np.argsort(-scores, kind="stable")[:limit]
            best.sort()
            keys = [keys[i] for i in best]
            scores = scores[best]
    order = np.argsort(-scores, kind="stable")[:limit]
    return [(keys[i], float(scores[i])) for i in order]
