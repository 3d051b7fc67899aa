"""Threads on the bus: read a budgeted view of a task's rounds, append a round.

A thread belongs to a task and its id is the task id. A thread is known when
the task has a row in ``workers`` or the thread already has rounds.

Reading costs what the budget costs, not what the thread holds: the
selection reads ``(round, size)`` pairs backwards from the
``(thread_id, round, size)`` index and stops once the budget is met (see
:mod:`.select`); only the chosen rounds' content is then loaded.

Writing validates before it opens the write transaction: the role is a
non-empty single line, the metadata a JSON object whose keys are strings and
whose numbers are finite; the reserved keys ``type``, ``role`` and
``content`` are refused (the role and the content have their own fields, and
a ``type`` key would be hidden from every view).
"""

from __future__ import annotations

import os
from collections import namedtuple

from .. import clock, context
from ..bus import Bus, open_bus, rounds, workers
from ..bus import messages
from ..bus import shared as shared_cache
from .elsewhere import elsewhere, held_briefing, held_view
from ..bus.driver import Connection
from ..errors import UsageError
from ..paths import RepoPaths, discover, find_by_files
from .format import Briefing, ShownRound, render
from .hints import Hint, where_to_look
from .meta import check_metadata, parse_meta_value, parse_metadata  # noqa: F401  (re-exported)
from .select import DEFAULT_BUDGET, Gap, select_before, select_default

TYPE_CHECKING = False  # `git nerve thread` is an agent's hot path: typing's names for readers only
if TYPE_CHECKING:
    from typing import Any

_AFTER_ALL = 2**63 - 1  # a `before` past any round id (SQLite's largest integer)


