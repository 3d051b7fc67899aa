"""Running a workflow on a task: `git nerve run`.

The loop: ask the steering hook (``between_rounds``) whether to stop, ask the
moderator for the next role (or the end), enforce the round limit, run the
role's adapter in the task's worktree, extract its typed meta, and append
the result to the task's thread as a round:

* role: the role's name; content: the agent's raw output (or the error);
* metadata: the extracted meta plus the exit facts ``adapter``,
  ``duration_s``, ``workflow`` and, on failure, ``error`` (the adapter error
  kind), ``exit_code``, ``timeout_s`` or ``extract_error``.

While an agent runs (on a worker thread) this thread records a heartbeat
every ``heartbeat_interval`` seconds and calls ``on_tick``, which may return
a reason to stop the agent. Ctrl-C (and SIGTERM) abort the running agent,
kill its process group and record an ``aborted`` round.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import clock
from ..bus import messages, rounds
from ..bus.connection import Bus
from ..errors import ExitCode, NerveError, UsageError
from ..worker.heartbeat import record as record_heartbeat
from .adapters.base import (
    AdapterAborted,
    AdapterError,
    AgentContext,
    StartFrame,
    adapter_name,
)
from . import ground
from .config import NerveConfig
from .extract import ExtractError, extract, schema_hint
from .spec import End, Role, Thread, Workflow, problems

log = logging.getLogger("git_nerve.workflow")

#: ``hook(task_id) -> reason to stop, or None``: the steering queue's drain plugs in here.
StopHook = Callable[[str], "str | None"]
EventHook = Callable[[str, dict], None]

#: Seconds to wait for an aborted adapter to return before giving up on it.
ABORT_WAIT = 30.0

#: Seconds a drained ``stop`` leaves the agent to end itself at its next safe point (its CLI's notes hook
#: answers the stop request) before its process group is killed.
STOP_GRACE = 5.0

EXIT_CODES = {
    "completed": ExitCode.OK,
    "failed": ExitCode.FAILURE,
    "round_limit": ExitCode.FAILURE,
    "stopped": ExitCode.FAILURE,
    "error": ExitCode.FAILURE,
    "interrupted": ExitCode.INTERRUPTED,
}


@dataclass(frozen=True)
class RoundReport:
    round: int
    role: str
    adapter: str
    duration_s: float
    status: str  #: "ok", "extract_error", or the adapter error kind
    detail: str = ""
    #: the runner's own time around the agent's process: prompt and prompt file, spawning the CLI,
    #: git before and after (reconciliation), extraction, the thread append
    overhead_s: float = 0.0


@dataclass
class RunResult:
    task_id: str
    workflow: str
    outcome: str = "error"  #: completed | failed | round_limit | stopped | interrupted | error
    reason: str = ""
    first_round: int = 1
    rounds: list[RoundReport] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def exit_code(self) -> int:
        return int(EXIT_CODES[self.outcome])

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["exit_code"] = self.exit_code
        return data

    def summary(self) -> list[str]:
        lines = [f"workflow {self.workflow} on {self.task_id}: {self.outcome} ({self.reason})" if self.reason
                 else f"workflow {self.workflow} on {self.task_id}: {self.outcome}"]
        for r in self.rounds:
            said = r.adapter
            if r.detail and r.status != "ok":
                said = r.detail if r.detail.startswith(f"{r.adapter}: ") else f"{r.adapter}: {r.detail}"
            lines.append(f"  #{r.round} {r.role:<10} {r.status:<14} {r.duration_s:7.1f}s  {said}")
        lines.append(f"{len(self.rounds)} agent run(s) in {self.duration_s:.1f}s; read them with `git nerve thread {self.task_id}`")
        return lines


def footer(workflow: Workflow, role_name: str, role: Role, start: StartFrame) -> str:
    """What every prompt ends with: where the agent is, where its history is, what it must report."""
    branch = f" (branch {start.branch})" if start.branch else ""
    return "\n".join([
        "",
        "---",
        f"Workflow `{workflow.name}`, role `{role_name}`, task `{start.task_id}`.",
        f"Your working directory is the task's own worktree{branch}.",
        (
            "This prompt does not include the task's history: run `git nerve thread` in your working directory "
            "to read it (`git nerve thread --before N` pages further back)."
        ),
        "When you are done, end your reply with a fenced ```json block holding one object with these fields:",
        schema_hint(role.meta),
    ])


class _Interrupt(BaseException):
    """SIGTERM, turned into the same clean stop as Ctrl-C."""


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Interrupt()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Runner:
    def __init__(
        self,
        workflow: Workflow,
        *,
        bus: Bus,
        start: StartFrame,
        config: NerveConfig | None = None,
        max_rounds: int | None = None,
        heartbeat_interval: float = 15.0,
        between_rounds: StopHook | None = None,
        on_tick: StopHook | None = None,
        on_event: EventHook | None = None,
        stop_grace: float = STOP_GRACE,
    ):
        if max_rounds is not None and max_rounds < 1:
            raise UsageError("--max-rounds must be at least 1")
        if heartbeat_interval <= 0:
            raise UsageError("the heartbeat interval must be positive")
        self.workflow = workflow
        self.bus = bus
        self.start = start
        self.config = config or NerveConfig()
        self.max_rounds = max_rounds or workflow.max_rounds
        self.interval = heartbeat_interval
        self.between_rounds = between_rounds
        self.on_tick = on_tick
        self.on_event = on_event or (lambda kind, data: None)
        self.stop_grace = max(0.0, stop_grace)
        #: how the last stop ended the agent (None: no stop reached a running agent)
        self._stop_how: str | None = None
        self._stop_file: Path | None = None  #: the stop request written for the running agent
        self._stop_path: Path | None = None  #: where it goes: <git-dir of the worktree>/nerve/stop-request
        self.result = RunResult(start.task_id, workflow.name, first_round=start.first_round)
        self._beat_warned = False
        #: each role's extract settings: nerve.toml's [extract], then the role's own (checked before anything runs)
        self.extract_config = {}
        for name, role in workflow.roles.items():
            try:
                self.extract_config[name] = self.config.extract.merged(role.extract)
            except UsageError as exc:
                raise UsageError(f"role {name}: {exc.message}") from None

    # -- the thread ------------------------------------------------------------------

    def thread(self) -> Thread:
        conn = self.bus.conn
        last = rounds.last_round(conn, self.start.task_id)
        numbers = list(range(self.start.first_round, last + 1))
        return Thread(self.start, tuple(rounds.load(conn, self.start.task_id, numbers)))

    def _append(self, role: str, content: str, metadata: dict[str, Any]) -> int:
        with self.bus.write() as conn:
            return rounds.append(conn, self.start.task_id, role=role, content=content, metadata=metadata, ts=clock.now())

    def _publish(self, kind: str, payload: dict[str, Any]) -> None:
        with self.bus.write() as conn:
            messages.publish(conn, self.start.task_id, kind, payload, clock.now())

    def _beat(self, status: str) -> None:
        try:
            record_heartbeat(self.bus, self.start.task_id, status=status, source="workflow")
        except NerveError as exc:  # e.g. the task was removed meanwhile: keep the agent running, say it once
            if not self._beat_warned:
                log.warning("heartbeat for %s failed: %s", self.start.task_id, exc.message)
                self._beat_warned = True

    # -- the loop ------------------------------------------------------------------------

    def _git(self, fn, *args, **kw):
        """A git observation that must not end the run: None when git cannot answer."""
        try:
            return fn(*args, **kw)
        except NerveError as exc:
            log.warning("could not read the task's branch: %s", exc.message)
            return None

    def run(self) -> RunResult:
        started = time.monotonic()
        self._start_tip = self._git(ground.tip, self.start.workdir, self.start.branch)
        self._publish("workflow_start", {"workflow": self.workflow.name, "max_rounds": self.max_rounds})
        self.on_event("start", {"workflow": self.workflow.name, "task": self.start.task_id, "max_rounds": self.max_rounds})
        try:
            with _sigterm_as_interrupt():
                self._loop()
        except (KeyboardInterrupt, _Interrupt):
            self._finish("interrupted", "interrupted between agent runs")
        finally:
            self.result.duration_s = round(time.monotonic() - started, 1)
        if self.result.outcome == "completed":
            self._check_completed()
        self._settle_notes()
        if self.result.outcome == "stopped":
            self._keep_stopped_work()
        self._beat(self._final_status())
        try:
            self._publish("workflow_end", {
                "workflow": self.workflow.name, "outcome": self.result.outcome, "reason": self.result.reason,
                "rounds": [r.round for r in self.result.rounds],
            })
        except NerveError as exc:
            log.warning("could not record the end of the run: %s", exc.message)
        self.on_event("end", self.result.as_dict())
        return self.result

    def _settle_notes(self) -> None:
        """Notes delivered to the agents that a commit since has acted on (see steer.delivery)."""
        from ..steer import delivery  # the one steer entry point the runner uses besides its stop hook

        try:
            delivery.settle(self.bus, self.start.task_id)
        except NerveError as exc:
            log.warning("could not record notes acted on: %s", exc.message)

    def _keep_stopped_work(self) -> None:
        """A stopped run loses nothing: uncommitted work is kept under the task's archive ref (the worktree
        is left as it is), and the outbox says how the agent ended and where its work is."""
        from ..steer import delivery
        from ..worker import archive

        kept = None
        try:
            kept = archive.keep_uncommitted(self.start.workdir, Path(self.start.workdir), self.start.task_id,
                                            "uncommitted work when its run was stopped")
        except NerveError as exc:
            log.warning("could not archive the uncommitted work of %s: %s", self.start.task_id, exc.message)
            where = f"its uncommitted work could NOT be archived ({exc.message}); it is still in {self.start.workdir}"
        else:
            if kept is None:
                where = "nothing uncommitted was left"
            else:
                ref, sha, files = kept
                where = (f"uncommitted work ({len(files)} file(s): {', '.join(files[:5])}) kept under {ref} "
                         f"({sha[:12]}) and left in the worktree")
        how = self._stop_how
        if how is None:
            reader = delivery.stop_reached(self.bus.conn, self.start.task_id)
            how = f"the agent ended at its next safe point ({reader} answered the stop)" if reader else None
        if how is None and kept is None and "NOT" not in where:
            return  # stopped between agents with nothing uncommitted: the stop's own outbox line says it all
        how = how or "the run stopped before its next agent started"
        try:
            delivery.stop_obeyed(self.bus, self.start.task_id, how=f"{how}; {where}")
        except NerveError as exc:
            log.warning("could not record the stop in the outbox: %s", exc.message)
        if kept is not None or "NOT" in where:  # where the work is belongs in the run's own answer
            self.result.reason = f"{self.result.reason}; {where}" if self.result.reason else where

    def _request_stop(self, reason: str | None) -> None:
        """Ask the running agent's CLI to end itself: its notes hook reads this file at the next safe point
        (None: remove a request left behind)."""
        from ..paths import discover, stop_request_path

        try:
            if self._stop_path is None:
                self._stop_path = stop_request_path(discover(self.start.workdir).git_dir)
            path = self._stop_path
            if reason is None:
                path.unlink(missing_ok=True)
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(reason + "\n", encoding="utf-8")
            self._stop_file = path
        except (NerveError, OSError) as exc:
            if reason is not None:
                log.warning("could not ask the agent to stop (%s); it is killed after the grace period", exc)

    def _clear_stop(self) -> None:
        if self._stop_file is not None:
            try:
                self._stop_file.unlink(missing_ok=True)
            except OSError:
                pass
            self._stop_file = None

    def _finish(self, outcome: str, reason: str) -> None:
        self.result.outcome, self.result.reason = outcome, reason

    def _check_completed(self) -> None:
        """A run is completed only when git agrees: the branch moved (if a role must commit) and the worktree is clean."""
        must_commit = any(r.commits for r in self.workflow.roles.values())
        obs = self._git(ground.observe, self.start.workdir, self.start.branch, self._start_tip)
        if obs is None:
            return self._finish("failed", "the moderator ended the run, but git could not confirm the work")
        if must_commit and not obs.commits:
            return self._finish("failed", f"the moderator ended the run, but {self.start.branch or 'HEAD'} did not move: no commit was made")
        if obs.dirty:
            why = ground.verdict(obs, must_commit=False, branch=self.start.branch)
            return self._finish("failed", f"the moderator ended the run, but {why}")

    def _final_status(self) -> str:
        """The heartbeat status a run leaves behind: what really happened, not "coder running"."""
        status = f"{self.workflow.name}: {self.result.outcome}"
        if self.result.outcome != "completed" and self.result.reason:
            status += f" ({self.result.reason})"
        return status if len(status) <= 300 else status[:297] + "..."

    def _loop(self) -> None:
        while True:
            if self.between_rounds is not None:
                reason = self.between_rounds(self.start.task_id)
                if reason:
                    return self._finish("stopped", reason)
            try:
                decision = self.workflow.moderator(self.thread())
            except Exception as exc:
                return self._finish("error", f"the moderator raised {type(exc).__name__}: {exc}")
            if isinstance(decision, End):
                return self._finish("completed" if decision.ok else "failed", decision.reason)
            role = self.workflow.roles.get(decision) if isinstance(decision, str) else None
            if role is None:
                return self._finish("error", f"the moderator chose {decision!r}, which is not a role of {self.workflow.name}")
            if len(self.result.rounds) >= self.max_rounds:
                return self._finish(
                    "round_limit", f"round limit reached ({self.max_rounds} agent runs); the moderator wanted {decision} next"
                )
            if not self._run_role(decision, role):
                return

    def _configured(self, adapter: Any) -> Any:
        with_defaults = getattr(adapter, "with_defaults", None)
        if callable(with_defaults):
            return with_defaults(self.config.adapter_defaults(adapter_name(adapter)))
        return adapter

    def _run_role(self, name: str, role: Role) -> bool:
        """Run one role and record its round; False when the run must end (interrupted or stopped)."""
        began = time.monotonic()
        adapter = self._configured(role.adapter)
        aname = adapter_name(adapter)
        so_far = self.thread().rounds
        try:
            prompt = role.render(self.start, so_far) + "\n" + footer(self.workflow, name, role, self.start)
        except Exception as exc:
            self._finish("error", f"the prompt of role {name} raised {type(exc).__name__}: {exc}")
            return False
        abort = threading.Event()
        ctx = AgentContext(
            self.start, so_far, self.start.workdir, abort, self.start.task_id, name,
            test_command=self.start.test_command or self.config.run.test_command or "",
            round=rounds.last_round(self.bus.conn, self.start.task_id) + 1,
        )
        extract_cfg = self.extract_config[name]

        def work() -> Any:
            raw = adapter(prompt, ctx)
            if not isinstance(raw, str):
                raise TypeError(f"adapter {aname} returned {type(raw).__name__}, not str")
            try:
                got = extract(raw, role.meta, extract_cfg, reprompt=lambda p: adapter(p, ctx), abort=abort)
            except ExtractError as exc:
                return raw, None, exc
            return raw, got, None

        self.on_event("role_start", {"role": name, "adapter": aname})
        before = self._git(ground.tip, self.start.workdir, self.start.branch)
        t0 = time.monotonic()
        self._request_stop(None)  # a stop request a killed run left behind must not end this agent
        try:
            outcome, stop_reason, interrupted = self._supervise(
                work, abort, f"{self.workflow.name}: {name} running ({aname})", aname,
                grace=self.stop_grace if getattr(adapter, "clean_stop", False) else 0.0,
            )
        finally:
            self._clear_stop()
        agent_s = time.monotonic() - t0
        duration = round(agent_s, 1)
        facts: dict[str, Any] = {"adapter": aname, "duration_s": duration, "workflow": self.workflow.name}
        value, exc = outcome
        if exc is None:
            raw, got, extract_error = value
            if got is not None:
                metadata = {**got.meta.model_dump(mode="json"), **facts}
                if got.retries:
                    metadata["extract_retries"] = got.retries
                if got.via != "parse":
                    metadata["extract_via"] = got.via
                status, detail = "ok", ""
            else:
                metadata = {**facts, "extract_error": extract_error.message}
                status, detail = "extract_error", extract_error.message
            content = raw
        elif isinstance(exc, AdapterError):
            if isinstance(exc, AdapterAborted):
                why = f"stopped: {stop_reason}" if stop_reason else f"interrupted ({interrupted})" if interrupted else "aborted"
                content = f"{exc.message} ({why})"
            else:
                content = exc.message
            metadata = {**facts, **exc.facts()}
            status, detail = exc.kind, exc.message
        else:
            content = f"{aname}: the adapter raised {type(exc).__name__}: {exc}"
            metadata = {**facts, "error": "exception"}
            status, detail = "exception", content
        if stop_reason and status != "ok" and not interrupted:
            # a stop the agent obeyed (or was killed for): the round was stopped, not failed
            metadata["stopped_how"] = self._stop_how
            status, detail = "stopped", f"stopped: {stop_reason}"
        status, detail = self._reconcile(name, role, before, metadata, status, detail)
        number = self._append(name, content, metadata)
        # the runner's time: everything but the agent's own process (or, for an in-process adapter, its call)
        overhead = round(time.monotonic() - began - (ctx.process_s or agent_s), 4)
        report = RoundReport(number, name, aname, duration, status, detail, overhead)
        self.result.rounds.append(report)
        self.on_event("role_end", asdict(report))
        if interrupted:
            self._finish("interrupted", f"{interrupted} while {name} was running; the agent was stopped")
            return False
        if stop_reason:
            self._finish("stopped", stop_reason)
            return False
        return True

    def _reconcile(
        self, name: str, role: Role, before: str | None, metadata: dict[str, Any], status: str, detail: str
    ) -> tuple[str, str]:
        """What git says about the round: its commits are recorded (and named in ``metadata``);
        a missing commit or uncommitted changes fail it, whatever the agent reported."""
        obs = self._git(ground.observe, self.start.workdir, self.start.branch, before)
        if obs is None:
            return status, detail
        metadata["head"] = obs.tip
        metadata["commits"] = obs.commits
        if obs.rewritten:
            metadata["rewritten"] = True
        recorded = self._git(ground.record_commits, self.bus, self.start.workdir, self.start.task_id, obs.commits, "workflow")
        if recorded:
            self._beat(f"{self.workflow.name}: {name} committed {recorded[-1][:12]}")
        if obs.commits:
            self._settle_notes()
        problem = ground.verdict(obs, must_commit=role.commits, branch=self.start.branch)
        if problem is None:
            return status, detail
        metadata["git_error"] = problem
        if status != "ok":  # the adapter's own failure comes first; git's finding is kept beside it
            return status, detail
        claimed = metadata.get("files_changed")
        said = f" (the agent reported files_changed={claimed})" if claimed else ""
        return "git_error", f"{name}: {problem}{said}"

    def _supervise(
        self, work: Callable[[], Any], abort: threading.Event, status: str, aname: str, grace: float = 0.0
    ) -> tuple[tuple[Any, BaseException | None], str | None, str | None]:
        """Run ``work`` on a worker thread; heartbeat and tick here until it ends."""
        box: dict[str, Any] = {}
        finished = threading.Event()  # not Thread.join/is_alive: an interrupted join can misreport the thread as ended

        def target() -> None:
            try:
                box["value"] = work()
            except BaseException as exc:  # handed back to this thread
                box["exc"] = exc
            finally:
                finished.set()

        worker = threading.Thread(target=target, daemon=True, name="nerve-agent")
        stop_reason: str | None = None
        interrupted: str | None = None  # "Ctrl-C" or "SIGTERM"
        self._beat(status)
        worker.start()
        next_tick = time.monotonic() + self.interval
        stop_deadline: float | None = None  # a drained stop: the agent's CLI may end it cleanly until then
        try:
            with _sigterm_as_interrupt():
                while not finished.is_set() and not abort.is_set():
                    finished.wait(max(0.0, min(0.1, next_tick - time.monotonic())))
                    if stop_deadline is not None and not finished.is_set() and time.monotonic() >= stop_deadline:
                        self._stop_how = (f"the agent did not end at a safe point within {grace:g}s; "
                                          "its process group was killed")
                        abort.set()
                        break
                    if not finished.is_set() and time.monotonic() >= next_tick:
                        next_tick += self.interval
                        self._beat(status)
                        if self.on_tick is not None and stop_reason is None:
                            stop_reason = self.on_tick(self.start.task_id) or None
                            if stop_reason and grace <= 0:
                                self._stop_how = "the agent's process group was killed (its CLI cannot end it cleanly)"
                                abort.set()  # the CLI cannot end the agent itself: kill it now
                            elif stop_reason:
                                self._request_stop(stop_reason)
                                stop_deadline = time.monotonic() + grace
                if stop_reason and finished.is_set() and self._stop_how is None:
                    self._stop_how = "the agent ended at its next safe point (it read the stop request)"
        except (KeyboardInterrupt, _Interrupt) as exc:
            interrupted = "SIGTERM" if isinstance(exc, _Interrupt) else "Ctrl-C"
            abort.set()
        # After an abort the adapter kills the agent's process group; more Ctrl-C cannot skip that,
        # but an adapter that ignores the abort is given up on after ABORT_WAIT seconds.
        deadline = time.monotonic() + ABORT_WAIT
        while not finished.is_set():
            try:
                with _sigterm_as_interrupt():
                    finished.wait(0.1)
            except (KeyboardInterrupt, _Interrupt) as exc:
                interrupted = interrupted or ("SIGTERM" if isinstance(exc, _Interrupt) else "Ctrl-C")
                abort.set()
            if abort.is_set() and time.monotonic() > deadline and not finished.is_set():
                left = AdapterAborted(aname, f"did not stop within {ABORT_WAIT:g}s of the abort; left behind")
                return (None, left), stop_reason, interrupted
        return (box.get("value"), box.get("exc")), stop_reason, interrupted


def run(workflow: Workflow, *, bus: Bus, start: StartFrame, **options: Any) -> RunResult:
    """Run ``workflow`` for ``start.task_id``; see :class:`Runner` for the options."""
    found = problems(workflow)
    if found:
        raise UsageError(f"workflow {workflow.name or '?'} is not valid", details=found)
    return Runner(workflow, bus=bus, start=start, **options).run()


# -- from a command line --------------------------------------------------------------------


RUNNABLE = ("ASSIGNED", "WORKING", "CONFLICTED")


def on_adapter(workflow: Workflow, name: str | None) -> Workflow:
    """``workflow`` with every role on the built-in adapter ``name`` (unchanged when None)."""
    if not name:
        return workflow
    from dataclasses import replace

    from .adapters import by_name

    chosen = by_name(name)
    return replace(workflow, roles={k: replace(r, adapter=chosen) for k, r in workflow.roles.items()})


def run_task(
    name: str,
    *,
    task: str | None = None,
    cwd: str | Path | None = None,
    max_rounds: int | None = None,
    adapter: str | None = None,
    between_rounds: StopHook | None = None,
    on_tick: StopHook | None = None,
    on_event: EventHook | None = None,
) -> RunResult:
    """`git nerve run NAME [--task T] [--max-rounds N] [--adapter A]`: everything from discovery to the summary."""
    from ..context import resolve_task
    from ..errors import InvalidTransition
    from ..locks import LockTimeout, hold
    from ..worker import lifecycle
    from ..worker.settings import parse_duration
    from ..worker.transitions import get as get_worker
    from . import config as nerve_config
    from .loader import load

    repo = lifecycle.open_repo(cwd)
    try:
        task_id = resolve_task(repo.paths.git_dir, task)
        w = get_worker(repo.bus, task_id)
        workdir = Path(w.worktree)
        toplevel = repo.paths.toplevel or workdir
        workflow = load(name, toplevel)
        found = problems(workflow)
        if found:
            raise UsageError(f"workflow {name} is not valid ({workflow.source})", details=found)
        cfg = nerve_config.load(toplevel)
        workflow = on_adapter(workflow, adapter or cfg.run.adapter)
        if w.state not in RUNNABLE:
            raise InvalidTransition(f"cannot run a workflow on {task_id}: it is {w.state} (runs need {', '.join(RUNNABLE)})")
        if not workdir.is_dir():
            raise UsageError(f"the worktree of {task_id} is missing ({workdir}); run `git worker spawn {task_id}` to recreate it")
        interval = parse_duration(repo.config.get("nerve.heartbeatInterval"), 15.0, "nerve.heartbeatInterval")
        if interval <= 0:
            raise UsageError("git config nerve.heartbeatInterval must be positive")
        try:
            with hold(repo.lock_path(f"run-{task_id}"), timeout=0, what=f"the run lock of {task_id}"):
                if w.state == "ASSIGNED":
                    lifecycle.start(repo, task_id)
                start = StartFrame(
                    task_id=task_id, workflow=workflow.name, content=w.description, workdir=str(workdir),
                    branch=w.branch, base=w.base, first_round=rounds.last_round(repo.bus.conn, task_id) + 1,
                    test_command=cfg.run.test_command or "",
                )
                return run(
                    workflow, bus=repo.bus, start=start, config=cfg, max_rounds=max_rounds, heartbeat_interval=interval,
                    between_rounds=between_rounds, on_tick=on_tick, on_event=on_event,
                )
        except LockTimeout:
            raise NerveError(f"another `git nerve run` is working on {task_id}; wait for it or stop it first") from None
    finally:
        repo.close()


__all__ = ["EXIT_CODES", "RoundReport", "RunResult", "Runner", "footer", "run", "run_task"]
