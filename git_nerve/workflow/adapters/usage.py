"""What an agent's model calls cost, read from the agent CLI's own report (issue 39): pure, no I/O.

One :class:`Usage` per model a round used. Every count comes from what the CLI printed, never from the length
of a text; a CLI that reports nothing gives no Usage (the round's usage stays unknown). Tokens are counted one
way for every CLI: ``input_tokens`` is every prompt token the model read, ``cached_input_tokens`` the part of
them read from the provider's cache (Anthropic's cache reads; its cache writes are input, not cached),
``output_tokens`` every token it wrote, ``reasoning_tokens`` the part of those spent thinking where the CLI says
(None: not reported). ``cost_usd`` is the CLI's own figure (Claude Code's ``costUSD``,
opencode's ``cost`` when non-zero), else None: a price table may fill it (:func:`priced`), nothing else does.

The shapes parsed, each as the pinned CLI prints it (tests/data/usage/ holds captured output):

* Claude Code ``-p --output-format json``: one ``result`` object, ``modelUsage`` per model;
* Codex ``exec --json``: JSON lines, ``turn.completed`` with ``usage``; the answer is the last agent_message;
* Gemini CLI ``--output-format json``: ``response`` and ``stats.models.<model>.tokens``;
* Qwen Code ``--output-format json``: an array of events ending with a ``result`` (``stats.models`` as Gemini's);
* aider: each model response's ``usage``, logged by git-nerve's launcher for aider (no cost: [prices]);
* opencode ``run --format json``: JSON lines, ``text`` parts and ``step_finish`` parts with ``tokens``, ``cost``;
* Copilot CLI ``--usage-output-file``: ``modelMetrics.<model>.usage`` (premium requests, no dollars);
* an OpenAI-compatible endpoint's ``usage`` (``prompt_tokens``, ``completion_tokens``, their details).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple


class Usage(NamedTuple):
    """One model's share of one agent run, as its CLI reported it."""

    model: str | None
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int | None = None
    cost_usd: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()


class Report(NamedTuple):
    """What an agent run printed, split: its answer (what extraction reads) and its usage."""

    answer: str
    usage: list[Usage]


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0


