"""An OpenAI-compatible chat-completions endpoint as an adapter (single turn).

The role's prompt is the system message; the user message is the task (the
start frame) followed by this run's rounds so far, newest last, within a
budget. The API key is read at call time from the environment variable
*named* by ``api_key_env``: only the variable's name is ever stored, and the
key is scrubbed from every error message.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from ...bus.rounds import Round
from ...redact import one
from .base import (
    DEFAULT_TIMEOUT,
    AdapterAborted,
    AdapterAgentFailed,
    AdapterNonZeroExit,
    AdapterSpawnFailed,
    AdapterTimeout,
    AgentContext,
)

#: Characters of the run's rounds sent along with the task.
HISTORY_BUDGET = 8000
#: the shortest key masked in a message (a shorter one would hide ordinary words)
KEY_SHORTEST = 4


def redact(text: str, secret: str | None) -> str:
    """``text`` with the API key masked (:func:`git_nerve.redact.one`, the one redaction)."""
    return one(text, secret, shortest=KEY_SHORTEST)


def transcript(rounds: Sequence[Round], budget: int = HISTORY_BUDGET) -> str:
    """The newest rounds that fit ``budget`` characters, oldest first, as `[#n role]` blocks."""
    picked: list[str] = []
    used = 0
    for r in reversed(rounds):
        meta = "".join(f"\n{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in r.metadata.items())
        block = f"[#{r.round} {r.role or 'unknown'}]{meta}\n{r.content.strip()}"
        if picked and used + len(block) > budget:
            picked.append(f"... {len(rounds) - len(picked)} earlier rounds omitted ...")
            break
        picked.append(block)
        used += len(block)
    return "\n\n".join(reversed(picked))


def _message_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        texts = [p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(texts) if texts else None
    return None


@dataclass(frozen=True)
class HttpAdapter:
    """``POST {base_url}/chat/completions`` with ``model``; bearer key from ``$api_key_env`` (if named)."""

    base_url: str
    model: str
    api_key_env: str | None = None
    timeout: float | None = None
    name: str = "http"
    temperature: float | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"base_url must be an http(s) URL, not {self.base_url!r}")
        if not self.model:
            raise ValueError("model must be set")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError("timeout must be positive")

    @property
    def effective_timeout(self) -> float:
        return float(self.timeout) if self.timeout is not None else DEFAULT_TIMEOUT

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def with_defaults(self, defaults: Mapping[str, Any]) -> HttpAdapter:
        if self.timeout is None and defaults.get("timeout") is not None:
            return replace(self, timeout=float(defaults["timeout"]))
        return self

    def check(self) -> list[str]:
        if self.api_key_env and not os.environ.get(self.api_key_env):
            return [f"environment variable {self.api_key_env} (the API key for {self.url}) is not set"]
        return []

    def __call__(self, prompt: str, ctx: AgentContext) -> str:
        user = ctx.start.content.strip() or f"Work on task {ctx.task_id}."
        history = transcript(ctx.rounds)
        if history:
            user += "\n\nThis run's thread so far:\n\n" + history
        return self.complete(prompt, user, abort=ctx.abort, usage=getattr(ctx, "usage", None))

    def complete(self, system: str, user: str, *, abort: threading.Event | None = None, usage: list | None = None) -> str:
        """One chat completion: the assistant message's text; the endpoint's ``usage`` appended to ``usage``."""
        key = None
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise AdapterSpawnFailed(self.name, f"environment variable {self.api_key_env} (the API key) is not set")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            **dict(self.extra_body),
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
        timeout = self.effective_timeout
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                with urllib.request.urlopen(request, timeout=timeout) as resp:
                    outcome["status"], outcome["body"] = resp.status, resp.read()
            except BaseException as exc:  # handed to the caller's thread
                outcome["exc"] = exc

        worker = threading.Thread(target=call, daemon=True, name=f"nerve-http-{self.name}")
        worker.start()
        deadline = time.monotonic() + timeout
        while worker.is_alive():
            worker.join(0.05)
            if abort is not None and abort.is_set():
                raise AdapterAborted(self.name, "aborted; the request was abandoned")
            if time.monotonic() >= deadline and worker.is_alive():
                raise AdapterTimeout(self.name, timeout, stopped="the request was abandoned")
        return self._result(outcome, key, timeout, usage)

    def _result(self, outcome: dict[str, Any], key: str | None, timeout: float, usage: list | None = None) -> str:
        exc = outcome.get("exc")
        if isinstance(exc, urllib.error.HTTPError):
            try:
                detail = exc.read().decode("utf-8", "replace")
            except Exception:
                detail = ""
            if exc.code in (401, 403):
                where = f"${self.api_key_env}" if self.api_key_env else "no key configured (api_key_env)"
                raise AdapterAgentFailed(
                    self.name, f"HTTP {exc.code} from {self.url}: the API key was rejected (bad or missing key: {where})",
                    exc.code, detail=f"body={redact(detail, key)!r}",
                ) from None
            raise AdapterNonZeroExit(
                self.name, exc.code, redact(detail, key), what="HTTP status", labels=("body", None)
            ) from None
        if isinstance(exc, (socket.timeout, TimeoutError)) or (
            isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, (socket.timeout, TimeoutError))
        ):
            raise AdapterTimeout(self.name, timeout, stopped="the endpoint did not answer in time") from None
        if isinstance(exc, urllib.error.URLError):
            raise AdapterSpawnFailed(self.name, f"cannot reach {self.url}: {redact(str(exc.reason), key)}") from None
        if exc is not None:
            raise AdapterSpawnFailed(self.name, f"request to {self.url} failed: {redact(repr(exc), key)}") from None
        status, raw = outcome["status"], outcome["body"]
        text = raw.decode("utf-8", "replace")
        try:
            data = json.loads(text)
            content = _message_text(data["choices"][0]["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError):
            content = None
        if content is None:
            raise AdapterNonZeroExit(
                self.name, status, redact(text, key), what="HTTP status",
                note="the response is not a chat completion: no choices[0].message.content", labels=("body", None),
            )
        if usage is not None:
            from .usage import openai_usage

            usage.extend(openai_usage(data.get("usage"), str(data.get("model") or self.model)))
        return content


def create_http(
    base_url: str,
    model: str,
    *,
    api_key_env: str | None = None,
    timeout: float | None = None,
    name: str = "http",
    temperature: float | None = None,
    extra_body: Mapping[str, Any] | None = None,
) -> HttpAdapter:
    """An adapter for any OpenAI-compatible chat endpoint (``base_url`` ends before ``/chat/completions``)."""
    return HttpAdapter(base_url, model, api_key_env, timeout, name, temperature, dict(extra_body or {}))


__all__ = ["HttpAdapter", "create_http", "redact", "transcript"]