class ThreadView(namedtuple("ThreadView", "thread rounds omitted hints briefing", defaults=((), None))):
    """What `git nerve thread` shows: the chosen rounds (:class:`.format.ShownRound`) and the ranges left out
    (:class:`.select.Gap`); ``hints``, where to look in the code (:mod:`.hints`: only on the default page, only with
    a knowledge index); ``briefing``, what the task was spawned with (:class:`.format.Briefing`: only on the
    default page of a task's thread). A named tuple: `git nerve thread` is an agent's hot path."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"thread": self.thread}
        if self.briefing is not None:
            data["task"] = self.briefing.as_dict()
        data["rounds"] = [r.as_dict() for r in self.rounds]
        data["omitted"] = [g.as_dict() for g in self.omitted]
        if self.hints:
            data["hints"] = [h.as_dict() for h in self.hints]
        return data

    def render(self) -> str:
        """The briefing, the rounds and gaps (the seed's format), then the hint line when there is one."""
        return render(self.rounds, self.omitted, self.hints, self.briefing)

    @property
    def empty(self) -> bool:
        """Nothing of the thread to show (its rounds before the round asked for, or an empty thread of no task)."""
        return not (self.rounds or self.omitted or self.briefing)


# -- reading -----------------------------------------------------------------

def _unknown(conn: Connection, thread_id: str) -> UsageError:
    near = workers.get_by_key(conn, thread_id)
    if near is not None and near.task_id != thread_id:
        return UsageError(f"unknown thread {thread_id!r} (did you mean {near.task_id!r}?)")
    return UsageError(f"unknown thread {thread_id!r}: no task or rounds with that id")


def _known(conn: Connection, thread_id: str) -> bool:
    return workers.get(conn, thread_id) is not None or rounds.last_round(conn, thread_id) > 0


def view(
    bus: Bus, thread_id: str, *, before: int | None = None, budget: int = DEFAULT_BUDGET, hints: bool = False,
    here: RepoPaths | None = None, brief: bool = False,
) -> ThreadView:
    """The rounds of ``thread_id`` within ``budget`` characters.

    Default: round 1 plus the newest rounds; ``before=N``: the rounds before
    round N, newest first until the budget is met. Unknown thread, a budget
    below 1 or ``before`` below 1 -> :class:`UsageError`. With ``hints``, the
    default page also carries where to look (:mod:`.hints`): what the knowledge
    index of the task's worktree (else of ``here``) ranks first for the task's
    description (else round 1's content). With ``brief``, the default page of a
    task's thread opens with its briefing (:class:`.format.Briefing`), which the
    budget pays first: rounds give way to it, and only a briefing longer than the
    whole budget has its description cut.
    """
    check_budget(budget)
    if before is not None:
        check_before(before)
    conn = bus.conn
    if not _known(conn, thread_id):
        held = elsewhere(conn, thread_id)
        if held is None:
            raise _unknown(conn, thread_id)
        briefing = held_briefing(conn, thread_id, held, budget) if brief and before is None else None
        shown, omitted = held_view(conn, thread_id, held, before, budget,
                                   len(briefing.render()) if briefing is not None else 0)
        text = briefing.description if briefing is not None and briefing.description.strip() else \
            next((r.content for r in shown if r.round == 1), "")
        look = where_to_look(text, None, here) if hints and before is None else ()
        return ThreadView(thread_id, shown, omitted, look, briefing)
    briefing = briefing_of(conn, thread_id, budget) if brief and before is None else None
    pairs = rounds.sizes_backwards(conn, thread_id, before if before is not None else _AFTER_ALL)
    try:
        if before is None:
            spent = len(briefing.render()) if briefing is not None else 0
            chosen = select_default(rounds.size_of(conn, thread_id, 1), pairs, budget, spent)
        else:
            chosen = select_before(before, pairs, budget)
    finally:
        pairs.close()  # release the index cursor the walk left open
    loaded = rounds.load(conn, thread_id, list(chosen.rounds))
    shown = tuple(ShownRound(r.round, r.role, r.ts, r.metadata, r.content) for r in loaded)
    look = _hints(conn, thread_id, shown, here) if hints and before is None else ()
    return ThreadView(thread_id, shown, chosen.omitted, look, briefing)


def briefing_of(conn: Connection, thread_id: str, budget: int) -> Briefing | None:
    """The task's briefing from its row (what spawn recorded), cut to ``budget``; None for a thread of no task."""
    w = workers.get(conn, thread_id)
    if w is None:
        return None
    whole = Briefing(w.task_id, w.state, w.description or "", w.branch, w.base, w.integration, w.worktree,
                     bool(w.adopted))
    return whole.within(budget)


def _hints(conn: Connection, thread_id: str, shown: tuple[ShownRound, ...], here: RepoPaths | None) -> tuple[Hint, ...]:
    w = workers.get(conn, thread_id)
    text = w.description if w is not None else ""
    if not (text or "").strip():
        text = next((r.content for r in shown if r.round == 1), "")
    return where_to_look(text, w.worktree if w is not None else None, here)


def nothing_before(thread_id: str, before: int | str | None) -> str:
    """What a view with nothing to show says (on stderr, or as the MCP tool's answer)."""
    return f"thread {thread_id!r} has no rounds {f'before round {before}' if before is not None else 'yet'}"


def check_budget(budget: Any) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise UsageError(f"--budget must be a number of characters, 1 or more (got {budget!r})")
    return budget


def check_before(before: Any) -> int:
    if isinstance(before, bool) or not isinstance(before, int) or before < 1:
        raise UsageError(f"--before must be a round id, 1 or more (got {before!r})")
    return before


def parse_positive(option: str, raw: str, what: str) -> int:
    """``raw`` as a positive whole number, or a one-line UsageError naming ``option``."""
    digits = raw.strip().removeprefix("+")
    shown = raw if len(raw) <= 40 else f"{raw[:37]}..."
    if not (digits.isascii() and digits.isdigit()) or not digits.strip("0"):
        raise UsageError(f"{option} must be {what}, 1 or more (got {shown!r})")
    if len(digits.lstrip("0")) > 19 or int(digits) > _AFTER_ALL:
        raise UsageError(f"{option} is too large (got {shown!r})")
    return int(digits)


# -- writing -----------------------------------------------------------------

def check_role(role: Any) -> str:
    """The role, trimmed; it must be a non-empty single line without control characters."""
    if not isinstance(role, str) or not role.strip():
        raise UsageError("a round needs a role (--role ROLE), e.g. tester or reviewer")
    import unicodedata

    role = role.strip()
    if any(unicodedata.category(ch) == "Cc" for ch in role):
        raise UsageError(f"the role must be one line without control characters (got {role!r})")
    return role


def check_content(content: Any, meta: dict) -> None:
    """A round's content must be text, and not empty unless the round has metadata."""
    if not isinstance(content, str):
        raise UsageError("round content must be text")
    if not content.strip() and not meta:
        raise UsageError("nothing to post: the content is empty and there is no metadata")


def append(conn: Connection, thread_id: str, *, role: str, content: str, metadata: dict[str, Any] | None = None,
           ts: float | None = None) -> int:
    """Validate and append a round inside the caller's write transaction; returns its round id.

    For callers that record a round together with another change (e.g. a
    review verdict); they check that the task exists themselves.
    """
    role = check_role(role)
    meta = check_metadata(metadata)
    check_content(content, meta)
    return rounds.append(
        conn, thread_id, role=role, content=content, metadata=meta or None, ts=clock.now() if ts is None else ts
    )


def post(bus: Bus, thread_id: str, *, role: str, content: str, metadata: dict[str, Any] | None = None,
         ts: float | None = None) -> int:
    """Append a round to a known thread in its own transaction; returns the new round id."""
    number, _ = post_anywhere(bus, thread_id, role=role, content=content, metadata=metadata, ts=ts,
                                    elsewhere_too=False)
    assert number is not None
    return number


def post_anywhere(
    bus: Bus,
    thread_id: str,
    *,
    role: str,
    content: str,
    metadata: dict[str, Any] | None = None,
    ts: float | None = None,
    elsewhere_too: bool = True,
) -> tuple[int | None, str | None]:
    """:func:`post`, and for a task only another machine holds (shared mode; ``elsewhere_too``) a post in this
    machine's log instead: a ``thread_post`` message its holder appends to the thread when it ingests it
    (:func:`git_nerve.bus.shared.deliver_posts`), so the holder numbers every round. (round id, None) or
    (None, the holding machine)."""
    role = check_role(role)
    meta = check_metadata(metadata)
    from ..worktree_prep.secrets import redactor

    masking = redactor(bus.conn, thread_id)  # what an agent posts is stored masked (git_nerve/redact.py)
    content, metadata, meta = masking.value(content), masking.value(metadata), masking.value(meta)
    if getattr(bus, "boxed", False):
        _post_from_box(thread_id, role, content, meta)
        return None, None
    with bus.write() as conn:
        if _known(conn, thread_id):
            return append(conn, thread_id, role=role, content=content, metadata=metadata, ts=ts), None
        held = elsewhere(conn, thread_id) if elsewhere_too else None
        if held is None:
            raise _unknown(conn, thread_id)
        check_content(content, meta)
        payload = {"role": role, "content": content, "metadata": meta or None, "holder": held}
        messages.publish(conn, thread_id, shared_cache.THREAD_POST, payload, clock.now() if ts is None else ts)
        return None, held


def _post_from_box(thread_id: str, role: str, content: Any, meta: dict) -> None:
    """Inside an agent's box (issue 41): the post goes to the box's spool, taken in outside the box as a round of
    the box's own task (the only thread a box may post to)."""
    import uuid

    from ..bus import spool

    own = spool.box_spool()
    if own is None or own.name != thread_id:
        raise UsageError(f"inside an agent's box only its own task's thread can be posted to, not {thread_id!r}")
    if not isinstance(content, str) or (not content.strip() and not meta):
        raise UsageError("nothing to post: the content is empty and there is no metadata")
    spool.append_box("post", {"id": uuid.uuid4().hex, "role": role, "content": content, "metadata": meta,
                              "ts": clock.now()})


# -- from a working directory --------------------------------------------------

def open_thread(thread_id: str | None, cwd: str | os.PathLike[str] | None = None, *, how_to_name: str) -> tuple[Bus, str, RepoPaths]:
    """The bus of the repository at ``cwd``, the thread to act on, and the repository's paths.

    ``thread_id`` defaults to the task of the worktree ``cwd`` is in (its
    ``.worker-ctx.json``); outside one, ``how_to_name`` says what to pass.
    A repository without a bus has no threads: UsageError, nothing created.
    """
    found = find_by_files(cwd)  # from git's own files when nothing is unusual: no git at start-up (an agent's hot path)
    paths = found if found is not None else discover(cwd)
    if thread_id is None:
        ctx = context.read(paths.git_dir)
        if ctx is None:
            raise UsageError(f"not inside a worker's worktree (no .worker-ctx.json); {how_to_name}")
        thread_id = ctx.task_id
    if not paths.bus_path.exists():
        raise UsageError(f"unknown thread {thread_id!r}: this repository has no tasks yet")
    return open_bus(paths.common_dir, create=False), thread_id, paths


def show(
    thread_id: str | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    before: int | None = None,
    budget: int = DEFAULT_BUDGET,
) -> ThreadView:
    """`git nerve thread`: the view of a thread, by default the current worktree's task."""
    check_budget(budget)
    if before is not None:
        check_before(before)
    bus, thread_id, paths = open_thread(thread_id, cwd, how_to_name="pass THREAD_ID (a task id)")
    with bus:
        return view(bus, thread_id, before=before, budget=budget, hints=True, here=paths, brief=True)


def post_here(
    task: str | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    role: str,
    content: str,
    metadata: dict[str, Any] | None = None,
) -> tuple[str, int | None, str | None]:
    """`git nerve post`: append a round to ``task`` (default: this worktree's); returns (task, round id, None),
    or (task, None, machine) for a task ``machine`` holds (the post waits in this machine's log; a sync in the
    background is started to carry it, as a transition starts one)."""
    check_role(role)
    check_metadata(metadata)
    bus, task, paths = open_thread(task, cwd, how_to_name="pass --task TASK")
    with bus:
        number, machine = post_anywhere(bus, task, role=role, content=content, metadata=metadata)
    if machine is not None:
        from ..shared import open_state

        state = open_state(paths.common_dir)
        if state.active and state.config.background:
            from ..shared.background import spawn

            spawn(paths.common_dir, state.config.cwd)
    return task, number, machine