def _cost(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _lines(text: str) -> Iterable[dict]:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            obj = _json(line)
            if isinstance(obj, dict):
                yield obj


def add(usages: Iterable[Usage]) -> list[Usage]:
    """The same usage with one entry per model (counts and known costs summed; one unknown cost: unknown)."""
    merged: dict[str | None, Usage] = {}
    for u in usages:
        was = merged.get(u.model)
        if was is None:
            merged[u.model] = u
            continue
        reasoning = None if was.reasoning_tokens is None and u.reasoning_tokens is None else (
            (was.reasoning_tokens or 0) + (u.reasoning_tokens or 0))
        cost = None if was.cost_usd is None or u.cost_usd is None else was.cost_usd + u.cost_usd
        merged[u.model] = Usage(u.model, was.input_tokens + u.input_tokens,
                                was.cached_input_tokens + u.cached_input_tokens,
                                was.output_tokens + u.output_tokens, reasoning, cost)
    return list(merged.values())


# -- each CLI's report -----------------------------------------------------------------------


def claude(stdout: str) -> Report:
    """Claude Code's ``--output-format json`` result (also the last ``result`` line of ``stream-json``)."""
    result = None
    whole = _json(stdout.strip())
    if isinstance(whole, dict):
        result = whole
    else:
        for obj in _lines(stdout):
            if obj.get("type") == "result":
                result = obj
    if not isinstance(result, dict):
        return Report(stdout, [])
    answer = result.get("result") if isinstance(result.get("result"), str) else stdout
    usages = []
    for model, mu in (result.get("modelUsage") or {}).items():
        if not isinstance(mu, dict):
            continue
        cached = _int(mu.get("cacheReadInputTokens"))
        thinking = mu.get("thinkingTokens")
        usages.append(Usage(str(model), _int(mu.get("inputTokens")) + _int(mu.get("cacheCreationInputTokens")) + cached,
                            cached, _int(mu.get("outputTokens")),
                            _int(thinking) if isinstance(thinking, int) else None, _cost(mu.get("costUSD"))))
    if not usages and isinstance(result.get("usage"), dict):
        usages = [anthropic_usage(result["usage"], None, _cost(result.get("total_cost_usd")))]
    return Report(answer, usages)


class ClaudeStream:
    """Claude Code's ``stream-json`` read while it runs: each API call's usage as its ``assistant`` events carry
    it (one message id, many events: counted once), so a budget is checked mid-turn. Fed the whole stdout so far
    each time; only the lines not read yet are parsed."""

    def __init__(self) -> None:
        self._at = 0
        self._calls: dict[str, Usage] = {}

    def __call__(self, stdout: str) -> list[Usage]:
        if len(stdout) < self._at:  # the capture dropped its head: read it all again
            self._at, self._calls = 0, {}
        end = stdout.rfind("\n") + 1
        if end > self._at:
            for obj in _lines(stdout[self._at:end]):
                msg = obj.get("message") if obj.get("type") == "assistant" else None
                if isinstance(msg, dict) and isinstance(msg.get("usage"), dict):
                    key = str(msg.get("id") or len(self._calls))
                    self._calls[key] = anthropic_usage(msg["usage"], msg.get("model") if isinstance(
                        msg.get("model"), str) else None)
            self._at = end
        return add(self._calls.values())


def anthropic_usage(u: Mapping[str, Any], model: str | None, cost: float | None = None) -> Usage:
    """An Anthropic Messages ``usage`` object (cache writes are input; cache reads are cached input)."""
    cached = _int(u.get("cache_read_input_tokens"))
    return Usage(model, _int(u.get("input_tokens")) + _int(u.get("cache_creation_input_tokens")) + cached, cached,
                 _int(u.get("output_tokens")), None, cost)


def codex(stdout: str, model: str | None = None) -> Report:
    """Codex ``exec --json`` events: each ``turn.completed``'s usage; the answer is the last agent message."""
    answer, usages = None, []
    for obj in _lines(stdout):
        kind = obj.get("type")
        item = obj.get("item")
        if kind == "item.completed" and isinstance(item, dict) and item.get("type") == "agent_message":
            answer = item.get("text") if isinstance(item.get("text"), str) else answer
        elif kind == "turn.completed" and isinstance(obj.get("usage"), dict):
            u = obj["usage"]
            reasoning = u.get("reasoning_output_tokens")
            usages.append(Usage(model, _int(u.get("input_tokens")), _int(u.get("cached_input_tokens")),
                                _int(u.get("output_tokens")), _int(reasoning) if isinstance(reasoning, int) else None))
    return Report(stdout if answer is None else answer, add(usages))


def _gemini_stats(stats: Any) -> list[Usage]:
    usages = []
    models = stats.get("models") if isinstance(stats, dict) else None
    for model, data in (models or {}).items():
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, dict):
            continue
        thoughts = tokens.get("thoughts")
        usages.append(Usage(str(model), _int(tokens.get("prompt")), _int(tokens.get("cached")),
                            _int(tokens.get("candidates")) + _int(thoughts),
                            _int(thoughts) if isinstance(thoughts, int) else None))
    return usages


def gemini(stdout: str) -> Report:
    """Gemini CLI's ``--output-format json``: ``response``, ``stats.models`` (thoughts count as output)."""
    obj = _json(stdout.strip())
    if not isinstance(obj, dict):
        return Report(stdout, [])
    answer = obj.get("response") if isinstance(obj.get("response"), str) else stdout
    return Report(answer, _gemini_stats(obj.get("stats")))


def qwen(stdout: str) -> Report:
    """Qwen Code's ``--output-format json``: an array of events; the ``result`` one has the answer and stats."""
    events = _json(stdout.strip())
    if isinstance(events, dict):
        events = [events]
    result = next((e for e in reversed(events) if isinstance(e, dict) and e.get("type") == "result"), None) \
        if isinstance(events, list) else None
    if result is None:
        return Report(stdout, [])
    answer = result.get("result") if isinstance(result.get("result"), str) else stdout
    usages = _gemini_stats(result.get("stats"))
    if not usages and isinstance(result.get("usage"), dict):
        u = result["usage"]
        usages = [Usage(None, _int(u.get("input_tokens")), _int(u.get("cache_read_input_tokens")),
                        _int(u.get("output_tokens")))]
    return Report(answer, usages)


