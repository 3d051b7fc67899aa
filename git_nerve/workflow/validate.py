"""`git nerve validate`: can these workflows run here?

Checks, one problem per line: nerve.toml parses and its extract provider is
configured (an ``llm`` provider needs its endpoint and its key variable set);
every workflow loads and is well formed; every role has an adapter, the
adapters' binaries are on PATH (HTTP adapters: their key variable is set).
Nothing is run and nothing is contacted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import config as nerve_config
from .adapters.base import adapter_name, adapter_problems
from ..trust import Untrusted
from .loader import builtin_names, load, repo_names
from .spec import Workflow, problems


@dataclass(frozen=True)
class Problem:
    where: str
    message: str

    def line(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Report:
    workflows: list[str] = field(default_factory=list)
    roles: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: what a person should know although nothing stops the run: an adapter no CI suite runs against
    #: the real CLI, an agent CLI with no sandbox or permission layer
    notes: list[Problem] = field(default_factory=list)
    #: adapter -> {"own": its declared variables set here, "general": the general ones set here, "withheld": the
    #: variables set here it does not receive} (names, never values; "own" None: it receives everything)
    environment: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "workflows": self.workflows,
            "roles": self.roles,
            "problems": [{"where": p.where, "message": p.message} for p in self.problems],
            "notes": [{"where": p.where, "message": p.message} for p in self.notes],
            "environment": self.environment,
        }

    def environment_lines(self) -> list[str]:
        """What each adapter receives, one line each (names only)."""
        lines = []
        for name, env in self.environment.items():
            if env["own"] is None:
                continue  # any command (create_exec): it receives the whole environment, as the JSON says
            own = ", ".join(env["own"]) or "none set here"
            withheld = ", ".join(env["withheld"]) or "nothing"
            lines.append(f"env: adapter {name} receives its own ({own}) and the general variables; withheld: {withheld}")
        return lines


def _extract_problems(cfg: nerve_config.ExtractConfig) -> list[str]:
    if cfg.provider == "llm" and cfg.api_key_env and not os.environ.get(cfg.api_key_env):
        return [f"extract provider llm: environment variable {cfg.api_key_env} (the API key) is not set"]
    return []


def default_names(toplevel: str | os.PathLike[str] | None) -> list[str]:
    """The repository's workflows; the built-ins when it has none."""
    return repo_names(toplevel) or builtin_names()


def validate(toplevel: str | os.PathLike[str] | None, names: Sequence[str] | None = None, adapter: str | None = None) -> Report:
    """Check ``names`` (default: the repository's workflows, else the built-ins); with ``adapter``
    (or nerve.toml ``[run] adapter``), every role on that built-in adapter, as `git nerve run --adapter` would."""
    from .runner import on_adapter

    report = Report()
    try:
        cfg = nerve_config.load(toplevel)
    except UsageError as exc:
        report.problems.append(Problem(nerve_config.FILE, exc.message))
        cfg = nerve_config.NerveConfig()
    else:
        report.problems += [Problem(nerve_config.FILE, m) for m in _extract_problems(cfg.extract)]
    for name in names or default_names(toplevel):
        try:
            wf = load(name, toplevel)
        except (UsageError, Untrusted) as exc:  # a repository's file not trusted here: not imported, said so
            report.workflows.append(name)
            report.problems.append(Problem(name, exc.message))
            continue
        report.workflows.append(wf.name if ":" not in name else name)
        try:
            wf = on_adapter(wf, adapter or cfg.run.adapter)
        except UsageError as exc:
            report.problems.append(Problem(name, exc.message))
            continue
        report.problems += _workflow_problems(name, wf, cfg)
        report.notes += [n for n in _adapter_notes(name, wf) if n not in report.notes]
        report.environment.update(_environment(wf))
        report.roles += len(wf.roles) if isinstance(wf, Workflow) else 0
    return report


def _workflow_problems(label: str, wf: Workflow, cfg: nerve_config.NerveConfig) -> list[Problem]:
    found = [Problem(label, p) for p in problems(wf)]
    if found:
        return found
    for role_name, role in wf.roles.items():
        where = f"{label}: role {role_name}"
        adapter = role.adapter
        with_defaults = getattr(adapter, "with_defaults", None)
        if callable(with_defaults):
            adapter = with_defaults(cfg.adapter_defaults(adapter_name(adapter)))
        found += [Problem(where, f"adapter {adapter_name(adapter)}: {m}") for m in adapter_problems(adapter)]
        try:
            extract_cfg = cfg.extract.merged(role.extract)
        except UsageError as exc:
            found.append(Problem(where, exc.message))
            continue
        if role.extract is not None:
            found += [Problem(where, m) for m in _extract_problems(extract_cfg)]
    return found


def _adapter_notes(label: str, wf: Workflow) -> list[Problem]:
    notes: list[Problem] = []
    seen: set[str] = set()
    for role in wf.roles.values():
        name = adapter_name(role.adapter)
        if name in seen:
            continue
        seen.add(name)
        if getattr(role.adapter, "tested", True) is False:
            notes.append(Problem(f"adapter {name}", "untested: no CI suite runs this adapter against the real CLI"))
        sandbox = getattr(role.adapter, "sandbox", None)
        if sandbox == "":
            notes.append(Problem(
                f"adapter {name}",
                "no sandbox or permission layer: the agent can run any command your user can; run it in a container or VM",
            ))
    return notes


def _environment(wf: Workflow) -> dict[str, dict[str, Any]]:
    """What each adapter of ``wf`` receives from this environment (:mod:`.adapters.credentials`)."""
    from .adapters.credentials import GENERAL, GENERAL_PREFIXES, received

    found: dict[str, dict[str, Any]] = {}
    for role in wf.roles.values():
        adapter, name = role.adapter, adapter_name(role.adapter)
        getter = getattr(adapter, "received_env", None)
        names = getter() if callable(getter) else None
        got, withheld = received(os.environ, names)
        general = [k for k in got if k in GENERAL or k.startswith(GENERAL_PREFIXES)]
        own = None if names is None else [k for k in got if k not in general]
        found[name] = {"own": own, "general": general, "withheld": withheld}
    return found


def validate_here(cwd: str | Path | None = None, names: Sequence[str] | None = None, adapter: str | None = None) -> Report:
    """`git nerve validate` from ``cwd``: the checkout's workflows and nerve.toml."""
    from ..paths import discover

    paths = discover(cwd)
    return validate(paths.toplevel, names, adapter)


__all__ = ["Problem", "Report", "default_names", "validate", "validate_here"]
