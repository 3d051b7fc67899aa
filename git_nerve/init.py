"""`git nerve init`: make a repository ready for many agents.

Creates ``<git-common-dir>/nerve/`` and the bus, installs the hooks, pins the
integration branch in git config (so it cannot drift with whatever is checked
out later) and writes a default ``nerve.toml`` at the top of the worktree
when there is none. Running it again changes nothing that is already set up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .bus.connection import Bus
from .git import config as gitconfig
from .paths import RepoPaths, discover


@dataclass
class InitReport:
    nerve_dir: Path
    bus: Path
    integration: str | None
    integration_pinned: bool = False
    hooks: str = "not installed"
    nerve_toml: Path | None = None
    nerve_toml_created: bool = False
    nerve_toml_tracked: bool = False
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "nerve_dir": str(self.nerve_dir), "bus": str(self.bus), "integration": self.integration,
            "integration_pinned": self.integration_pinned, "hooks": self.hooks,
            "nerve_toml": str(self.nerve_toml) if self.nerve_toml else None, "nerve_toml_created": self.nerve_toml_created,
            "nerve_toml_tracked": self.nerve_toml_tracked,
            "warnings": self.warnings,
        }


def init(cwd=None) -> InitReport:
    paths: RepoPaths = discover(cwd)
    where = paths.toplevel or paths.common_dir
    cfg = gitconfig.read(where)
    gitconfig.refuse_bare(cfg, paths.toplevel, "run `git nerve init`")  # before anything is written
    gitconfig.refuse_unsupported_object_format(cfg)
    _refuse_shared_hooks(paths)
    Bus(paths.bus_path).close()  # creates and migrates
    report = InitReport(nerve_dir=paths.nerve_dir, bus=paths.bus_path, integration=None)
    from .worker.settings import load as load_settings

    try:
        settings = load_settings(paths, cfg)
        integration = settings.integration_branch
        if not cfg.get("nerve.integration"):
            integration = _integration_from_remote(where, settings, report) or integration
        report.integration = integration or settings.integration
        if not cfg.get("nerve.integration"):
            gitconfig.set_value(where, "nerve.integration", report.integration)
            report.integration_pinned = True
        if settings.remote:
            from .git import remote as gitremote

            relative = gitremote.relative_url_warning(where, settings.remote)
            if relative:
                report.warnings.append(relative)
    except Exception as exc:  # detached HEAD and no remote: say so, keep going
        report.warnings.append(str(exc))
    try:
        from .hooks import install as hooks_install

        report.hooks = "already installed" if hooks_install.installed(paths) else "installed"
        if report.hooks == "installed":
            installed = hooks_install.install(paths)
            report.warnings += [c.message or f"hook {c.name} not installed" for c in installed.conflicts]
    except Exception as exc:
        report.hooks = "failed"
        report.warnings.append(f"could not install hooks: {exc}")
    if paths.toplevel is not None:
        from . import nerve_toml
        from .git import tracked
        from .workflow import config as wf_config

        home = nerve_toml.home(paths.toplevel)  # one file for every worktree
        target = nerve_toml.path_in(home)
        report.nerve_toml = target
        if not target.exists():
            wf_config.write_default(home)
            report.nerve_toml_created = True
            from . import trust

            trust.trust_written(paths.common_dir, home)  # what init wrote runs without a trust step
        report.nerve_toml_tracked = tracked.is_tracked(home, nerve_toml.FILE)
    return report


def _refuse_shared_hooks(paths: RepoPaths) -> None:
    """UsageError, before anything is written, when the hooks would have to go into a hooks directory other
    repositories may share, or one git tracks (a team's committed ``.githooks``): git-nerve never writes there;
    a repository without its hooks records no commits."""
    from .errors import UsageError
    from .hooks import install as hooks_install

    if hooks_install.forward_dir(paths) is not None or hooks_install.installed(paths):
        return
    why = hooks_install.not_this_repositorys(paths) or hooks_install.tracked_hooks(paths)
    if why:
        raise UsageError(f"nothing was set up: {why}")


def _integration_from_remote(where: Path, settings, report: InitReport) -> str | None:
    """With a remote but no local record of its default branch (no ``refs/remotes/<remote>/HEAD``: a clone
    made with --no-checkout or by hand, a remote added later), ask the remote instead of pinning whatever
    branch is checked out here; when it cannot be asked, say which branch was pinned and how to change it."""
    from .git import remote as gitremote

    remote = settings.remote
    if not remote or gitremote.default_branch(where, remote):
        return None
    branch, why = gitremote.ask_default_branch(where, remote)
    if branch:
        return branch
    if settings.integration_branch:
        report.warnings.append(
            f"could not ask {remote} for its default branch ({why}); pinned the current branch "
            f"{settings.integration_branch!r} as the integration branch (change it: git config nerve.integration <branch>)")
    return None
