"""`git nerve sync --watch` on the git remote: sync now, then look again and again, as often as the host bears.

A look is a sync (:mod:`.sync`): when nothing changed it is one ``git ls-remote refs/nerve/*``, and it moves
this machine's log with an ``alive`` beat once a third of the lease passed, so a watching machine keeps its
leases. The wait between two looks is :class:`Schedule`'s, a pure policy:

* something changed on the remote (another machine's claim, log or archive was fetched): ``low`` again
  (``[shared] poll_min``, default 2 s);
* nothing changed: twice the last wait, up to ``high`` (``[shared] poll_max``, default and most a third of the
  lease: the beat needs a look within every third);
* an error (the remote unreachable or refusing): twice the last wait (four times when git's words say the host
  rations requests: HTTP 429, "rate limit", "too many requests"), up to ``high``, with jitter (between half and
  all of it) so that machines a host turned away do not come back together.

A stop (Ctrl-C, SIGTERM) during a sync lets that sync finish first (a second one stops at once); between
syncs it stops at once. Either way the command exits 130 (interrupted).
"""

from __future__ import annotations

import random
import time
from typing import Callable

from ..errors import GitError
from ..locks import LockTimeout

CHANGED, SAME, ERROR, LIMITED = "changed", "same", "error", "limited"
#: git's words (the host's) that mean "too many requests": back off harder
RATE_WORDS = ("429", "rate limit", "rate-limit", "ratelimit", "too many requests")


class Schedule:
    """The wait before the next look, from how the last one went (:data:`CHANGED`, :data:`SAME`,
    :data:`ERROR`, :data:`LIMITED`). ``rand`` (``random.random``) draws the jitter of errors."""

    def __init__(self, low: float, high: float, rand: Callable[[], float] = random.random):
        if not 0 < low <= high:
            raise ValueError("0 < low <= high")
        self.low, self.high, self.rand = low, high, rand
        self.delay = low  # the wait without jitter

    def next(self, result: str) -> float:
        if result == CHANGED:
            self.delay = self.low
            return self.delay
        if result == SAME:
            self.delay = min(self.high, self.delay * 2)
            return self.delay
        factor = 4 if result == LIMITED else 2
        self.delay = min(self.high, self.delay * factor)
        return self.delay * (0.5 + 0.5 * self.rand())


def outcome(report: dict) -> str:
    """How a look went, from its report (a sync's, or ``{"error": message}``)."""
    if "error" in report:
        text = report["error"].lower()
        return LIMITED if any(w in text for w in RATE_WORDS) else ERROR
    return CHANGED if report.get("fetched") else SAME


class Guard:
    """Whether a sync is under way: a stop asked meanwhile waits for its end (see the module)."""

    def __init__(self):
        self.busy = False
        self.stop = False

    def signal(self, signum=None, frame=None) -> None:
        if self.busy and not self.stop:
            self.stop = True
            return
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.stop:
            raise KeyboardInterrupt


def watch(state, bus, report: Callable[[dict], None], *, guard: Guard | None = None,
          sleep: Callable[[float], None] = time.sleep) -> None:
    """Look (sync), report, wait as :class:`Schedule` says; until interrupted (KeyboardInterrupt)."""
    guard = guard or Guard()
    schedule = Schedule(state.config.poll_min, state.config.poll_max)
    while True:
        guard.busy = True
        try:
            rep = state.sync(bus)
        except (GitError, LockTimeout) as exc:
            rep = {"error": exc.message}
        finally:
            guard.busy = False
        delay = schedule.next(outcome(rep))
        rep["next_look"] = round(delay, 2)
        report(rep)
        guard.check()
        sleep(delay)
