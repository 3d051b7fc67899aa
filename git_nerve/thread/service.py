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

import json
import math
import os
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import yaml

from .. import clock, context
from ..bus import Bus, open_bus, rounds, workers
from ..bus import messages
from ..bus import shared as shared_cache
from .elsewhere import elsewhere, held_view
from ..bus.driver import Connection
from ..errors import UsageError
from ..paths import RepoPaths, discover
from .format import RESERVED, ShownRound, render
from .hints import Hint, where_to_look
from .select import DEFAULT_BUDGET, Gap, select_before, select_default

_AFTER_ALL = 2**63 - 1  # a `before` past any round id (SQLite's largest integer)


@dataclass(frozen=True)
class ThreadView:
    """What `git nerve thread` shows: the chosen rounds and the ranges left out."""

    thread: str
    rounds: tuple[ShownRound, ...]
    omitted: tuple[Gap, ...]
    #: where to look in the code (:mod:`.hints`): only on the default page, only with a knowledge index
    hints: tuple[Hint, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "thread": self.thread,
            "rounds": [r.as_dict() for r in self.rounds],
            "omitted": [g.as_dict() for g in self.omitted],
        }
        if self.hints:
            data["hints"] = [h.as_dict() for h in self.hints]
        return data

    def render(self) -> str:
        """The rounds and gaps (the seed's format), then the hint line when there is one."""
        return render(self.rounds, self.omitted, self.hints)


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
    here: RepoPaths | None = None,
) -> ThreadView:
    """The rounds of ``thread_id`` within ``budget`` characters.

    Default: round 1 plus the newest rounds; ``before=N``: the rounds before
    round N, newest first until the budget is met. Unknown thread, a budget
    below 1 or ``before`` below 1 -> :class:`UsageError`. With ``hints``, the
    default page also carries where to look (:mod:`.hints`): what the knowledge
    index of the task's worktree (else of ``here``) ranks first for the task's
    description (else round 1's content).
    """
    check_budget(budget)
    if before is not None:
        check_before(before)
    conn = bus.conn
    if not _known(conn, thread_id):
        held = elsewhere(conn, thread_id)
        if held is None:
            raise _unknown(conn, thread_id)
        shown, omitted = held_view(conn, thread_id, held, before, budget)
        look = where_to_look(next((r.content for r in shown if r.round == 1), ""), None, here) \
            if hints and before is None else ()
        return ThreadView(thread_id, shown, omitted, look)
    pairs = rounds.sizes_backwards(conn, thread_id, before if before is not None else _AFTER_ALL)
    try:
        if before is None:
            chosen = select_default(rounds.size_of(conn, thread_id, 1), pairs, budget)
        else:
            chosen = select_before(before, pairs, budget)
    finally:
        pairs.close()  # release the index cursor the walk left open
    loaded = rounds.load(conn, thread_id, list(chosen.rounds))
    shown = tuple(ShownRound(r.round, r.role, r.ts, r.metadata, r.content) for r in loaded)
    look = _hints(conn, thread_id, shown, here) if hints and before is None else ()
    return ThreadView(thread_id, shown, chosen.omitted, look)


def _hints(conn: Connection, thread_id: str, shown: tuple[ShownRound, ...], here: RepoPaths | None) -> tuple[Hint, ...]:
    w = workers.get(conn, thread_id)
    text = w.description if w is not None else ""
    if not (text or "").strip():
        text = next((r.content for r in shown if r.round == 1), "")
    return where_to_look(text, w.worktree if w is not None else None, here)


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
    if not re.fullmatch(r"[0-9]+", digits) or not digits.strip("0"):
        raise UsageError(f"{option} must be {what}, 1 or more (got {shown!r})")
    if len(digits.lstrip("0")) > 19 or int(digits) > _AFTER_ALL:
        raise UsageError(f"{option} is too large (got {shown!r})")
    return int(digits)


# -- writing -----------------------------------------------------------------

def check_role(role: Any) -> str:
    """The role, trimmed; it must be a non-empty single line without control characters."""
    if not isinstance(role, str) or not role.strip():
        raise UsageError("a round needs a role (--role ROLE), e.g. tester or reviewer")
    role = role.strip()
    if any(unicodedata.category(ch) == "Cc" for ch in role):
        raise UsageError(f"the role must be one line without control characters (got {role!r})")
    return role


