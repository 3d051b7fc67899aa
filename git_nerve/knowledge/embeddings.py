"""A client for any OpenAI-compatible ``/v1/embeddings`` endpoint (standard library only).

``POST <endpoint> {"model": ..., "input": [texts]}`` answered by
``{"data": [{"index": i, "embedding": [floats]}, ...]}``. The key is read
from the environment variable named in ``nerve.toml`` at the moment of the
request and sent only in the ``Authorization`` header: it is never logged,
stored or shown (it is scrubbed from error messages too).
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

from ..errors import NerveError
from ..redact import one
from .config import EmbeddingsConfig


class EmbeddingError(NerveError):
    """The endpoint could not give us vectors (callers warn and fall back to full text)."""


class EmbeddingClient:
    def __init__(self, config: EmbeddingsConfig, env: Mapping[str, str] | None = None):
        self.config = config
        self._env = os.environ if env is None else env

    def _key(self) -> str | None:
        name = self.config.api_key_env
        if not name:
            return None
        key = self._env.get(name)
        if not key:
            raise EmbeddingError(f"the environment variable {name} (api_key_env in nerve.toml) is not set")
        return key

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        if not texts:
            return []
        if self.config.provider == "local":
            from . import local_embeddings

            try:
                return local_embeddings.embed(texts)
            except local_embeddings.LocalEmbeddingError as exc:
                raise EmbeddingError(exc.message) from None
        key = self._key()
        endpoint = self.config.shown_endpoint
        body = json.dumps({"model": self.config.model, "input": list(texts)}).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "git-nerve"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.config.endpoint, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            raise EmbeddingError(_scrub(f"{endpoint} answered HTTP {exc.code}{': ' + detail if detail else ''}", key)) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise EmbeddingError(f"{endpoint} did not answer within {self.config.timeout:g}s") from None
            raise EmbeddingError(_scrub(f"cannot reach {endpoint}: {getattr(reason, 'strerror', None) or reason}", key)) from None
        except TimeoutError:
            raise EmbeddingError(f"{endpoint} did not answer within {self.config.timeout:g}s") from None
        except OSError as exc:
            raise EmbeddingError(_scrub(f"cannot reach {endpoint}: {exc.strerror or exc}", key)) from None
        return _vectors(raw, len(texts), endpoint)


def _vectors(raw: bytes, expected: int, endpoint: str) -> list[list[float]]:
    bad = EmbeddingError(f"{endpoint} did not answer with embeddings in the OpenAI shape")
    try:
        data = json.loads(raw)["data"]
        items = sorted(((item.get("index", i), item["embedding"]) for i, item in enumerate(data)), key=lambda t: t[0])
        vectors = [[float(x) for x in vec] for _, vec in items]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise bad from None
    if len(vectors) != expected:
        raise EmbeddingError(f"{endpoint} returned {len(vectors)} embeddings for {expected} texts")
    dims = {len(v) for v in vectors}
    if len(dims) != 1 or 0 in dims:
        raise EmbeddingError(f"{endpoint} returned embeddings of differing or zero length")
    return vectors


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read(4096)
    except OSError:
        return ""
    try:
        err = json.loads(raw).get("error")
        text = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        text = raw.decode("utf-8", "replace")
    text = " ".join(str(text or "").split())
    return text[:200]


def _scrub(message: str, key: str | None) -> str:
    return one(message, key, mask="***")  # the one redaction (git_nerve/redact.py)
