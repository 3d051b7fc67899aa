"""Waiting in tests: poll a condition until a deadline, never a fixed sleep that hopes something happened.

A fixed ``time.sleep`` left in the tests is one that makes time pass on purpose (an age, a heartbeat interval,
a page that must still answer later); each says so in a comment.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 30.0, *, what: str = "the condition",
               interval: float = 0.05, alive: subprocess.Popen | None = None, fail: bool = True) -> T:
    """Call ``condition`` until it returns something truthy, and return that. Past ``timeout`` seconds (or when
    ``alive``, a process that must keep running meanwhile, has ended) raise an AssertionError naming ``what``;
    with ``fail=False`` return the condition's last (falsy) answer instead."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if alive is not None and alive.poll() is not None:
            if fail:
                raise AssertionError(f"{what}: the process ended first (exit {alive.returncode})")
            return got
        if time.monotonic() >= deadline:
            if fail:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
            return got
        time.sleep(interval)
