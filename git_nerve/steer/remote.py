"""`git nerve tell --task T` for a task another machine holds (shared mode, issue 24).

The teller's bus cannot reach the holder's inbox: :func:`leave` writes a ``tell_note`` message in the teller's
bus, which its log carries (:mod:`git_nerve.shared`). The holder's sync ingests it and
:func:`git_nerve.bus.told.deliver` queues it in the holder's inbox exactly as a local `git nerve tell --task T`
would (a note also becomes a ``human`` round of the thread; the notes-pending marker is set), once.

A stop told from another machine cannot check that a run of the task is going on there: the holder queues it as
it is, and the next run of the task acts on it. Acknowledgements (`git nerve outbox`, `git worker show T`) are the
holder's to show.
"""

from __future__ import annotations

from ..bus import messages, workers
from ..bus import shared as shared_cache


def holder(conn, task_id: str) -> str | None:
    """The machine holding ``task_id`` when only another machine has it (as the last sync saw it), else None."""
    if workers.get(conn, task_id) is not None:
        return None
    c = shared_cache.claim(conn, task_id)
    here = shared_cache.get_meta(conn, shared_cache.MACHINE)
    return c.owner if c is not None and here and c.owner != here else None


def leave(conn, task_id: str, *, kind: str, text: str, ts: float, machine: str) -> int:
    """The note in this machine's log for ``machine`` (the holder) to queue; the message id."""
    return messages.publish(conn, task_id, shared_cache.TELL_NOTE,
                            {"scope": "task", "kind": kind, "text": text, "holder": machine}, ts)


__all__ = ["holder", "leave"]
