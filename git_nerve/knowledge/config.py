"""What to index (``knowledge.yaml``) and where embeddings come from (``nerve.toml``).

``knowledge.yaml`` sits at the top of the worktree and is committed:

.. code-block:: yaml

    include:            # .gitignore-style globs; absent: every file git tracks
      - "src/**/*.py"
      - "docs/**/*.md"
      - "*.md"          # no slash: matches at any depth, as in .gitignore
    exclude:
      - "tests/fixtures/**"
    max_file_size: 1MB  # larger files are skipped and counted (default 1 MiB)

It is read with PyYAML's safe composer (no object construction); every error
names the line. Without a ``knowledge.yaml`` a manual sync indexes every
tracked text file (the post-commit trigger stays off).

Embeddings are optional, in ``nerve.toml`` at the top of the worktree:

.. code-block:: toml

    [knowledge.embeddings]
    base_url = "http://127.0.0.1:8080/v1"     # any OpenAI-compatible server; /embeddings is appended
    model = "bge-m3"
    api_key_env = "NERVE_EMBEDDINGS_KEY"      # the NAME of the variable holding the key (optional)
    batch_size = 64
    timeout = 30                              # seconds per request

The key itself never appears in a file of ours: only the variable's name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .. import nerve_toml
from ..errors import UsageError

FILE = "knowledge.yaml"
NERVE_TOML = nerve_toml.FILE
DEFAULT_MAX_FILE_SIZE = 1024 * 1024
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?\s*$", re.IGNORECASE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEYS = ("include", "exclude", "max_file_size")


@dataclass(frozen=True)
class KnowledgeConfig:
    """The parsed ``knowledge.yaml`` (or the defaults when there is none)."""

    include: tuple[str, ...] | None = None  #: None: every file
    exclude: tuple[str, ...] = ()
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    exists: bool = False  #: whether knowledge.yaml was there
    _specs: tuple = field(default=(), repr=False, compare=False)

    @property
    def digest(self) -> str:
        """Changes whenever what gets indexed may change."""
        data = [self.include, list(self.exclude), self.max_file_size]
        return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]

    def included(self, path: str) -> bool:
        """Whether ``path`` (relative, with ``/``) is to be indexed."""
        include, exclude = self._specs or _compile(self.include, self.exclude)
        return (include is None or include.match_file(path)) and not (exclude is not None and exclude.match_file(path))

    def as_dict(self) -> dict:
        return {"file": FILE if self.exists else None, "include": list(self.include) if self.include is not None else None,
                "exclude": list(self.exclude), "max_file_size": self.max_file_size}


def _compile(include, exclude):
    import pathspec

    inc = pathspec.GitIgnoreSpec.from_lines(include) if include is not None else None
    exc = pathspec.GitIgnoreSpec.from_lines(exclude) if exclude else None
    return inc, exc


def parse_size(value: str) -> int | None:
    """``1048576``, ``512k``, ``1MB``, ``2 MiB`` -> bytes (None when it is not a size)."""
    m = _SIZE.match(value)
    if not m:
        return None
    return int(float(m[1]) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[m[2].lower()])


def load(toplevel: str | os.PathLike[str]) -> KnowledgeConfig:
    """``<toplevel>/knowledge.yaml``, validated; the defaults when the file does not exist."""
    path = Path(toplevel) / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return KnowledgeConfig()
    except UnicodeDecodeError:
        raise UsageError(f"{FILE} is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse(text)


def _error(node_or_line, message: str) -> UsageError:
    line = node_or_line if isinstance(node_or_line, int) else node_or_line.start_mark.line + 1
    return UsageError(f"{FILE} line {line}: {message}")


def parse(text: str) -> KnowledgeConfig:
    """Validate the text of a ``knowledge.yaml``; :class:`UsageError` naming the line on any problem."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        if exc.problem and exc.context and exc.context_mark and mark and exc.context_mark.line != mark.line:
            what += f" ({exc.context} that starts on line {exc.context_mark.line + 1})"
        raise _error(mark.line + 1 if mark else 1, f"invalid YAML: {what}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{FILE}: invalid YAML: {exc}") from None
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag.endswith(":null")):
        return KnowledgeConfig(exists=True)
    if not isinstance(root, yaml.MappingNode):
        raise _error(root, f"expected a mapping with the keys {', '.join(KEYS)}")
    seen: dict[str, int] = {}
    values: dict = {}
    for key_node, value_node in root.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key not in KEYS:
            shown = f"'{key}'" if key is not None else "a non-text key"
            raise _error(key_node, f"unknown key {shown} (expected {', '.join(KEYS)})")
        if key in seen:
            raise _error(key_node, f"'{key}' is given twice (first on line {seen[key]})")
        seen[key] = key_node.start_mark.line + 1
        if key == "max_file_size":
            size = parse_size(value_node.value) if isinstance(value_node, yaml.ScalarNode) else None
            if not size:
                raise _error(value_node, "max_file_size must be a size in bytes (e.g. 1048576, 512k, 2MB)")
            values[key] = size
        else:
            values[key] = _patterns(key, value_node)
    include = values.get("include")
    exclude = values.get("exclude") or ()
    size = values.get("max_file_size", DEFAULT_MAX_FILE_SIZE)
    return KnowledgeConfig(include, exclude, size, exists=True, _specs=_compile(include, exclude))


