"""Leases (shared mode): is a machine still there? Judged by each observer on its own monotonic clock from
whether that machine's log ref moves; never by comparing wall clocks between machines.

* Every sync notes, for each other machine, when (on this machine's ``time.monotonic()``) its log tip was
  last seen to change. A monotonic reading lower than the one noted (this machine rebooted) counts as "seen
  just now": the lease starts again, never runs out early.
* A machine that syncs with nothing new to publish still moves its log once a third of the lease has passed
  (an ``alive`` event), so an idle but present machine keeps its tasks.
* Every sign of life of this machine renews its leases (issue 36): a commit in a task's worktree (the post-commit
  hook's background part), a heartbeat (`git worker heartbeat`, an agent run's beats) starts a background sync
  (:func:`git_nerve.shared.background.renew`) once a tenth of the lease passed since its records last reached the
  store (:data:`RENEW_PART`): what it did is published, its log moves, and a machine online and working never
  loses a task to ``takeover = "auto"``. Nothing waits for that sync.
* A lease runs out when the holder's log has not moved for ``[shared] lease`` seconds (default 600) of the
  observer's clock. A machine never seen moving cannot be judged: its tasks are kept.
"""

from __future__ import annotations

import json
import time

from ..bus import shared as cache

DEFAULT_LEASE = 600.0


def observe(conn, machine: str, tip: str) -> None:
    """Note (inside the caller's write transaction) that ``machine``'s log is at ``tip`` now."""
    key = f"alive:{machine}"
    now = time.monotonic()
    old = _read(cache.get_meta(conn, key))
    if old is None or old["tip"] != tip or old["mono"] > now:
        cache.set_meta(conn, key, json.dumps({"tip": tip, "mono": now}))


def silent_for(conn, machine: str) -> float | None:
    """Seconds (this machine's clock) since ``machine``'s log last moved; None when it was never seen."""
    old = _read(cache.get_meta(conn, f"alive:{machine}"))
    if old is None:
        return None
    now = time.monotonic()
    return 0.0 if old["mono"] > now else now - old["mono"]


def beat_due(conn, machine: str, lease: float) -> bool:
    """Should this machine's sync move its log although nothing new happened (a third of the lease passed)?"""
    last = _read(cache.get_meta(conn, f"beat:{machine}"))
    now = time.monotonic()
    return last is None or last["mono"] > now or now - last["mono"] > lease / 3


def beaten(conn, machine: str, tip: str) -> None:
    cache.set_meta(conn, f"beat:{machine}", json.dumps({"tip": tip, "mono": time.monotonic()}))


def published(conn, machine: str, tip: str) -> None:
    """This machine's log reached the remote at ``tip`` now (inside the caller's write transaction)."""
    cache.set_meta(conn, f"published:{machine}", json.dumps({"tip": tip, "mono": time.monotonic()}))


#: the part of the lease after which a sign of life starts a background sync (see the module)
RENEW_PART = 10


def renewing(conn, lease_seconds: float, background: bool) -> None:
    """Note (inside a sync's write transaction) how long a sign of life lets pass before it publishes: a tenth of
    the lease; never with ``[shared] background = false`` (then only `git nerve sync` publishes)."""
    cache.set_meta(conn, cache.RENEW, repr(lease_seconds / RENEW_PART) if background else None)


def unpublished_for(conn, machine: str) -> float | None:
    """Seconds (this machine's clock) since its own log last reached the remote: the others can have judged
    its lease run out only once this passed the lease. None: never, or this machine restarted since (cannot
    tell)."""
    last = _read(cache.get_meta(conn, f"published:{machine}"))
    now = time.monotonic()
    return None if last is None or last["mono"] > now else now - last["mono"]


def _read(value: str | None) -> dict | None:
    try:
        d = json.loads(value) if value else None
    except ValueError:
        return None
    return d if isinstance(d, dict) and "mono" in d and "tip" in d else None
