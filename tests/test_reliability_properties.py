"""Property tests (hypothesis): random command sequences against the state
machine on a real bus and on real repositories, and thread paging followed
hint by hint through `git nerve thread` on a real bus."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import reliability_support as rs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from fixtures.repos import build
from git_nerve import clock
from git_nerve.bus import messages, rounds, workers
from git_nerve.bus.connection import Bus
from git_nerve.errors import InvalidTransition
from git_nerve.worker import transitions
from git_nerve.worker.states import VALID_TRANSITIONS, State, replay

S = State
LIVE = [S.ASSIGNED, S.WORKING, S.CONFLICTED, S.IN_REVIEW, S.APPROVED]

#: each command as the lifecycle drives the bus: (to, allowed from, already done in)
VERBS = {
    "start": (S.WORKING, [S.ASSIGNED, S.CONFLICTED], [S.WORKING]),
    "conflict": (S.CONFLICTED, [S.WORKING], [S.CONFLICTED]),
    "done": (S.IN_REVIEW, [S.WORKING, S.CONFLICTED], [S.IN_REVIEW, S.APPROVED, S.COMPLETED]),
    "approve": (S.APPROVED, [S.IN_REVIEW], [S.APPROVED]),
    "request_changes": (S.WORKING, [S.IN_REVIEW, S.APPROVED], [S.WORKING]),
    "merge": (S.COMPLETED, [S.APPROVED], [S.COMPLETED]),
    "cancel": (S.FAILED, LIVE, [S.FAILED]),
    "fail": (S.FAILED, [S.ASSIGNED, S.WORKING, S.CONFLICTED], [S.FAILED]),
    "retry": (S.ASSIGNED, [S.FAILED], [S.ASSIGNED]),
}


def expected(verb: str, state: str) -> tuple[str, bool]:
    """(state after, whether the command succeeds) by the transition table alone."""
    to, allowed, already = VERBS[verb]
    if state in {s.value for s in already}:
        return state, True
    if state in {s.value for s in allowed} and to in VALID_TRANSITIONS[S(state)]:
        return to.value, True
    return state, False


def log_problems(conn, task_ids) -> list[str]:
    problems = []
    for task_id in task_ids:
        events = []
        for m in messages.for_task(conn, task_id, kinds=("task_assign", "state_change")):
            if m.kind == "task_assign":
                events.append((m.kind, None, m.payload["to"]))
            else:
                frm, to = m.payload["from"], m.payload["to"]
                if S(to) not in VALID_TRANSITIONS[S(frm)]:
                    problems.append(f"{task_id}: illegal {frm} -> {to} in the log")
                events.append((m.kind, frm, to))
        row = workers.get(conn, task_id)
        if replay(events) != (row.state if row else None):
            problems.append(f"{task_id}: log replays to {replay(events)}, table says {row and row.state}")
    return problems


class BusStateMachine(RuleBasedStateMachine):
    """Random commands on several tasks of one real bus; the table and the log always agree."""

    def __init__(self):
        super().__init__()
        self.model: dict[str, str] = {}

    @initialize()
    def open_bus(self):
        import tempfile

        self.dir = tempfile.TemporaryDirectory(prefix="nerve-prop-")
        self.bus = Bus(Path(self.dir.name) / "nerve" / "bus.db")

    def teardown(self):
        self.bus.close()
        self.dir.cleanup()

    @rule(n=st.integers(0, 3))
    def spawn(self, n):
        task_id = f"t{n}"
        if task_id in self.model:
            return
        ts = clock.now()
        row = workers.Worker(task_id, "ASSIGNED", f"feat/{task_id}", f"/wt/{task_id}", "refs/heads/main", "main", "",
                             ts, ts, None, ts, None, None, None)
        with self.bus.write() as conn:
            workers.insert(conn, row)
            messages.publish(conn, task_id, "task_assign", {"to": "ASSIGNED"}, ts)
        self.model[task_id] = "ASSIGNED"

    @precondition(lambda self: self.model)
    @rule(data=st.data(), verb=st.sampled_from(sorted(VERBS)))
    def command(self, data, verb):
        task_id = data.draw(st.sampled_from(sorted(self.model)))
        to, allowed, already = VERBS[verb]
        after, ok = expected(verb, self.model[task_id])
        before_msgs = len(messages.since(self.bus.conn))
        try:
            out = transitions.transition(self.bus, task_id, to, allowed_from=allowed, already=already, verb=verb)
        except InvalidTransition:
            assert not ok, f"{verb} refused from {self.model[task_id]}"
            assert len(messages.since(self.bus.conn)) == before_msgs, "a refused command wrote to the log"
        else:
            assert ok, f"{verb} accepted from {self.model[task_id]}"
            assert out.current == after and out.changed == (after != self.model[task_id])
            written = len(messages.since(self.bus.conn)) - before_msgs
            assert written == (1 if out.changed else 0), "one state_change per change, none for a repeat"
            self.model[task_id] = after

    @invariant()
    def table_matches_model_and_log(self):
        if not hasattr(self, "bus"):
            return
        conn = self.bus.conn
        assert {w.task_id: w.state for w in workers.all_workers(conn)} == self.model
        assert not log_problems(conn, list(self.model))


TestBusStateMachine = BusStateMachine.TestCase
TestBusStateMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


# -- the real lifecycle on a real repository -----------------------------------------------------------

LIFECYCLE_VERBS = ["start", "done", "approve", "request_changes", "merge", "cancel", "fail", "retry"]
_ids = itertools.count()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commands=st.lists(st.sampled_from(LIFECYCLE_VERBS), min_size=3, max_size=9))
def test_random_lifecycle_commands_follow_the_table_and_the_log_replays(repo, commands):
    from git_nerve.worker import lifecycle

    task_id = f"p{next(_ids)}"
    from git_nerve.hooks.install import install_missing

    r = lifecycle.open_repo(repo.work)
    r.hook_installer = install_missing  # as the commands do: spawn installs missing hooks
    try:
        wt = Path(lifecycle.spawn(r, task_id, description="property").worker.worktree)
        state = "ASSIGNED"
        main_before = rs.git(repo.work, "rev-parse", "main")
        for i, verb in enumerate(commands):
            after, ok = expected(verb, state)
            if verb == "done" and state == "WORKING" and wt.is_dir():
                build.commit_file(wt, f"{task_id}.txt", f"step {i}\n", f"{task_id}: step {i}")
            call = {
                "start": lambda: lifecycle.start(r, task_id),
                "done": lambda: lifecycle.done(r, task_id),
                "approve": lambda: lifecycle.approve(r, task_id, by="prop"),
                "request_changes": lambda: lifecycle.request_changes(r, task_id, comment="again"),
                "merge": lambda: lifecycle.merge(r, task_id),
                "cancel": lambda: lifecycle.cancel(r, task_id, reason="prop"),
                "fail": lambda: lifecycle.fail(r, task_id, "prop"),
                "retry": lambda: lifecycle.retry(r, task_id),
            }[verb]
            try:
                call()
            except InvalidTransition:
                assert not ok, f"{verb} refused from {state} ({commands[:i + 1]})"
            else:
                assert ok, f"{verb} accepted from {state} ({commands[:i + 1]})"
            state = after
            assert workers.get(r.bus.conn, task_id).state == state, (commands[:i + 1])
            assert not log_problems(r.bus.conn, [task_id])
        merged = rs.git(repo.work, "rev-parse", "main") != main_before
        assert merged == (state == "COMPLETED"), "main moved exactly when the task was merged"
        rs._quiet(repo.work.parent)  # a commit's radar recompute runs on in the background, holding the radar lock
        assert not rs.orphan_problems(repo.work)
    finally:
        r.close()


# -- thread paging through the real bus and CLI ------------------------------------------------------------

_HINT = re.compile(r"use --before (\d+) to load")
_threads = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(min_value=0, max_value=300), min_size=0, max_size=15),
       budget=st.integers(min_value=1, max_value=900))
def test_following_every_thread_hint_visits_each_round_once(repo, gn, sizes, budget):
    work = repo.work
    thread = f"th{next(_threads)}"
    bus = Bus(rs.bus_path(work))
    try:
        with bus.write() as conn:
            for i, size in enumerate(sizes, 1):
                rounds.append(conn, thread, role="agent", content=f"{i}:" + "x" * max(0, size - len(f"{i}:")),
                              metadata=None, ts=clock.now())
    finally:
        bus.close()
    if not sizes:
        res = gn(["thread", thread], work)
        assert res.code == 2 and res.err.startswith("error: unknown thread")
        return
    seen: list[int] = []
    pages = 0
    last_page: list[int] = []
    todo: list[str | None] = [None]
    while todo:
        before = todo.pop()
        args = ["thread", thread, "--budget", str(budget)] + (["--before", before] if before else [])
        as_json = gn([*args, "--json"], work)
        as_text = gn(args, work)
        assert as_json.code == 0 and as_text.code == 0, (as_json, as_text)
        view = json.loads(as_json.out)
        got = [r["round"] for r in view["rounds"]]
        assert got, "a page is never empty while the hint says there is more"
        assert got == sorted(got)
        for r in view["rounds"]:
            assert r["content"].startswith(f"{r['round']}:"), "each round's own content"
        hints = [str(g["before"]) for g in view["omitted"]]
        assert _HINT.findall(as_text.out) == hints, "the printed hints are the JSON ones"
        seen.extend(got)
        last_page = got
        todo.extend(hints)
        pages += 1
        assert pages <= len(sizes) + 1, "paging must end"
    n = len(sizes)
    assert sorted(set(seen)) == list(range(1, n + 1)), "every round is reached"
    repeats = [r for r in set(seen) if seen.count(r) > 1]
    assert repeats in ([], [1]), f"rounds shown twice: {repeats}"
    if repeats:
        assert last_page[0] == 1 and seen.count(1) == 2, "round 1 comes back only on the last page"


def test_the_bus_property_machine_sees_every_verb():
    # guard: the table above names every transition the state machine allows
    edges = {(frm, to) for frm, tos in VALID_TRANSITIONS.items() for to in tos}
    covered = {(frm, to) for to, allowed, _ in VERBS.values() for frm in allowed if to in VALID_TRANSITIONS[frm]}
    assert covered == edges, sorted(edges - covered)

