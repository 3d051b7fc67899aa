"""Whose a task's branch is: what git-nerve may delete of it, as its ownership record says (:mod:`..git.ownership`,
the one record of what git-nerve made; the door reads nothing else).

* A branch that existed before its task (``git worker spawn --adopt``, recorded as ``adopted``) is the person's:
  git-nerve never deletes it, locally or on a remote (merge --delete-branch, cancel --cleanup). A task spawned
  before git-nerve recorded this (the row's ``adopted`` NULL) is kept too: cannot tell means keep.
* On a remote, git-nerve deletes only a branch it pushed there itself (``done``'s push, recorded as the record's
  ``pushed``), never one it merely found there, and only while it still holds the value git-nerve last pushed
  (the record's ``pushed`` sha, written by every push of the branch: the one value every write of it on the
  remote leases: :func:`record_pushed`). A branch someone pushed onto since is kept, and what they pushed
  archived (the cleanup); ``done`` does not overwrite it unless told to (:func:`others_on_remote`). The row's
  ``adopted``, ``pushed`` and ``pushed_sha`` columns are what status shows; nothing decides by them.
* A task spawned by an older git-nerve (listed once by the bus's migration 7) gets its record completed from its
  row by the first reader (:func:`branch_record`), so what it made is cleaned up as before.
* A task taken over from another machine (:mod:`.takeover`) records whom from and its branch on the remote
  then (:func:`record_takeover`): commits pushed onto that branch after it were pushed by the fenced holder
  (its agent's plain push, before it learned): ``done`` archives them and replaces them, saying so in one line.

:func:`keep_branch` and :func:`keep_on_remote` are the one check every deletion of a task's branch makes.
"""

from __future__ import annotations

from ..bus.workers import Worker
from ..git import ownership


def branch_record(repo, w: Worker) -> dict | None:
    """The ownership record of the task's branch (None: git-nerve made no such branch for it). A task an older
    git-nerve spawned (the bus lists it once) first gets its record from its row: what it made (``adopted`` 0:
    the branch here, or the one it pushed) stays git-nerve's, ``adopted`` NULL stays "cannot tell"."""
    from ..bus import workers
    from ..errors import BusError

    common = repo.paths.common_dir
    if not workers.is_legacy_owned(repo.bus.conn, w.task_id):
        return ownership.branch_owner(common, w.branch)
    rec = ownership.branch_owner(common, w.branch)
    if rec is None or rec.get("task") == w.task_id:  # the row was the proof until now: it says what the record will
        facts: dict = {"adopted": None if w.adopted is None else bool(w.adopted)}
        if w.pushed:
            facts["pushed"] = {"remote": repo.settings.remote, "sha": w.pushed_sha}
        ownership.record(common, "branch", w.branch, task=w.task_id, **facts)
    try:
        with repo.bus.write() as conn:
            workers.drop_legacy_owned(conn, w.task_id)
    except BusError:
        pass  # the record is written: a later reader writes the same one again, then drops it
    return ownership.branch_owner(common, w.branch)


def _mine(repo, w: Worker) -> dict | None:
    rec = branch_record(repo, w)
    return rec if rec is not None and rec.get("task") == w.task_id else None


def keep_branch(repo, w: Worker) -> str | None:
    """Why the task's branch must never be deleted (locally or on a remote), as the command says it; None: it may."""
    rec = _mine(repo, w)
    if rec is None:
        return f"kept branch {w.branch} (no record says git-nerve created it for {w.task_id})"
    if rec.get("adopted") is False:
        return None
    if rec.get("adopted") or w.adopted:
        return f"kept branch {w.branch} (adopted: it existed before the task)"
    return (f"kept branch {w.branch} (spawned by an older git-nerve, which did not record whether it existed "
            "before the task)")


def pushed(repo, w: Worker) -> tuple[bool, str | None]:
    """(git-nerve pushed the task's branch, the value it last pushed there: None when it cannot tell), from the
    record."""
    return ownership.pushed_sha(_mine(repo, w))


def keep_on_remote(repo, w: Worker, remote: str) -> str | None:
    """Why the task's branch must not be deleted on ``remote``; None when git-nerve pushed it there itself."""
    rec = _mine(repo, w)  # none: nothing says git-nerve pushed it (a branch it made here and deleted, unpushed)
    why = keep_branch(repo, w) if rec is not None else None
    if why:
        return f"{why} on {remote}"
    if not ownership.pushed_sha(rec)[0]:
        return f"kept branch {w.branch} on {remote} (git-nerve did not push it there)"
    return None


# -- the task's branch on the remote: what git-nerve pushed, and what others pushed onto it --------------------


