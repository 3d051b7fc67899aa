"""Steering running work: `git nerve tell`, the drain, the outbox, `git worker merge --all`.

* :mod:`.parse`: what a message asks for, from its text (pure);
* :mod:`.tell`: queue a message (a note goes straight into the thread);
* :mod:`.drain`: a consumer's new messages, acknowledged once (cursor + outbox, one transaction);
* :mod:`.hook`: the drain as the stop hook of `git nerve run` and `git worker run`;
* :mod:`.queue`: the merge queue of `git worker merge --all`;
* :mod:`.outbox`: reading the acknowledgements.

The queue itself is the bus (tables ``inbox``, ``cursors``, ``outbox``; SQL in
:mod:`git_nerve.bus.steer`).
"""
