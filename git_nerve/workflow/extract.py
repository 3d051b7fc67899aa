"""Extract: an agent's raw output -> the role's typed meta (a pydantic model).

By default the result is read from the output itself: the last fenced
```json / ```yaml block that validates, an output that is one JSON object, or
YAML frontmatter. With ``provider = "llm"`` (nerve.toml ``[extract]``,
overridable per role) an OpenAI-compatible endpoint turns the output into
JSON when the output holds no valid block.

On a validation failure extract retries once, feeding the error back (to the
agent through ``reprompt``, or to the extract endpoint), then raises
:class:`ExtractError`. It never decides what the workflow does next: the
moderator does.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import NerveError
from .adapters.base import AdapterAborted, AdapterError, tail
from .adapters.http import HttpAdapter
from .config import ExtractConfig, validation_errors

_FENCE = re.compile(
    r"^[ ]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[A-Za-z0-9_+.-]*)[^\n]*\n(?P<body>.*?)^[ ]{0,3}(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_FRONTMATTER = re.compile(r"\A\ufeff?---[ \t]*\n(?P<body>.*?)^(?:---|\.\.\.)[ \t]*$", re.MULTILINE | re.DOTALL)
STRUCTURED = {"json", "yaml", "yml", ""}
NOTHING = "no fenced ```json or ```yaml block, JSON object or YAML frontmatter in the output"


class ExtractError(NerveError):
    """The output could not be turned into the role's meta, even after one retry."""

    def __init__(self, message: str, *, retried: bool = False):
        super().__init__(message)
        self.retried = retried


@dataclass(frozen=True)
class Extracted:
    meta: BaseModel
    via: str  #: "parse" or "llm"
    retries: int  #: 0, or 1 when the retry produced it


class Invalid(ValueError):
    """One extraction attempt failed; the message says why (fed back on retry)."""


def _candidates(raw: str) -> list[tuple[str, str, str]]:
    """(what, language, text) to try, best first: fenced blocks last-to-first, a bare JSON object, frontmatter."""
    found: list[tuple[str, str, str]] = []
    blocks = [m for m in _FENCE.finditer(raw) if m["lang"].lower() in STRUCTURED]
    for m in reversed(blocks):
        lang = m["lang"].lower()
        found.append((f"the ```{lang or ''} block", "yaml" if lang == "yml" else lang, m["body"]))
    stripped = raw.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        found.append(("the output", "json", stripped))
    fm = _FRONTMATTER.match(raw.lstrip("\n"))
    if fm:
        found.append(("the YAML frontmatter", "yaml", fm["body"]))
    return found


def _load(lang: str, text: str) -> Any:
    if lang == "json":
        return json.loads(text)
    if lang == "yaml":
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except ValueError:
        return yaml.safe_load(text)


