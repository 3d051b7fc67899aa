"""Reading git configuration through git itself.

pygit2 reads config files directly and so misses ``git -c key=value`` and
``GIT_CONFIG_*`` overrides; asking git does not. One ``git config --list``
per command, parsed once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

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


def set_value(cwd: str | os.PathLike[str], key: str, value: str) -> None:
    cli.run(["config", key, value], cwd=cwd)
