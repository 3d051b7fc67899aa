"""Whether a claim as the shared store holds it allows a transition (pure: no I/O), the same for every backend:
a transition moves a claim held by this machine from the state it expects; a new task (``expected`` None) is
created only where no claim exists; ``take`` (spawn, takeover) makes this machine the holder."""

from __future__ import annotations

from ..errors import HeldElsewhere, InvalidTransition, StoreMoved
from .records import Record

#: the verbs any machine may make of a task another machine holds (a review, a merge), its holder unchanged
ANY_MACHINE = ("approve", "request changes for", "merge")

#: the claim states each ``[shared] takeover`` setting lets a sync take over (never COMPLETED or FAILED)
AUTO_STATES = {"idle": ("ASSIGNED", "IN_REVIEW", "APPROVED"),
               "auto": ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")}


def already(rec: Record, new: str, verb: str, machine: str) -> bool:
    """Does the claim record this very transition by this machine already (a rerun: success)? For the machine
    holding the task, the same transition made by another machine counts too (a review or merge made from there,
    PostgreSQL: this machine's row follows it)."""
    return rec.state == new and rec.verb == verb and machine in (rec.machine, rec.owner)


def taken_here(rec: Record | None, expected: str | None, new: str, take: bool, machine: str) -> bool:
    """A task this machine took over (or spawned) is spawned here: nothing to claim."""
    return rec is not None and take and expected is None and rec.owner == machine and rec.state == new


def refusal(task_id: str, current: Record | None, expected: str | None, take: bool, machine: str,
            holder: str | None = None, *, by_any: bool = False) -> HeldElsewhere | None:
    """Why the claim as last seen forbids this transition (None: it allows it). ``holder``: a takeover judged
    the task held by that machine; another holder now means another taker got there first. ``by_any``: a review
    or merge of another machine's task (:data:`ANY_MACHINE`), made from here, its holder unchanged."""
    if current is None:
        return None
    if holder is not None and current.owner != holder:
        return held(task_id, current)
    if expected is not None and (current.state != expected or (current.owner != machine and not take and not by_any)):
        return held(task_id, current)  # moved meanwhile, or held by another machine (this one is fenced off)
    if expected is None:
        # a new task where a claim exists: only a rerun of this machine's own spawn (or the spawn after its
        # takeover), which :func:`taken_here` lets through first; a claim this machine holds in another state
        # is never moved back to ASSIGNED by a spawn
        return held(task_id, current)
    return None


def held(task_id: str, rec: Record) -> HeldElsewhere:
    moved = "" if rec.machine == rec.owner else f", moved there by {rec.machine}'s {rec.verb}"
    return HeldElsewhere(f"task {task_id} is held by machine {rec.owner} ({rec.state}{moved}); nothing changed here "
                         "(`git nerve sync` then `git worker status` shows every machine's tasks)")


def ours_to_take(task_id: str, owner: str, state: str, machine: str) -> bool:
    """Before a takeover: True when the task is this machine's already (a rerun: the spawn that follows finishes
    it); InvalidTransition when it is finished (nothing to take over); False: judge the holder's lease."""
    if owner == machine:
        return True
    if state in ("COMPLETED", "FAILED"):
        raise InvalidTransition(f"task {task_id} is {state} on machine {owner}: nothing to take over")
    return False


def moved_off(mark: dict) -> StoreMoved:
    """The old store's mark of a move (:mod:`.move`) names another store: this clone's nerve.toml is out of date."""
    to = "PostgreSQL" if mark.get("backend") == "postgres" else f"the git remote ({mark.get('remote') or 'origin'})"
    schema = f", schema {mark['schema']}" if mark.get("schema") else ""
    by = f" by machine {mark['machine']}" if mark.get("machine") else ""
    return StoreMoved(f"this repository's shared state moved to {to}{schema}{by}: pull the new nerve.toml "
                      "(`git pull`) and run `git nerve init` (on PostgreSQL, after `git config nerve.database <url>`); "
                      "nothing changed here")


def moved_claim(task_id: str, rec: Record) -> StoreMoved:
    """A claim the old store froze when a move copied it (its last record's verb is ``move``)."""
    return StoreMoved(f"the claim of {task_id} was moved to another shared store by machine {rec.machine}: pull the "
                      "new nerve.toml (`git pull`) and run `git nerve init`; nothing changed here")