def parse(raw: str, model: type[BaseModel]) -> BaseModel:
    """The role's meta from ``raw``; raises :class:`Invalid` saying what was wrong."""
    errors: list[str] = []
    for what, lang, text in _candidates(raw):
        try:
            data = _load(lang, text)
        except (ValueError, yaml.YAMLError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            errors.append(f"{what} is not valid {lang.upper() or 'JSON or YAML'}: {first}")
            continue
        if not isinstance(data, dict):
            errors.append(f"{what} holds a {type(data).__name__}, not an object with the fields")
            continue
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            errors.append(f"{what} does not match: {validation_errors(exc)}")
    raise Invalid(errors[0] if errors else NOTHING)


def schema_hint(model: type[BaseModel]) -> str:
    """The fields an agent must report, one line each, for prompts."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    lines = []
    for name, prop in schema.get("properties", {}).items():
        kind = _type_name(prop)
        if name in required:
            flag = "required"
        else:
            flag = f"optional, default {json.dumps(prop['default'])}" if "default" in prop else "optional"
        desc = prop.get("description")
        lines.append(f"- {name} ({kind}, {flag})" + (f": {desc}" if desc else ""))
    return "\n".join(lines)


def _type_name(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_type_name(p) for p in prop["anyOf"])
    kind = prop.get("type")
    if kind == "array":
        return f"list of {_type_name(prop.get('items', {}))}"
    if isinstance(kind, str):
        return kind
    if "$ref" in prop:
        return "object"
    return "any"


def correction_prompt(model: type[BaseModel], error: str) -> str:
    """What the agent is told when its output could not be read.

    Never any of the agent's own output: text an agent printed (a URL, an
    instruction injected into a file it read) must not come back to it, or to
    any tool, as instructions. Only our parser's error, quoted as data.
    """
    quoted = "\n".join(f"> {line}" for line in error.replace("\r", "").splitlines()[:5])
    return (
        "Your previous reply could not be read as the required result. The parser said:\n"
        f"{quoted}\n\n"
        "Do not redo the work and do not run anything. Reply with only a fenced ```json block holding an object "
        f"with these fields:\n{schema_hint(model)}\n"
    )


def _llm_system(model: type[BaseModel]) -> str:
    return (
        "You turn an AI agent's report into JSON. Reply with only one JSON object, no prose, "
        "with these fields:\n" + schema_hint(model) + "\n\nJSON schema:\n" + json.dumps(model.model_json_schema())
    )


def extract(
    raw: str,
    model: type[BaseModel],
    config: ExtractConfig | None = None,
    *,
    reprompt: Callable[[str], str] | None = None,
    abort: threading.Event | None = None,
) -> Extracted:
    """Turn ``raw`` into ``model``; one retry feeding the error back, then :class:`ExtractError`.

    ``reprompt(prompt) -> raw`` asks the agent again (provider "parse");
    the "llm" provider asks its endpoint again instead. Without a way to
    retry, the first failure raises.
    """
    config = config or ExtractConfig()
    try:
        return Extracted(parse(raw, model), "parse", 0)
    except Invalid as exc:
        error = str(exc)
    if config.provider == "llm":
        return _via_llm(raw, model, config, error, abort)
    if reprompt is None:
        raise ExtractError(error)
    return _retry(lambda: reprompt(correction_prompt(model, error)), model, "parse", f"{error}; the retry failed")


def _retry(ask: Callable[[], str], model: type[BaseModel], provider: str, failed: str) -> Extracted:
    """The one retry: ``ask()`` for a new answer, parsed as ``model``; ExtractError when the asking fails (``failed``,
    then why) or the answer is still invalid."""
    try:
        again = ask()
    except AdapterAborted:
        raise
    except AdapterError as exc:
        raise ExtractError(f"{failed}: {exc.message}", retried=True) from None
    try:
        return Extracted(parse(again, model), provider, 1)
    except Invalid as exc:
        raise ExtractError(f"{exc} (after one retry)", retried=True) from None


def _via_llm(raw: str, model: type[BaseModel], config: ExtractConfig, error: str, abort: threading.Event | None) -> Extracted:
    assert config.base_url and config.model
    llm = HttpAdapter(config.base_url, config.model, config.api_key_env, config.timeout, name="extract")
    system = _llm_system(model)
    user = f"The agent's report:\n\n{tail(raw, 20000)}"
    try:
        first = llm.complete(system, user, abort=abort)
    except AdapterAborted:
        raise
    except AdapterError as exc:
        raise ExtractError(f"{error}; the extract endpoint failed: {exc.message}") from None
    try:
        return Extracted(parse(first, model), "llm", 0)
    except Invalid as exc:
        problem = str(exc)
    retry_user = f"{user}\n\nYour previous answer:\n\n{tail(first, 4000)}\n\nIt was rejected: {problem}. Reply with a corrected JSON object only."
    return _retry(lambda: llm.complete(system, retry_user, abort=abort), model, "llm",
                  f"{problem}; the extract retry failed")


__all__ = ["ExtractError", "Extracted", "Invalid", "correction_prompt", "extract", "parse", "schema_hint"]
