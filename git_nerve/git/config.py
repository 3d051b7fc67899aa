"""Reading git configuration through git itself.

pygit2 reads config files directly and so misses ``git -c key=value`` and
``GIT_CONFIG_*`` overrides; asking git does not. One ``git config --list``
per command, parsed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from collections.abc import Mapping

from . import cli


@dataclass
class GitConfig:
    values: dict[str, list[str]] = field(default_factory=dict)

    def get(self, key: str, default: str | None = None) -> str | None:
        vals = self.values.get(_norm(key))
        return vals[-1] if vals else default

    def get_all(self, key: str) -> list[str]:
        return list(self.values.get(_norm(key), []))

    def keys_with_prefix(self, prefix: str) -> list[str]:
        p = _norm(prefix)
        return [k for k in self.values if k.startswith(p)]


def _norm(key: str) -> str:
    # section and variable names are case-insensitive; a subsection is not
    section, _, rest = key.partition(".")
    if "." in rest:
        sub, _, var = rest.rpartition(".")
        return f"{section.lower()}.{sub}.{var.lower()}"
    return f"{section.lower()}.{rest.lower()}"


def read(cwd: str | os.PathLike[str]) -> GitConfig:
    proc = cli.run(["config", "-z", "--list"], cwd=cwd, check=False)
    cfg = GitConfig()
    if proc.returncode != 0:
        return cfg
    for entry in proc.stdout.split("\0"):
        if not entry:
            continue
        key, _, value = entry.partition("\n")
        cfg.values.setdefault(_norm(key), []).append(value)
    return cfg


def _scope(scope: str | None) -> list[str]:
    return [f"--{scope}"] if scope else []


def set_value(cwd: str | os.PathLike[str], key: str, value: str, *, scope: str | None = None,
              env: Mapping[str, str] | None = None) -> None:
    """``git config [--SCOPE] KEY VALUE`` (GitError when git fails)."""
    cli.run(["config", *_scope(scope), key, value], cwd=cwd, env=env)


def get_value(cwd, key: str, *, scope: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """``git config [--SCOPE] --get KEY``: the value (trailing newline dropped), or None when unset."""
    proc = cli.run(["config", *_scope(scope), "--get", key], cwd=cwd, env=env, check=False)
    return proc.stdout.rstrip("\n") if proc.returncode == 0 else None


def unset(cwd, key: str, *, scope: str | None = None, env: Mapping[str, str] | None = None) -> bool:
    """``git config [--SCOPE] --unset KEY``; True when it did."""
    return cli.run(["config", *_scope(scope), "--unset", key], cwd=cwd, env=env, check=False).returncode == 0


def get_all_with_scope(cwd, key: str, *, env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``git config --show-scope --get-all KEY``: (scope, value) of every setting, in the order git reads them."""
    proc = cli.run(["config", "--show-scope", "--get-all", key], cwd=cwd, env=env, check=False)
    return [(scope, value) for scope, _, value in (line.partition("\t") for line in proc.stdout.splitlines())]


#: object formats pygit2 (libgit2 built without experimental SHA-256) can read
SUPPORTED_OBJECT_FORMATS = ("sha1",)


def refuse_bare(cfg: GitConfig, toplevel, what: str) -> None:
    """UsageError (exit 2) in a bare repository (a remote: no checkout to work in, no branch to integrate into)."""
    from ..errors import UsageError

    if toplevel is None and (cfg.get("core.bare") or "").lower() in ("true", "yes", "on", "1"):
        raise UsageError(f"this is a bare repository (a remote); {what} in a clone of it (git clone <this path>); "
                         "nothing was set up")


def refuse_unsupported_object_format(cfg: GitConfig) -> None:
    """UsageError (exit 2) for a repository whose objects git-nerve cannot read (``git init
    --object-format=sha256``): pygit2's libgit2 has no SHA-256, so done's rebase and merge would fail."""
    from ..errors import UsageError

    fmt = (cfg.get("extensions.objectFormat") or "sha1").lower()
    if fmt not in SUPPORTED_OBJECT_FORMATS:
        raise UsageError(f"this repository uses {fmt} object names, which git-nerve does not support yet "
                         "(its libgit2 reads only sha1 repositories); nothing was set up")