def check_metadata(metadata: Any) -> dict[str, Any]:
    """A JSON object with string keys, finite numbers and none of the reserved keys."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise UsageError(f"metadata must be a JSON object, got {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str) or not key:
            raise UsageError(f"metadata keys must be non-empty strings (got {key!r})")
        if key in RESERVED:
            raise UsageError(
                f"metadata key {key!r} is reserved ({', '.join(sorted(RESERVED))} are fields of the round itself)"
            )
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"metadata must be plain JSON: {exc}") from exc
    return metadata


def append(
    conn: Connection,
    thread_id: str,
    *,
    role: str,
    content: str,
    metadata: dict[str, Any] | None = None,
    ts: float | None = None,
) -> int:
    """Validate and append a round inside the caller's write transaction; returns its round id.

    For callers that record a round together with another change (e.g. a
    review verdict); they check that the task exists themselves.
    """
    role = check_role(role)
    meta = check_metadata(metadata)
    if not isinstance(content, str):
        raise UsageError("round content must be text")
    if not content.strip() and not meta:
        raise UsageError("nothing to post: the content is empty and there is no metadata")
    return rounds.append(
        conn, thread_id, role=role, content=content, metadata=meta or None, ts=clock.now() if ts is None else ts
    )


def post(
    bus: Bus,
    thread_id: str,
    *,
    role: str,
    content: str,
    metadata: dict[str, Any] | None = None,
    ts: float | None = None,
) -> int:
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
    if getattr(bus, "boxed", False):
        _post_from_box(thread_id, role, content, meta)
        return None, None
    with bus.write() as conn:
        if _known(conn, thread_id):
            return append(conn, thread_id, role=role, content=content, metadata=metadata, ts=ts), None
        held = elsewhere(conn, thread_id) if elsewhere_too else None
        if held is None:
            raise _unknown(conn, thread_id)
        if not isinstance(content, str):
            raise UsageError("round content must be text")
        if not content.strip() and not meta:
            raise UsageError("nothing to post: the content is empty and there is no metadata")
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


# -- `--meta KEY=VALUE` and `--meta-json` --------------------------------------

_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?")
_BOOL = {"true", "True", "TRUE", "false", "False", "FALSE"}
_NULL = {"null", "Null", "NULL", "~"}


def parse_meta_value(raw: str) -> Any:
    """A ``--meta`` value as a YAML scalar, keeping only the unsurprising typings.

    ``yaml.safe_load`` parses it; the typed result is kept for the YAML 1.2
    core spellings only: ``true``/``false``, ``null``/``~``, decimal integers
    and finite decimal floats. Everything else stays the literal string,
    including YAML 1.1 surprises (``yes``/``no``/``on``/``off``, octal
    ``010``, sexagesimal ``1:30``), dates, ``.inf``/``.nan``, lists, maps and
    text after `` #``. A quoted value (``'"42"'``) is unquoted to a string.
    An empty value is the empty string.
    """
    if raw == "":
        return ""
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    if raw[0] in "'\"":
        return parsed if isinstance(parsed, str) else raw
    if isinstance(parsed, bool):
        return parsed if raw in _BOOL else raw
    if parsed is None:
        return None if raw in _NULL else raw
    if isinstance(parsed, int) and _INT.fullmatch(raw):
        return parsed
    if isinstance(parsed, float) and math.isfinite(parsed) and _FLOAT.fullmatch(raw):
        return parsed
    return raw


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_metadata(pairs: tuple[str, ...] | list[str] = (), meta_json: str | None = None) -> dict[str, Any]:
    """Metadata from ``--meta-json`` then ``--meta KEY=VALUE`` pairs (a pair overrides the same key)."""
    meta: dict[str, Any] = {}
    if meta_json is not None:
        try:
            loaded = json.loads(meta_json, parse_constant=_reject_constant)
        except ValueError as exc:
            raise UsageError(f"--meta-json is not valid JSON: {exc}") from exc
        if not isinstance(loaded, dict):
            raise UsageError(f"--meta-json must be a JSON object, got {type(loaded).__name__}")
        meta.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--meta expects KEY=VALUE (got {pair!r})")
        meta[key.strip()] = parse_meta_value(value)
    return check_metadata(meta)


# -- from a working directory --------------------------------------------------

def open_thread(thread_id: str | None, cwd: str | os.PathLike[str] | None = None, *, how_to_name: str) -> tuple[Bus, str, RepoPaths]:
    """The bus of the repository at ``cwd``, the thread to act on, and the repository's paths.

    ``thread_id`` defaults to the task of the worktree ``cwd`` is in (its
    ``.worker-ctx.json``); outside one, ``how_to_name`` says what to pass.
    A repository without a bus has no threads: UsageError, nothing created.
    """
    paths = discover(cwd)
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
        return view(bus, thread_id, before=before, budget=budget, hints=True, here=paths)


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
