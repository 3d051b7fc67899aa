"""The conflict radar across machines (shared mode, issue 24).

A machine cannot see another machine's commits before they are pushed, so each machine publishes what its
tasks changed: at every recompute (a commit of a task starts one), each live task whose branch tip moved since
it was last published gets a ``radar_side`` message (its :func:`~git_nerve.git.overlap.footprint`: the files
and the line spans of the merge base it changed, committed work only), which the next sync carries in the
machine's log. Another machine's recompute compares each of its own live tasks with the last footprint of
each task another machine holds live (the shared cache): exactly, by the same in-memory merge as two local
tasks, when that task's commit is here (a fetch of its pushed branch brought it), else from the two
footprints. Each machine compares and tells only its own tasks: the pair's other side is told by its holder,
whose radar sees this machine's footprints the same way.
"""

from __future__ import annotations

import time

from ..bus import messages
from ..bus import shared as shared_cache
from . import cache

#: the message kind of a published footprint
SIDE = "radar_side"
#: the claim states whose task is still on its way (the radar's live states)
LIVE_CLAIMS = ("ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED")


def machine_here(conn) -> str | None:
    """This machine's name once shared mode has run here (a sync or a claim wrote it), else None."""
    return shared_cache.get_meta(conn, shared_cache.MACHINE)


def stamp(conn) -> str | None:
    """What the remote sides' inputs are: changes when a footprint or a claim arrives (None without shared mode)."""
    return shared_cache.radar_stamp(conn, SIDE)


def stale(common_dir, conn) -> bool:
    """Did other machines' footprints or claims change since the radar's last result (a sync brought some)?
    Then its pairs across machines are out of date. Never in one-machine mode."""
    now = stamp(conn)
    return now is not None and now != cache.load(common_dir).get("remote_stamp")


def publish(repo, ov, sides: dict[str, dict], integration_tip: str | None, published: dict[str, str]) -> dict[str, str]:
    """A ``radar_side`` message for each local live task whose tip moved since ``published`` ({task: commit});
    the new ``published``. Only in shared mode."""
    from ..git import overlap

    if machine_here(repo.bus.conn) is None:
        return published
    out = {t: c for t, c in published.items() if t in sides}
    todo = {t: s for t, s in sides.items() if t != cache.INTEGRATION and out.get(t) != s["commit"]}
    if not todo:
        return out
    prints = {t: overlap.footprint(ov, s["commit"], ov.tree_of(s["commit"]), integration_tip) for t, s in todo.items()}
    with repo.bus.write() as conn:
        for task, fp in prints.items():
            if fp["files"] or task in published:  # a task with no work of its own yet has nothing to say
                messages.publish(conn, task, SIDE, {"commit": todo[task]["commit"], **fp}, time.time())
            out[task] = todo[task]["commit"]
    return out


def compare(repo, ov, sides: dict[str, dict], integration_tip: str | None, old: dict) -> tuple[dict, list[dict]]:
    """Each local live task against each live task another machine holds: ({key: pair record}, the records of
    the pairs that became conflicts). ``old``: the last result's records, reused while their inputs are the same."""
    from ..git import overlap

    conn = repo.bus.conn
    here = machine_here(conn)
    if here is None:
        return {}, []
    theirs = shared_cache.remote_sides(conn, here, SIDE, LIVE_CLAIMS)
    out: dict[str, dict] = {}
    new: list[dict] = []
    mine_prints: dict[str, dict] = {}
    for a, s in sorted(sides.items()):
        if a == cache.INTEGRATION:
            continue
        for b, (machine, event_id, fp) in sorted(theirs.items()):
            if b in sides or not isinstance(fp, dict):
                continue
            key = f"{a}|{machine}:{b}"
            commit = fp.get("commit")
            have = isinstance(commit, str) and _have(ov, commit)  # a fetch brought it: compare exactly from then on
            inputs = [s["commit"], s["tree"], commit, event_id, integration_tip, have]
            was = old.get(key)
            if was and was.get("inputs") == inputs:
                out[key] = was
                continue
            if have:
                result = ov.compare_on(overlap.Side(s["commit"], s["tree"]), overlap.Side(commit, ov.tree_of(commit)),
                                       integration_tip if integration_tip and _have(ov, integration_tip) else None)
            else:
                if a not in mine_prints:
                    mine_prints[a] = overlap.footprint(ov, s["commit"], s["tree"], integration_tip)
                result = overlap.compare_footprints(mine_prints[a], _clean(fp))
            out[key] = {"a": a, "b": b, "machine": machine, "inputs": inputs, **result.as_dict(), "at": time.time()}
            if result.kind == "conflict" and ((was or {}).get("kind") != "conflict"
                                              or was.get("files") != out[key]["files"]):
                new.append(out[key])
    return out, new


def _have(ov, commit: str) -> bool:
    try:
        ov.tree_of(commit)
        return True
    except Exception:  # noqa: BLE001 - not here (pygit2 raises KeyError), or not a commit
        return False


def _clean(fp: dict) -> dict:
    """A footprint read from another machine's log, made safe to compare (anything malformed is left out)."""
    files = {}
    found = fp.get("files")
    for path, f in (found.items() if isinstance(found, dict) else ()):
        try:
            spans = [[int(x), int(y)] for x, y in f["spans"]]
            lines = [[int(x), int(y)] for x, y in f["lines"]]
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if len(spans) == len(lines) and isinstance(path, str):
            files[path] = {"blob": f.get("blob"), "spans": spans, "lines": lines}
    return {"base": fp.get("base"), "files": files}


__all__ = ["LIVE_CLAIMS", "SIDE", "compare", "machine_here", "publish", "stale", "stamp"]
