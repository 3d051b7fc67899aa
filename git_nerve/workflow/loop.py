"""The round loop of `git nerve run` (:class:`Runner`): ask the steering hook (``between_rounds``) whether
to stop, ask the moderator for the next role (or the end), enforce the round limit, run the role's adapter in
the task's worktree under supervision (:mod:`.supervise`), extract its typed meta, reconcile with git
(:mod:`.ground`) and append the round (:mod:`.result`) to the task's thread. An agent that could not be started
at all (``spawn_failed``) is no round an agent would read as history: it goes to the run log and the task's
messages (``agent_launch_failed``, shown by `git worker show`), and the run ends with an error."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from .. import clock
from ..bus import messages, rounds
from ..bus.connection import Bus
from ..errors import NerveError, UsageError
from ..worker.heartbeat import record as record_heartbeat
from . import costs, ground
from .adapters.base import AdapterSpawnFailed, AgentContext, StartFrame, adapter_name
from .config import NerveConfig
from .extract import ExtractError, extract, schema_hint
from .result import RoundReport, RunResult, round_record
from .spec import End, Role, Thread, Workflow
from .stopped import keep_stopped_work, settle_notes
from .supervise import STOP_GRACE, Interrupt, StopRequest, Supervisor, sigterm_as_interrupt

log = logging.getLogger("git_nerve.workflow")

#: ``hook(task_id) -> reason to stop, or None``: the steering queue's drain plugs in here.
StopHook = Callable[[str], "str | None"]
EventHook = Callable[[str, dict], None]


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
        self._stop_request = StopRequest(start.workdir)
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
        from ..worktree_prep.secrets import redactor

        masking = redactor(self.bus.conn, self.start.task_id)  # what the agent said is stored masked (redact.py)
        content, metadata = masking.text(content), masking.value(metadata)
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
            with sigterm_as_interrupt():
                self._loop()
        except (KeyboardInterrupt, Interrupt):
            self._finish("interrupted", "interrupted between agent runs")
        finally:
            self.result.duration_s = round(time.monotonic() - started, 1)
        if self.result.outcome == "completed":
            self._check_completed()
        settle_notes(self.bus, self.start.task_id)
        if self.result.outcome == "stopped":
            keep_stopped_work(self.bus, self.start, self._stop_how, self.result)
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
            if not self._within_budget():
                return None
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

    def _prepare(self, name: str, role: Role, adapter: Any, aname: str) -> tuple[Callable[[], Any], AgentContext] | None:
        """The role's prompt, the agent's context and the work a worker thread runs (None: the prompt failed)."""
        so_far = self.thread().rounds
        try:
            prompt = role.render(self.start, so_far) + "\n" + footer(self.workflow, name, role, self.start)
        except Exception as exc:
            self._finish("error", f"the prompt of role {name} raised {type(exc).__name__}: {exc}")
            return None
        abort = threading.Event()
        ctx = AgentContext(
            self.start, so_far, self.start.workdir, abort, self.start.task_id, name,
            test_command=self.start.test_command or self.config.run.test_command or "",
            env=_task_env(self.bus, self.start.task_id),
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

        return work, ctx

    def _run_role(self, name: str, role: Role) -> bool:
        """Run one role and record its round; False when the run must end (interrupted or stopped)."""
        began = time.monotonic()
        adapter = self._configured(role.adapter)
        aname = adapter_name(adapter)
        prepared = self._prepare(name, role, adapter, aname)
        if prepared is None:
            return False
        work, ctx = prepared
        self.on_event("role_start", {"role": name, "adapter": aname})
        before = self._git(ground.tip, self.start.workdir, self.start.branch)
        t0 = time.monotonic()
        self._stop_request.ask(None)  # a stop request a killed run left behind must not end this agent
        supervisor = Supervisor(
            beat=self._beat, interval=self.interval, on_tick=costs.ticking(self.on_tick, ctx, self.bus, self.config, self.run_key), task_id=self.start.task_id,
            stop_request=self._stop_request, grace=self.stop_grace if getattr(adapter, "clean_stop", False) else 0.0,
        )
        try:
            out = supervisor.run(work, ctx.abort, f"{self.workflow.name}: {name} running ({aname})", aname)
        finally:
            self._stop_request.clear()
        if out.stop_how is not None:
            self._stop_how = out.stop_how
        agent_s = time.monotonic() - t0
        duration = round(agent_s, 1)
        if isinstance(out.exc, AdapterSpawnFailed) and not out.stop_reason and not out.interrupted:
            return self._launch_failed(name, aname, out.exc, ctx.round, duration, began)
        facts: dict[str, Any] = {"adapter": aname, "duration_s": duration, "workflow": self.workflow.name}
        content, metadata, status, detail = round_record(aname, facts, out)
        # what the CLI reported at its end; a run stopped or killed before that: what it streamed meanwhile
        spent = costs.entries(ctx.usage or (ctx.live_usage if out.exc is not None else []), self.config.prices)
        if spent:
            metadata["usage"] = costs.summary(spent)
        status, detail = self._reconcile(name, role, before, metadata, status, detail)
        number = self._append(name, content, metadata)
        self._record_usage(number, name, aname, spent)
        # the runner's time: everything but the agent's own process (or, for an in-process adapter, its call)
        overhead = round(time.monotonic() - began - (ctx.process_s or agent_s), 4)
        report = RoundReport(number, name, aname, duration, status, detail, overhead)
        self.result.rounds.append(report)
        self.on_event("role_end", asdict(report))
        if out.interrupted:
            self._finish("interrupted", f"{out.interrupted} while {name} was running; the agent was stopped")
            return False
        if out.stop_reason:
            if out.stop_reason.startswith(costs.OVER):
                self._budget_round(out.stop_reason)
            self._finish("stopped", out.stop_reason)
            return False
        return True

    # -- what it costs (issue 39) ----------------------------------------------------------

    @property
    def run_key(self) -> str:
        """This run among the task's runs: the thread round it began at."""
        return str(self.start.first_round)

    def _record_usage(self, number: int, role: str, aname: str, spent: list[dict[str, Any]]) -> None:
        from ..bus import usage as bus_usage

        try:
            with self.bus.write() as conn:
                bus_usage.record(conn, self.start.task_id, clock.now(), round=number, role=role, adapter=aname,
                                 run=self.run_key, entries=spent)
        except NerveError as exc:
            log.warning("could not record the usage of round %d: %s", number, exc.message)

    def _within_budget(self) -> bool:
        """False, with the run stopped and a thread round naming the budget and the totals, once a budget is
        crossed (checked before each agent run: the safe point between two of them, where nothing is
        half-written; a run the moderator ends meanwhile is not stopped)."""
        reason = costs.over_budget(self.bus.conn, self.config.budget, self.start.task_id, self.run_key)
        if reason is None:
            return True
        self._budget_round(reason)
        self._finish("stopped", reason)
        return False

    def _budget_round(self, reason: str) -> None:
        """The thread round that says which budget stopped the run, with the totals."""
        self.on_event("budget", {"reason": reason})
        try:
            self._append("budget", f"Stopped: {reason}.", {"kind": "budget", "reason": reason,
                                                           "workflow": self.workflow.name})
        except NerveError as exc:
            log.warning("could not record the budget stop: %s", exc.message)


    def _launch_failed(self, name: str, aname: str, exc: AdapterSpawnFailed, number: int, duration: float,
                       began: float) -> bool:
        """The role's agent could not be started: recorded in the run log and as an ``agent_launch_failed``
        message (never a thread round); the run ends with an error (the same launch would fail again)."""
        from . import runlog

        log_file = runlog.record_failure(self.bus.path.parent.parent, self.start.task_id, number, name, aname,
                                         exc.message)
        self._publish("agent_launch_failed", {"role": name, "adapter": aname, "round": number, "error": exc.kind,
                                              "message": exc.message, "log": str(log_file) if log_file else None})
        report = RoundReport(number, name, aname, duration, exc.kind, exc.message,
                             round(time.monotonic() - began - duration, 4))
        self.result.rounds.append(report)
        self.on_event("role_end", asdict(report))
        self._finish("error", f"the agent of role {name} could not be started: {exc.message}")
        return False

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
            settle_notes(self.bus, self.start.task_id)
        problem = ground.verdict(obs, must_commit=role.commits, branch=self.start.branch)
        if problem is None:
            return status, detail
        metadata["git_error"] = problem
        if status != "ok":  # the adapter's own failure comes first; git's finding is kept beside it
            return status, detail
        claimed = metadata.get("files_changed")
        said = f" (the agent reported files_changed={claimed})" if claimed else ""
        return "git_error", f"{name}: {problem}{said}"


def _task_env(bus, task_id: str) -> dict:
    """NERVE_PORT of the task (its port block), for the agents a workflow starts; {} when it has none."""
    from ..worktree_prep import ports

    if not task_id:
        return {}
    env = ports.env_for(bus.conn, task_id)
    env.pop("NERVE_TASK_ID", None)  # the adapters set it themselves
    return env
