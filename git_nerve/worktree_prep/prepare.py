"""What a new (or retried) task's worktree is given, in order: the included ignored files, the clone_dirs,
a port block, then the setup command. Called from spawn and retry with one line; never fails them (each
problem is a warning), except that a bad ``[worktree]`` table was refused before anything was made
(:func:`.caps.refuse_over_caps` reads it first)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import nerve_toml
from ..bus import prep as busprep
from ..errors import NerveError
from ..fs import create_file, make_dirs
from ..git import worktrees
from . import clone, include, ports, secrets, setup
from .config import PrepConfig, load

GUARD_MARKER = "copied-files"  # the name hooks/git-nerve-hook tests for


@dataclass
class PrepResult:
    copied: list[str] = field(default_factory=list)
    cloned: list[str] = field(default_factory=list)
    port: int | None = None
    setup_state: str | None = None
    setup_log: str | None = None
    warnings: list[str] = field(default_factory=list)


def prepare(paths, bus, task_id: str, worktree: Path, *, wait: bool = False, run_setup: bool = True,
            cfg: PrepConfig | None = None) -> PrepResult:
    """Copy, clone, allocate the port, start the setup (``run_setup``). ``paths``: the RepoPaths of the
    command (its toplevel finds the main checkout and nerve.toml)."""
    res = PrepResult()
    try:
        cfg = cfg or load(paths.toplevel)
    except NerveError as exc:  # (spawn refused a bad table before it made anything; retry carries on)
        res.warnings.append(f"worktree not prepared: {exc.message}")
        return res
    main = nerve_toml.home(paths.toplevel)
    worktree = Path(worktree)
    if not worktree.is_dir():
        return res
    cfg, file_text = _trusted(paths, cfg, res.warnings)
    pats, more = include.patterns(main, cfg.include, file_text=file_text)
    res.warnings += more
    report = include.copy_files(main, worktree, include.candidates(main, pats, skip_dirs=cfg.clone_dirs))
    res.copied, res.warnings = report.copied, res.warnings + report.warnings
    res.cloned, more = clone.clone_dirs(main, worktree, cfg.clone_dirs)
    res.warnings += more
    _record_copies(bus, task_id, worktree, res.copied)
    res.port = ports.allocate(bus, task_id, cfg)
    if res.port is None:
        res.warnings.append(f"no free port block of {cfg.port_block} in {cfg.port_range[0]}-{cfg.port_range[1] - 1} "
                            "(nerve.toml [worktree] port_range): NERVE_PORT is not set for this task")
    if cfg.setup and run_setup:
        _start_setup(paths, bus, task_id, worktree, cfg, res, wait=wait)
    return res


def _start_setup(paths, bus, task_id: str, worktree: Path, cfg: PrepConfig, res: PrepResult, *, wait: bool) -> None:
    env = ports.env_for(bus.conn, task_id)
    res.setup_log = str(setup.log_path(paths.common_dir, task_id))
    try:
        res.setup_state = setup.start(bus, paths.common_dir, task_id, worktree, cfg.setup, env, wait=wait)
    except NerveError as exc:  # an older setup of the task that could not be stopped: said, never run twice
        res.setup_state = "interrupted"
        res.warnings.append(exc.message)
        return
    if res.setup_state == "failed":
        res.warnings.append(f"setup failed ({' '.join(cfg.setup)}); nothing was lost: its log is {res.setup_log}")


def resume_setup(paths, bus, task_id: str, worktree: Path, *, wait: bool = False, again: bool = False) -> PrepResult | None:
    """The setup of an existing task once more, when it needs it: an interrupted one (its supervisor died before it
    recorded an end: the spawn that started it was killed) runs again; with ``wait`` a running one is waited for
    and the state of one that ended is told;
    with ``again`` (`git worker setup T`) it runs again whatever its state (a running one stopped first). None when
    there is nothing to do (no setup configured, or it ended)."""
    try:
        cfg = load(paths.toplevel)
    except NerveError:
        return None
    worktree = Path(worktree)
    res = PrepResult(setup_log=str(setup.log_path(paths.common_dir, task_id)))
    cfg, _ = _trusted(paths, cfg, res.warnings)  # an untrusted setup is never run again either (issue 35)
    if not cfg.setup or not worktree.is_dir():
        return res if res.warnings else None
    st = setup.state(busprep.get(bus.conn, task_id))
    if again or st == "interrupted":
        _start_setup(paths, bus, task_id, worktree, cfg, res, wait=wait)
        return res
    if st is not None and wait:  # `spawn --wait` again: the setup's end, waited for when it runs
        setup.wait_ended(paths.common_dir, task_id)
        res.setup_state = setup.state(busprep.get(bus.conn, task_id)) or "failed"
        if res.setup_state == "interrupted":  # it died while waited for: run it again, once
            _start_setup(paths, bus, task_id, worktree, cfg, res, wait=wait)
        return res
    return None


def _trusted(paths, cfg: PrepConfig, warnings: list[str]) -> tuple[PrepConfig, str]:
    """``cfg`` without what this user has not trusted (issue 35: one ``skipped ...`` line each), and the
    .worktreeinclude content to use ("" when there is none or it is not trusted)."""
    from dataclasses import replace

    from .. import trust

    v = trust.verdict(paths.common_dir, paths.toplevel)
    for key, name in ((trust.INCLUDE, "include"), (trust.CLONE, "clone_dirs"), (trust.SETUP, "setup")):
        if not v.allows(key, getattr(cfg, name)):
            warnings.append(trust.skipped(key))
            cfg = replace(cfg, **{name: ()})
    shown = v.settings.get(trust.WORKTREEINCLUDE)
    if shown is not None and not v.is_trusted(trust.WORKTREEINCLUDE):
        warnings.append(trust.skipped(trust.WORKTREEINCLUDE))
        return cfg, ""
    return cfg, shown.value if shown is not None else ""


def unprepared(bus, task_id: str) -> bool:
    """True when the task's worktree was never prepared (a spawn killed before it, or a task older than
    this feature): spawning it again does it, like everything else a killed spawn left missing."""
    return busprep.get(bus.conn, task_id) is None


def _record_copies(bus, task_id: str, worktree: Path, copied: list[str]) -> None:
    """The copied paths and salted hashes of their .env values (a retry adds to what an earlier copy made)."""
    row = busprep.get(bus.conn, task_id)
    salt = row.salt if row is not None and row.salt else secrets.new_salt()
    before = row.copied_paths if row is not None else []
    hashes = row.hashes if row is not None else []
    new = secrets.hashes_of(worktree, copied, bytes.fromhex(salt))
    seen = {(h[1], h[2]) for h in hashes}
    with bus.write() as conn:
        busprep.set_values(conn, task_id, copied=sorted(set(before) | set(copied)), salt=salt,
                           secret_hashes=hashes + [h for h in new if (h[1], h[2]) not in seen])
    if before or copied:
        _mark_guarded(worktree)


def _mark_guarded(worktree: Path) -> None:
    """``<worktree's git dir>/nerve/copied-files``: tells the pre-commit shim to start its check here (it
    holds no name and no value; the bus has the rest). Removed with the worktree's git dir."""
    marker = worktrees.git_dir_of(worktree) / "nerve" / GUARD_MARKER
    make_dirs(marker.parent)
    if not marker.exists():
        with os.fdopen(create_file(marker), "w", encoding="utf-8") as fh:  # 0600, as every file under nerve/
            fh.write("git-nerve: this worktree holds copied ignored files; pre-commit keeps them out of git\n")