def aider(logged: str, stdout: str = "") -> Report:
    """aider's model responses' own ``usage``, one JSON line each, as git-nerve's launcher for aider logs them
    around litellm's ``completion`` (aider's ``Tokens: 2.3k sent`` lines are rounded, a `/run` of `git nerve
    thread` echoes earlier rounds' lines, and its commit messages' requests are reported nowhere)."""
    usages = []
    for obj in _lines(logged):
        model = obj.get("model") if isinstance(obj.get("model"), str) else None
        usages.append(Usage(model, _int(obj.get("prompt_tokens")), _int(obj.get("cached_tokens")),
                            _int(obj.get("completion_tokens"))))
    return Report(stdout, add(usages))


def opencode(stdout: str, model: str | None = None) -> Report:
    """opencode ``run --format json``: the ``text`` parts are the answer, each ``step_finish`` part's tokens."""
    texts, usages = [], []
    for obj in _lines(stdout):
        part = obj.get("part") if isinstance(obj.get("part"), dict) else {}
        if obj.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif obj.get("type") == "step_finish" and isinstance(part.get("tokens"), dict):
            t = part["tokens"]
            cache = t.get("cache") if isinstance(t.get("cache"), dict) else {}
            cached = _int(cache.get("read"))
            reasoning = t.get("reasoning")
            cost = _cost(part.get("cost"))
            usages.append(Usage(model, _int(t.get("input")) + cached + _int(cache.get("write")), cached,
                                _int(t.get("output")) + _int(reasoning),
                                _int(reasoning) if isinstance(reasoning, int) else None, cost or None))
    if not texts and not usages:
        return Report(stdout, [])
    return Report("\n".join(texts), add(usages))


def openai_usage(u: Any, model: str | None) -> list[Usage]:
    """An OpenAI-compatible response's ``usage`` (Chat Completions or Responses), [] when absent."""
    if not isinstance(u, dict):
        return []
    details = u.get("prompt_tokens_details") or u.get("input_tokens_details") or {}
    out_details = u.get("completion_tokens_details") or u.get("output_tokens_details") or {}
    reasoning = out_details.get("reasoning_tokens") if isinstance(out_details, dict) else None
    return [Usage(model, _int(u.get("prompt_tokens", u.get("input_tokens"))),
                  _int(details.get("cached_tokens")) if isinstance(details, dict) else 0,
                  _int(u.get("completion_tokens", u.get("output_tokens"))),
                  _int(reasoning) if isinstance(reasoning, int) else None)]


# -- prices ------------------------------------------------------------------------------------


def copilot(written: str, stdout: str) -> Report:
    """Copilot CLI's ``--usage-output-file`` JSON (1.0.102): ``modelMetrics.<model>.usage`` with ``inputTokens``
    (every prompt token), ``cacheReadTokens`` (cached), ``outputTokens``. Its ``requests.cost`` counts premium
    requests, not dollars: no cost (a price table may give one). The answer is stdout (``-s``: the answer only)."""
    data = _json(written) if written.strip() else None
    metrics = data.get("modelMetrics") if isinstance(data, dict) else None
    found: list[Usage] = []
    for model, entry in (metrics.items() if isinstance(metrics, dict) else ()):
        u = entry.get("usage") if isinstance(entry, dict) else None
        if isinstance(u, dict):
            found.append(Usage(str(model), _int(u.get("inputTokens")), _int(u.get("cacheReadTokens")),
                               _int(u.get("outputTokens"))))
    return Report(stdout, add(found))


def priced(usages: Iterable[Usage], prices: Mapping[str, Mapping[str, float]]) -> list[Usage]:
    """Each usage with no cost of its own priced from ``[prices."<model>"]`` (USD per million tokens:
    ``input_per_mtok``, ``output_per_mtok``, ``cached_input_per_mtok`` (default: the input price)); a model
    without a price keeps an unknown cost."""
    out = []
    for u in usages:
        price = prices.get(u.model or "") if u.cost_usd is None else None
        if price is None or "input_per_mtok" not in price or "output_per_mtok" not in price:
            out.append(u)
            continue
        cached_rate = price.get("cached_input_per_mtok", price["input_per_mtok"])
        cost = ((u.input_tokens - u.cached_input_tokens) * price["input_per_mtok"]
                + u.cached_input_tokens * cached_rate + u.output_tokens * price["output_per_mtok"]) / 1_000_000
        out.append(u._replace(cost_usd=round(cost, 6)))
    return out


__all__ = ["ClaudeStream", "Report", "Usage", "add", "aider", "anthropic_usage", "claude", "codex", "gemini", "openai_usage",
           "opencode", "priced", "qwen"]
