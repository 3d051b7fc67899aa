"""Embeddings computed on this machine, with no network and no key: WordLlama's static token embeddings.

The ``wordllama`` wheel (the ``git-nerve[embeddings]`` extra) ships its default model inside the
package: ``wordllama/weights/l2_supercat_256.safetensors`` (32,000 x 256, 16 MB) and its tokenizer in
``wordllama/tokenizers/``. It is loaded from there with downloads disabled, so a missing file is an
error, never a fetch from a hub. A text's vector is the mean of its tokens' vectors, normalised.

Chosen by ``provider = "local"`` in ``nerve.toml``'s ``[knowledge.embeddings]``. Measured on the question
set of tests/data/knowledge_questions.toml (bench/knowledge_questions.py), fusing it with the full-text
ranking does not beat full text alone, so it is off unless configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from ..errors import NerveError

#: The name vectors are stored under in the embedding cache.
MODEL = "wordllama-l2-supercat-256"


class LocalEmbeddingError(NerveError):
    pass


@cache
def _model():
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:
        raise LocalEmbeddingError(
            "local embeddings need the wordllama package: pip install 'git-nerve[embeddings]'") from None
    try:
        return WordLlama.load(config="l2_supercat", dim=256, cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    except (OSError, ValueError) as exc:  # FileNotFoundError: the wheel lacks its weights; never downloaded
        raise LocalEmbeddingError(f"wordllama's bundled model could not be loaded ({exc})") from None


def embed(texts: Sequence[str]) -> list[list[float]]:
    """One unit vector per text, in order."""
    if not texts:
        return []
    model = _model()
    # wordllama pads a batch to its longest text: batches of like lengths keep that padding (and memory) small
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: list[list[float]] = [[] for _ in texts]
    for start in range(0, len(order), 16):
        part = order[start:start + 16]
        for i, vector in zip(part, model.embed([texts[i] for i in part], norm=True).tolist()):
            out[i] = vector
    return out
