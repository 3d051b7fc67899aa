"""SIGTERM and SIGHUP end a command the way Ctrl-C does: as an exception in the main thread, so every ``finally``
runs and every process the command started is stopped with it (a terminal closed, `kill`, a process manager).

Standard library only (floor 0). A signal the caller ignores (``nohup`` ignores SIGHUP) stays ignored, and a
handler someone else installed is left alone: only the default action (dying on the spot, children orphaned)
is replaced.
"""

from __future__ import annotations

import signal
import threading

#: what ends a command besides Ctrl-C (which Python already turns into KeyboardInterrupt)
SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived; ``signum`` says which (the command exits 128 + signum)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum, frame) -> None:
    raise Stopped(signum)


def raise_on_stop_signals() -> None:
    """From now on, in this process: SIGTERM and SIGHUP raise :class:`Stopped` where their action was the default."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in SIGNALS:
        if signal.getsignal(s) == signal.SIG_DFL:
            signal.signal(s, _raise)


__all__ = ["SIGNALS", "Stopped", "raise_on_stop_signals"]
