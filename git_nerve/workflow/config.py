"""``nerve.toml`` at the repository root: the extract settings and adapter defaults.

Nothing else lives there but the knowledge index's ``[knowledge.embeddings]``
(read and checked by :mod:`git_nerve.knowledge.config`) and ``[worktree]`` (what a task's new worktree is
given: :mod:`git_nerve.worktree_prep.config`): no agent registry
(RFC-003). Workflows name their adapters directly; ``[adapters.<name>]`` only
fills in what a workflow left unset (``timeout``, ``model``, ``extra_args``)
on adapters of that name.

.. code-block:: toml

    [extract]
    provider = "parse"          # "parse": a fenced ```json/```yaml block or YAML frontmatter
                                # "llm": that, else an OpenAI-compatible endpoint:
    # base_url = "http://127.0.0.1:8000/v1"
    # model = "qwen-plus"
    # api_key_env = "NERVE_EXTRACT_API_KEY"   # the NAME of the variable holding the key

    [adapters.claude]
    timeout = 300
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .. import nerve_toml
from ..errors import UsageError
from ..nerve_toml import FILE, path_in


class ExtractConfig(BaseModel):
    """How raw agent output becomes typed meta; a role may override any field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["parse", "llm"] = "parse"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = Field(default=None, description="the NAME of the environment variable holding the key")
    timeout: float = Field(default=60.0, gt=0)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or "=" in value or any(c.isspace() for c in value)):
            raise ValueError("must be the name of an environment variable (e.g. NERVE_EXTRACT_API_KEY), not a key")
        return value

    @model_validator(mode="after")
    def _llm_needs_endpoint(self) -> ExtractConfig:
        if self.provider == "llm":
            missing = [k for k in ("base_url", "model") if not getattr(self, k)]
            if missing:
                raise ValueError(f"provider = \"llm\" needs {' and '.join(missing)}")
        return self

    def merged(self, override: ExtractConfig | Mapping[str, Any] | None) -> ExtractConfig:
        """Two-level merge: these (global) settings, then the role's."""
        if override is None:
            return self
        fields = override.model_dump(exclude_unset=True) if isinstance(override, ExtractConfig) else dict(override)
        try:
            return ExtractConfig.model_validate({**self.model_dump(), **fields})
        except ValidationError as exc:
            raise UsageError(f"invalid extract override: {validation_errors(exc)}") from None


class AdapterDefaults(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float | None = Field(default=None, gt=0)
    model: str | None = None
    extra_args: list[str] | None = None
    #: more environment variables this adapter's process receives (names, e.g. the key variable a provider in
    #: the CLI's own config names): an adapter receives only its declared ones and the general ones
    pass_env: list[str] | None = None


class RunDefaults(BaseModel):
    """``[run]``: what `git nerve run` uses when its command line says nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    adapter: str | None = Field(default=None, description="run every role on this built-in adapter (like --adapter)")
    test_command: str | None = Field(
        default=None,
        description="how this repository runs its tests; prompts name it and adapters with command rules allow it",
    )
    sandbox: Literal["auto", "bwrap", "none"] | None = Field(
        default=None, description="the box around every agent process (workflow/sandbox.py); unset: $NERVE_SANDBOX, "
        "else auto = bwrap when usable",
    )
    network: Literal["on", "none"] = Field(default="on", description='"none": boxed agents get no network')
    hide: list[str] = Field(default_factory=list, description="more paths a boxed agent must not see (~ allowed)")


class Price(BaseModel):
    """``[prices."<model>"]``: USD per million tokens, for a CLI that reports tokens but no cost (issue 39)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0, description="unset: the input price")


