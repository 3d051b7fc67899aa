"""Running an agent CLI: one command adapter for every CLI (the process itself: :mod:`.process`).

* argv lists only, never a shell; the prompt reaches the agent on standard
  input or in a private temporary file whose path is an argv element
  (:data:`PROMPT_FILE`), never interpolated into the command line;
* the agent runs in its own session (``start_new_session=True``), so abort
  and timeout kill its whole process group: SIGTERM, then SIGKILL after a
  grace period, and grandchildren go with it;
* its output is tee'd to the round's log (:mod:`..runlog`) while it runs;
* no retries, no fallback: a failure is one of the four adapter errors.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...git import cli as gitcli
from ...git import location
from .. import runlog, sandbox
from . import credentials
from .base import DEFAULT_TIMEOUT, AgentContext
from .usage import Report
from .process import (  # noqa: F401 - re-exported: adapters, wrap.py and benches import them from here
    DEFAULT_GRACE,
    DIAGNOSE_EVERY,
    MAX_STDERR,
    MAX_STDOUT,
    RUN_MARKER,
    Capture,
    Diagnose,
    group_alive,
    kill_group,
    private_dir,
    run_process,
    sweep,
)


#: An argv element equal to this is replaced by the path of the file holding the prompt.
PROMPT_FILE = "{prompt_file}"

# -- the adapter ---------------------------------------------------------------------


ArgvBuilder = Callable[["CommandAdapter"], list[str]]


@dataclass
class Invocation:
    """One run of an agent CLI, as :attr:`CommandAdapter.prepare` may shape it.

    ``tmpdir`` is private to this run (mode 0700, removed afterwards): the
    place for a prompt file, a settings file, a scratch HOME. ``git_dir`` and
    ``common_dir`` are the worktree's: what a sandbox must let ``git commit`` write.
    """

    argv: list[str]
    env: dict[str, str]
    workdir: str
    tmpdir: str
    git_dir: str
    common_dir: str
    ctx: AgentContext
    prompt_file: str | None = None
    #: what the agent may write besides its worktree and its CLI's state directories when it runs in a box
    writable: list[str] = dataclasses.field(default_factory=list)

    def private_text(self, name: str) -> str:
        """The text of file ``name`` the CLI wrote into this run's private directory ("" when it wrote none)."""
        try:
            with open(os.path.join(self.tmpdir, name), encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""


Prepare = Callable[["CommandAdapter", Invocation], None]
#: ``(adapter, stdout, invocation) -> Report``: the CLI's answer and the usage it reported (adapters/usage.py;
#: a file it wrote into the run's private ``tmpdir`` too)
ReportReader = Callable[["CommandAdapter", str, Invocation], Report]
Checks = Callable[["CommandAdapter"], list[str]]


@dataclass(frozen=True)
class CommandAdapter:
    """An agent CLI as an :class:`~.base.AgentFn`.

    ``model``, ``timeout`` and ``extra_args`` left as None take the defaults in
    nerve.toml's ``[adapters.<name>]`` (see :meth:`with_defaults`), else the
    built-in ones (no model flag, 300 s, no extra arguments).

    What makes one CLI safe and reliable to drive lives in its module:
    ``prepare`` (sandbox or permission settings, environment, files in the
    run's private directory), ``diagnose`` (failures the exit status hides),
    ``checks`` (what `git nerve validate` verifies against the installed CLI),
    ``sandbox`` (how the agent is kept inside its worktree, in one line; "" when
    the CLI has no such layer, None when unknown: any command through
    :func:`create_exec`) and ``tested`` (False when no CI suite runs the real CLI).
    """

    name: str
    binary: str
    build: ArgvBuilder
    prompt_via: str = "stdin"  #: "stdin" or "file" (the argv holds PROMPT_FILE)
    model: str | None = None
    timeout: float | None = None
    extra_args: tuple[str, ...] | None = None
    grace: float = DEFAULT_GRACE
    env: Mapping[str, str] | None = None  #: extra environment variables for the agent
    prepare: Prepare | None = None
    diagnose: Diagnose | None = None
    checks: Checks | None = None
    sandbox: str | None = None
    tested: bool = True
    #: the CLI ends the agent itself at its next safe point when the run asks it to stop (its notes hook,
    #: `git nerve notes --hook`): the runner then waits its stop grace before killing the process group
    clean_stop: bool = False
    #: the environment variables this CLI needs besides the general ones (its key, base URL, ...; ``X_*`` a
    #: prefix): it receives no other (:mod:`.credentials`); None: unknown, it receives everything
    env_names: tuple[str, ...] | None = None
    #: the CLI's own state (relative to HOME, e.g. ``.claude``; ``$VAR``: where VAR points): writable inside the
    #: box (:mod:`..sandbox`)
    state_dirs: tuple[str, ...] = ()
    #: reads the CLI's own usage report out of its output (and its answer from around it); None: the CLI
    #: reports none, the round's usage stays unknown
    report: ReportReader | None = None
    #: ``(adapter) -> (stdout so far) -> [Usage]``: a CLI that streams its usage, read while it runs (into
    #: ``ctx.live_usage``) so a budget stops it mid-turn; None: only its final report counts
    live: Callable[[CommandAdapter], Callable[[str], list]] | None = None
    #: the trust key of the CLI's own project settings in the worktree it runs in (``trust.CLAUDE``, ...): the CLI
    #: is not started while they are there and not trusted (:func:`refuse_untrusted`); None: it loads none
    project_settings: str | None = None

    def __post_init__(self) -> None:
        if self.prompt_via not in ("stdin", "file"):
            raise ValueError(f"prompt_via must be 'stdin' or 'file', not {self.prompt_via!r}")
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError("timeout must be positive")

    @property
    def effective_timeout(self) -> float:
        return float(self.timeout) if self.timeout is not None else DEFAULT_TIMEOUT

    def argv(self) -> list[str]:
        return self.build(self)

    def with_defaults(self, defaults: Mapping[str, Any]) -> CommandAdapter:
        """This adapter with nerve.toml's defaults filled in where the workflow set nothing."""
        changes: dict[str, Any] = {}
        if self.model is None and defaults.get("model"):
            changes["model"] = str(defaults["model"])
        if self.timeout is None and defaults.get("timeout") is not None:
            changes["timeout"] = float(defaults["timeout"])
        if self.extra_args is None and defaults.get("extra_args"):
            changes["extra_args"] = tuple(str(a) for a in defaults["extra_args"])
        if self.env_names is not None and defaults.get("pass_env"):
            changes["env_names"] = (*self.env_names, *(str(n) for n in defaults["pass_env"]))
        return dataclasses.replace(self, **changes) if changes else self

    def received_env(self) -> list[str] | None:
        """The variables this adapter declares (:mod:`.credentials`); None: it receives everything."""
        return credentials.declared(self.env_names, self.extra_args)

    def check(self) -> list[str]:
        """What would stop this adapter from running here (`git nerve validate`)."""
        if shutil.which(self.binary) is None:
            return [f"`{self.binary}` is not on PATH"]
        return list(self.checks(self)) if self.checks is not None else []

    def __call__(self, prompt: str, ctx: AgentContext) -> str:
        own = {**getattr(ctx, "env", {}), **(self.env or {})}
        env = gitcli.clean_env({
            "NERVE_TASK_ID": ctx.task_id, "NERVE_ROLE": ctx.role, "NERVE_WORKFLOW": ctx.start.workflow,
            RUN_MARKER: uuid.uuid4().hex, **own,
        })
        env = credentials.only_own(env, self.received_env(), keep=own)
        with private_dir(f"nerve-{self.name}-", env.get(RUN_MARKER, "")) as tmpdir:
            git_dir, common_dir = git_dirs(ctx.workdir)
            inv = Invocation(self.argv(), env, ctx.workdir, tmpdir, git_dir, common_dir, ctx)
            refuse_untrusted(self, inv)
            if self.prompt_via == "file":
                inv.prompt_file = os.path.join(tmpdir, f"nerve-prompt-{ctx.role or 'agent'}.md")
                with open(inv.prompt_file, "w", encoding="utf-8") as fh:
                    fh.write(prompt)
                inv.argv = [inv.prompt_file if a == PROMPT_FILE else a for a in inv.argv]
            if self.prepare is not None:
                self.prepare(self, inv)
            boxed = _box(self, inv)
            started = time.monotonic()
            tee = (runlog.open_tee(common_dir, ctx.task_id, ctx.round, ctx.role, self.name, inv.env, ctx.workdir)
                   if ctx.round else None)
            try:
                stdout, _ = run_process(
                    inv.argv, name=self.name, cwd=ctx.workdir, input_text=prompt if self.prompt_via == "stdin" else None,
                    timeout=self.effective_timeout, abort=ctx.abort, env=inv.env, grace=self.grace,
                    diagnose=_live_reading(self, ctx),
                    tee=tee,
                )
            finally:
                ctx.process_s += time.monotonic() - started
                if tee is not None:
                    tee.close()
                if boxed:
                    sandbox.take_in(common_dir)
            if self.report is None:
                return stdout
            answer, usage = self.report(self, stdout, inv)
            if isinstance(getattr(ctx, "usage", None), list):
                ctx.usage.extend(usage)
            return answer


def refuse_untrusted(adapter: CommandAdapter, inv: Invocation) -> None:
    """Start no CLI that would load project settings this user has not trusted in the worktree it runs in (issue 35:
    an agent or a merged branch may have written their hooks, MCP servers, plugins): AdapterSpawnFailed, one line
    naming them and `git nerve trust`, before anything ran."""
    if adapter.project_settings is None:
        return
    from ... import trust
    from .base import AdapterSpawnFailed

    line = trust.refusal(inv.common_dir, inv.workdir, adapter.project_settings, adapter.name)
    if line is not None:
        raise AdapterSpawnFailed(adapter.name, line)


def _live_reading(adapter: CommandAdapter, ctx: AgentContext) -> Diagnose | None:
    """The adapter's diagnose, also reading the usage a streaming CLI reported so far into ``ctx.live_usage``
    (run_process asks diagnose every DIAGNOSE_EVERY seconds while the agent runs)."""
    if adapter.live is None or not isinstance(getattr(ctx, "live_usage", None), list):
        return adapter.diagnose
    read, diagnose = adapter.live(adapter), adapter.diagnose

    def watch(code: int | None, stdout: str, stderr: str) -> str | None:
        if code is None:
            ctx.live_usage = read(stdout)
        return diagnose(code, stdout, stderr) if diagnose is not None else None

    return watch


def _box(adapter: CommandAdapter, inv: Invocation) -> bool:
    """Put the agent's argv in its box when the run asked for one (``ctx.start.sandbox``); True if it did."""
    start = inv.ctx.start
    kind = getattr(start, "sandbox", "none")
    if kind == "none" or not inv.common_dir:
        return False
    box = sandbox.make_box(
        workdir=inv.workdir, git_dir=inv.git_dir, common_dir=inv.common_dir, branch=start.branch,
        task_id=inv.ctx.task_id, tmp_parent=inv.tmpdir, env=inv.env, network=getattr(start, "network", True),
        hide=getattr(start, "hide", ()), state_dirs=adapter.state_dirs, writable=inv.writable,
    )
    inv.argv, inv.env = sandbox.wrap(kind, box, inv.argv, inv.env)
    return True


def git_dirs(workdir: str) -> tuple[str, str]:
    """The worktree's own git dir and the repository's common dir (absolute); empty outside a repository."""
    if not os.path.isdir(workdir):
        return "", ""  # run_process says the working directory is missing
    dirs = location.absolute_git_dir_and_common_dir(workdir)
    if dirs is None:
        return "", ""
    return dirs[0], os.path.normpath(os.path.join(workdir, dirs[1]))


def options(own: Sequence[tuple[str, str | None]], extra: Sequence[str] | None) -> list[str]:
    """An adapter's own ``(flag, value or None)`` options, less every flag ``extra`` sets itself.

    ``extra_args`` can override any flag an adapter sets: ``--sandbox
    read-only`` in ``extra_args`` replaces the adapter's ``--sandbox
    workspace-write`` (both spellings, ``--flag value`` and ``--flag=value``).
    The caller appends ``extra`` itself.
    """
    overridden = {a.split("=", 1)[0] for a in (extra or ()) if a.startswith("-")}
    argv: list[str] = []
    for flag, value in own:
        if flag in overridden:
            continue
        argv.append(flag)
        if value is not None:
            argv.append(value)
    return argv


def model_flag(flag: str) -> Callable[[str | None], list[str]]:
    return lambda model: [flag, model] if model else []


def extras(adapter: CommandAdapter) -> list[str]:
    return list(adapter.extra_args or ())


@dataclass(frozen=True)
class Probe:
    """What one run of an installed CLI printed (``--version``, ``--help``), for `git nerve validate`."""

    ok: bool  #: it ran (whatever its exit status)
    stdout: str = ""
    stderr: str = ""
    error: str = ""  #: why it did not run, in one line naming the command
    code: int | None = None  #: its exit status

    @property
    def text(self) -> str:
        return self.stdout + self.stderr


def probe(argv: Sequence[str], *, timeout: float = 60, env: Mapping[str, str] | None = None) -> Probe:
    """Run an installed CLI once to see what it is (no stdin, no shell, bounded in time); never raises."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              env=None if env is None else {**os.environ, **env})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(False, error=f"`{' '.join(argv)}` did not run: {exc}")
    return Probe(True, proc.stdout or "", proc.stderr or "", code=proc.returncode)


def adapter_factory(default_name: str, default_binary: str | None, **fixed: Any) -> Callable[..., CommandAdapter]:
    """The ``create_NAME`` of one agent CLI (one for all of them): ``fixed`` is what makes that CLI safe and
    reliable to drive (``build``, ``prompt_via``, ``prepare``, ``diagnose``, ``checks``, ``sandbox``, ...);
    the keyword arguments of the function it returns are what nerve.toml's ``[adapters.NAME]`` tunes. A None
    ``default_binary`` is this Python interpreter (git-nerve's own agent)."""

    def create(
        *,
        model: str | None = None,
        timeout: float | None = None,
        extra_args: Sequence[str] | None = None,
        binary: str | None = default_binary,
        name: str = default_name,
        grace: float = DEFAULT_GRACE,
        env: Mapping[str, str] | None = None,
    ) -> CommandAdapter:
        import sys

        return CommandAdapter(
            name=name, binary=binary or sys.executable, model=model, timeout=timeout,
            extra_args=tuple(extra_args) if extra_args is not None else None, grace=grace, env=env, **fixed,
        )

    create.__name__ = create.__qualname__ = f"create_{default_name}"
    create.__doc__ = (f"A {default_name} adapter; None means nerve.toml's [adapters.{default_name}] default, "
                      "else the built-in one (timeout 300 s).")
    return create


def create_exec(
    argv: Sequence[str],
    *,
    name: str | None = None,
    prompt_via: str = "stdin",
    timeout: float | None = None,
    extra_args: Sequence[str] | None = None,
    grace: float = DEFAULT_GRACE,
    env: Mapping[str, str] | None = None,
) -> CommandAdapter:
    """Any program as an agent: ``argv`` (binary first) gets the prompt on stdin,
    or with ``prompt_via="file"`` in a file whose path replaces the argv element
    :data:`PROMPT_FILE`. ``extra_args`` are appended."""
    base = [str(a) for a in argv]
    if not base:
        raise ValueError("create_exec needs a command: a non-empty argv list")
    if prompt_via == "file" and PROMPT_FILE not in base:
        raise ValueError(f"prompt_via='file' needs the argv element {PROMPT_FILE!r} where the prompt file's path goes")
    return CommandAdapter(
        name=name or os.path.basename(base[0]),
        binary=base[0],
        build=lambda a: [*base, *extras(a)],
        prompt_via=prompt_via,
        timeout=timeout,
        extra_args=tuple(extra_args) if extra_args is not None else None,
        grace=grace,
        env=env,
    )


__all__ = [
    "Probe",
    "adapter_factory",
    "probe",
    "PROMPT_FILE", "Capture", "CommandAdapter", "Diagnose", "Invocation", "create_exec", "group_alive", "kill_group",
    "options", "run_process",
]