def record_pushed(repo, w: Worker, remote: str, sha: str, overwrote=()) -> None:
    """A push of the task's branch landed on ``remote`` at ``sha`` (``overwrote``: commits someone else pushed
    there, archived, that it replaced): its record says git-nerve pushed it and what, which the next write
    leases (the row's columns and message say so too, for status). The same message whether a rerun pushed it
    again or not (a killed `done` converges to the same log)."""
    from .. import clock
    from ..bus import messages, workers

    if pushed(repo, w) == (True, sha) and w.pushed and w.pushed_sha == sha and not overwrote:
        return
    ownership.record_pushed(repo.paths.common_dir, w.branch, w.task_id, remote, sha)
    with repo.bus.write() as conn:
        workers.update(conn, w.task_id, pushed=1, pushed_sha=sha)
        messages.publish(conn, w.task_id, "branch_pushed", {"remote": remote, "branch": w.branch, "sha": sha,
                                                            **({"overwrote": list(overwrote)} if overwrote else {})},
                         clock.now())


def remote_value(repo, w: Worker, remote: str) -> str | None:
    """The task's branch on ``remote`` as the remote has it now (asked of it: ``ls-remote``; None: no such
    branch). A value git-nerve did not push itself is fetched (into the remote-tracking ref), so that its
    commits can be named and archived; GitError when it cannot be."""
    from ..errors import GitError
    from ..git import objectdb
    from ..git import remote as gitremote
    from .locking import fetch_branches

    now = gitremote.branch_tip(repo.cwd, remote, w.branch)
    if now is not None and now != pushed(repo, w)[1] and not objectdb.existing_commits(repo.cwd, [now]):
        fetch_branches(repo, remote, [w.branch])
        if not objectdb.existing_commits(repo.cwd, [now]):
            raise GitError(f"{w.branch} on {remote} moved while git-nerve read it; nothing changed: run the command again")
    return now


def others_on_remote(repo, w: Worker, now: str, tip: str, kept: list[str]) -> list[str]:
    """The commits of ``now`` (the task's branch on the remote) that pushing ``tip`` over it would lose: neither
    git-nerve's own last push nor ``kept`` (the integration branch) nor ``tip`` reaches them, nor a rebased copy
    in ``tip``. Newest first."""
    from ..git import history

    return history.not_held(repo.cwd, tip, now, excluding=_existing(repo, [pushed(repo, w)[1], *kept]))


def not_pushed_by_us(repo, w: Worker, now: str, kept: list[str]) -> list[str]:
    """The commits of ``now`` that git-nerve's last push of the branch and ``kept`` do not reach, newest first."""
    from ..git import history

    return history.rev_list(repo.cwd, [now], excluding=_existing(repo, [pushed(repo, w)[1], *kept]))


def _existing(repo, shas: list[str | None]) -> list[str]:
    from ..git import objectdb

    wanted = [s for s in dict.fromkeys(shas) if s]
    found = objectdb.existing_commits(repo.cwd, wanted) if wanted else set()
    return [s for s in wanted if s in found]


def name_commits(repo, shas: list[str], most: int = 5) -> str:
    """``1a2b3c4d5e6f (subject), ...`` for a line: the first ``most`` of ``shas``, then how many more."""
    from ..git import history

    info = history.commit_times_and_subjects(repo.paths.common_dir, shas[:most])
    named = [f"{s[:12]} ({info[s][1]})" if s in info else s[:12] for s in shas[:most]]
    more = len(shas) - most
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


#: the message a takeover leaves on the task's row here: whom it was taken from, and its branch on the remote then
TAKEN_OVER = "taken_over"


def record_takeover(repo, task_id: str, holder: str | None, before: str, tip: str | None) -> None:
    """The row's record of the takeover (once: a rerun keeps the first): ``done`` tells what the fenced holder
    pushed onto the branch after it (:func:`taken_from`) from what was there."""
    from .. import clock
    from ..bus import messages

    with repo.bus.write() as conn:
        if not messages.for_task(conn, task_id, kinds=(TAKEN_OVER,)):
            messages.publish(conn, task_id, TAKEN_OVER, {"from": holder, "state": before, "branch_tip": tip},
                             clock.now())


def taken_from(repo, task_id: str) -> tuple[str | None, str | None] | None:
    """(the machine this one took ``task_id`` over from, the task's branch on the remote then (None: none)), or
    None when the row here was not made by a takeover."""
    from ..bus import messages

    found = messages.for_task(repo.bus.conn, task_id, kinds=(TAKEN_OVER,))
    if not found:
        return None
    p = found[0].payload
    return (p.get("from") if isinstance(p.get("from"), str) else None,
            p.get("branch_tip") if isinstance(p.get("branch_tip"), str) else None)


__all__ = ["TAKEN_OVER", "branch_record", "keep_branch", "keep_on_remote", "name_commits", "not_pushed_by_us",
           "others_on_remote", "pushed", "record_pushed", "record_takeover", "remote_value", "taken_from"]