def _patterns(key: str, node) -> tuple[str, ...] | None:
    import pathspec
    import yaml

    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
        return None
    if not isinstance(node, yaml.SequenceNode):
        raise _error(node, f'{key} must be a list of glob patterns (e.g. {key}: ["src/**/*.py"])')
    patterns = []
    for item in node.value:
        if not isinstance(item, yaml.ScalarNode) or not item.value.strip() or item.tag.endswith(":null"):
            raise _error(item, f"each {key} entry must be a non-empty glob pattern")
        try:
            pathspec.GitIgnoreSpec.from_lines([item.value])
        except (ValueError, TypeError) as exc:
            raise _error(item, f"invalid pattern {item.value!r}: {exc}") from None
        patterns.append(item.value)
    return tuple(patterns)


# -- nerve.toml [knowledge.embeddings] -----------------------------------------------------------

EMBEDDING_KEYS = ("provider", "base_url", "model", "api_key_env", "batch_size", "timeout")


@dataclass(frozen=True)
class EmbeddingsConfig:
    base_url: str
    model: str
    api_key_env: str | None = None
    batch_size: int = 64
    timeout: float = 30.0
    #: "openai" (an OpenAI-compatible endpoint) or "local" (WordLlama's bundled model, see .local_embeddings)
    provider: str = "openai"

    @property
    def endpoint(self) -> str:
        """The URL posted to: ``<base_url>/embeddings`` (``/v1/embeddings`` for a bare host)."""
        url = self.base_url.rstrip("/")
        if url.endswith("/embeddings"):
            return url
        return url + ("/embeddings" if urlsplit(url).path else "/v1/embeddings")

    @property
    def shown_endpoint(self) -> str:
        """The endpoint for messages: without any ``user:password@`` part."""
        parts = urlsplit(self.endpoint)
        if "@" not in parts.netloc:
            return self.endpoint
        return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()

    def as_dict(self) -> dict:
        if self.provider == "local":
            return {"endpoint": "local", "model": self.model, "api_key_env": None}
        return {"endpoint": self.shown_endpoint, "model": self.model, "api_key_env": self.api_key_env}


def load_embeddings(toplevel: str | os.PathLike[str]) -> EmbeddingsConfig | None:
    """The ``[knowledge.embeddings]`` table of ``<toplevel>/nerve.toml``; None when absent."""
    data = nerve_toml.read(toplevel)
    if data is None:
        return None
    knowledge = data.get("knowledge")
    if knowledge is None:
        return None
    where = f"{NERVE_TOML} [knowledge]"
    if not isinstance(knowledge, dict) or set(knowledge) - {"embeddings"}:
        extra = sorted(set(knowledge) - {"embeddings"}) if isinstance(knowledge, dict) else []
        raise UsageError(f"{where}: only a [knowledge.embeddings] table belongs here" + (f" (found {', '.join(extra)})" if extra else ""))
    table = knowledge.get("embeddings")
    if table is None:
        return None
    where = f"{NERVE_TOML} [knowledge.embeddings]"
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table")
    unknown = sorted(set(table) - set(EMBEDDING_KEYS))
    if unknown:
        hint = " (put the key in an environment variable and give its name as api_key_env)" if any("key" in k for k in unknown) else ""
        raise UsageError(f"{where}: unknown key {', '.join(unknown)} (expected {', '.join(EMBEDDING_KEYS)}){hint}")
    provider = table.get("provider", "openai")
    if provider not in ("openai", "local"):
        raise UsageError(f"{where}: provider must be \"openai\" (an OpenAI-compatible endpoint) or \"local\" (no network)")
    if provider == "local":
        from .local_embeddings import MODEL

        if set(table) - {"provider", "batch_size"}:
            raise UsageError(f"{where}: provider = \"local\" takes only batch_size")
        return EmbeddingsConfig(base_url="local:", model=MODEL, batch_size=_batch(table, where), provider="local")
    base_url, model = table.get("base_url"), table.get("model")
    if not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).netloc:
        raise UsageError(f"{where}: base_url must be an http(s) URL (e.g. http://127.0.0.1:8080/v1)")
    if not isinstance(model, str) or not model.strip():
        raise UsageError(f"{where}: model must be the embedding model's name")
    env = table.get("api_key_env")
    if env is not None and (not isinstance(env, str) or not _ENV_NAME.match(env)):
        raise UsageError(f"{where}: api_key_env must be the NAME of an environment variable (e.g. NERVE_EMBEDDINGS_KEY), not the key")
    batch = _batch(table, where)
    timeout = table.get("timeout", 30.0)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise UsageError(f"{where}: timeout must be a positive number of seconds")
    return EmbeddingsConfig(base_url=base_url, model=model.strip(), api_key_env=env, batch_size=batch, timeout=float(timeout))


def trusted_embeddings(common_dir, toplevel) -> tuple[EmbeddingsConfig | None, str | None]:
    """:func:`load_embeddings`, but an endpoint (which is sent repository files, queries and the value of the
    variable ``api_key_env`` names) only once this user trusted it (issue 35): else None and the ``skipped``
    line. The local model sends nothing: no trust needed."""
    emb = load_embeddings(toplevel)
    if emb is None or emb.provider == "local":
        return emb, None
    from .. import trust

    if trust.verdict(common_dir, toplevel).is_trusted(trust.EMBEDDINGS):
        return emb, None
    return None, trust.skipped(trust.EMBEDDINGS) + " (full-text only meanwhile)"


def _batch(table: dict, where: str) -> int:
    batch = table.get("batch_size", 64)
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 2048:
        raise UsageError(f"{where}: batch_size must be a whole number from 1 to 2048")
    return batch