class Budget(BaseModel):
    """``[budget]``: what a run may spend before it is stopped (issue 39); unset: no limit. Tokens are input
    (cached included) plus output tokens; dollars only where a cost is known (the CLI's own, or [prices])."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_tokens: int | None = Field(default=None, ge=0, description="per task, over all its rounds")
    task_usd: float | None = Field(default=None, ge=0, description="per task, over all its rounds")
    run_usd: float | None = Field(default=None, ge=0, description="per `git nerve run`")
    day_usd: float | None = Field(default=None, ge=0, description="per clone, since 00:00 UTC")


class NerveConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prices: dict[str, Price] = Field(default_factory=dict)
    budget: Budget = Budget()

    extract: ExtractConfig = ExtractConfig()
    run: RunDefaults = RunDefaults()
    adapters: dict[str, AdapterDefaults] = Field(default_factory=dict)
    #: owned and validated by git_nerve.knowledge.config; a workflow run only lets it through
    knowledge: dict[str, Any] = Field(default_factory=dict)
    #: owned and validated by git_nerve.worktree_prep.config (a spawn refuses a bad one); let through here
    worktree: dict[str, Any] = Field(default_factory=dict)

    def adapter_defaults(self, name: str) -> dict[str, Any]:
        d = self.adapters.get(name)
        return d.model_dump(exclude_none=True) if d else {}


def validation_errors(exc: ValidationError) -> str:
    """pydantic's errors as one line: ``where: what; where: what``."""
    parts = []
    for e in exc.errors():
        where = ".".join(str(p) for p in e["loc"])
        parts.append(f"{where}: {e['msg']}" if where else e["msg"])
    return "; ".join(parts)


def load(toplevel: str | os.PathLike[str] | None) -> NerveConfig:
    """The configuration of the checkout at ``toplevel``; defaults when there is no nerve.toml."""
    data = nerve_toml.read(toplevel) if toplevel is not None else None
    if data is None:
        return NerveConfig()
    try:
        return NerveConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{nerve_toml.locate(toplevel)}: {validation_errors(exc)}") from None


def trusted(cfg: NerveConfig, common_dir: str | os.PathLike[str], toplevel: str | os.PathLike[str]) -> tuple[NerveConfig, list[str]]:
    """``cfg`` without what this user has not trusted (issue 35), and one ``skipped ...`` line for each setting
    left out: ``[run] test_command`` (agents are not allowed it, prompts do not name it), ``[run] adapter``,
    every ``[adapters.*] extra_args``, the ``[extract]`` llm endpoint (back to parsing)."""
    from .. import trust

    v = trust.verdict(common_dir, toplevel)
    lines: list[str] = []
    run, adapters, extract = cfg.run, cfg.adapters, cfg.extract
    for key, name in ((trust.TEST, "test_command"), (trust.ADAPTER, "adapter")):
        if not v.allows(key, getattr(run, name)):
            run = run.model_copy(update={name: None})
            lines.append(trust.skipped(key))
    if not v.allows(trust.EXTRA, {n: list(a.extra_args) for n, a in adapters.items() if a.extra_args}):
        adapters = {n: a.model_copy(update={"extra_args": None}) for n, a in adapters.items()}
        lines.append(trust.skipped(trust.EXTRA))
    if extract.provider == "llm" and not v.allows(trust.EXTRACT, {k: getattr(extract, k) for k in ("base_url", "api_key_env", "model")}):
        extract = ExtractConfig()
        lines.append(trust.skipped(trust.EXTRACT))
    if not lines:
        return cfg, lines
    return cfg.model_copy(update={"run": run, "adapters": adapters, "extract": extract}), lines


def default_config() -> dict[str, Any]:
    """What `git nerve init` writes: parse-based extraction and the adapters' default timeouts."""
    return {
        "extract": {"provider": "parse"},
        "adapters": {name: {"timeout": 300} for name in ("claude", "codex", "cursor", "hermes", "aider")},
    }


def write_default(toplevel: str | os.PathLike[str]) -> Path:
    """Write nerve.toml at ``toplevel`` unless one exists (a user's file is never overwritten)."""
    import tomli_w

    path = path_in(toplevel)
    if path.exists() or path.is_symlink():
        return path
    from ..git.destroy import replace_work_tree_file

    replace_work_tree_file(path, tomli_w.dumps(default_config()))
    return path


__all__ = ["FILE", "AdapterDefaults", "ExtractConfig", "NerveConfig", "default_config", "load", "trusted", "write_default"]
