"""One name, one machine (issue 36): a machine's name is claimed on the shared store by the clone that uses it.

Each clone has an **instance id** (``git config nerve.instance``: 16 random hex digits, written once by `git
nerve init`, or by the first sync of a clone that joined before names were claimed). On the git remote the name
is claimed by the ref ``refs/nerve/machines/<name>``, one commit whose ``machine.json`` names the instance that
claimed it (created with a lease on its absence: of two clones claiming one name at once exactly one wins). A
clone whose name is claimed by another instance is refused (:class:`~git_nerve.errors.HeldElsewhere`, exit 8)
with one line naming the name and `git config nerve.machine`, before anything is written; so is its sync (it
never writes that machine's log). A clone without ``nerve.machine`` gets its host name plus a short suffix, recorded
once in its git config (two clones on one laptop are two machines); a clone that already wrote a log under its
bare host name keeps that name.

Every log batch this clone writes also names its instance (``cursor.json``'s ``instance``): a remote log of this
machine's name that does not continue this clone's is adopted only when it names this instance (or none, a move
wrote it) and its cursor does not pass what this clone's bus has produced; anything else is a log this clone
did not write (:mod:`.sync` keeps publishing past it, and reports it).
"""

from __future__ import annotations

import json
import secrets

from .. import clock
from ..errors import GitError, HeldElsewhere
from ..git import config as gitconfig
from ..git import refs, remote_refs
from . import records

INSTANCE_KEY = "nerve.instance"
MACHINE_FILE = "machine.json"


def instance(cwd, *, create: bool = True) -> str | None:
    """This clone's instance id (made and recorded now when it has none and ``create``)."""
    found = (gitconfig.get_value(cwd, INSTANCE_KEY) or "").strip()
    if found or not create:
        return found or None
    made = secrets.token_hex(8)
    gitconfig.set_value(cwd, INSTANCE_KEY, made, scope="local")
    return made


def default_name(cwd, host: str) -> str:
    """The name a clone without ``nerve.machine`` takes: its host name when it already wrote a log under it (an
    older clone keeps its name), else the host name and 4 random hex digits (unique when clones share a host)."""
    if refs.resolve(cwd, records.LOGS + host):
        return host
    return f"{host[:58]}-{secrets.token_hex(2)}"


def refused(machine: str, holder: str | None) -> HeldElsewhere:
    by = f" (instance {holder[:8]})" if holder else ""
    return HeldElsewhere(f"machine name {machine} is already claimed by another clone{by}: give this clone a name of its "
                         f"own with `git config nerve.machine <name>` and run `git nerve init` again; nothing changed here")


def owner(cwd, sha: str | None) -> str | None:
    """The instance a name claim commit names (None: none readable)."""
    if not sha:
        return None
    data = remote_refs.read_files(cwd, [sha], MACHINE_FILE)[0]
    try:
        d = json.loads(data or b"null")
    except ValueError:
        return None
    return d["instance"] if isinstance(d, dict) and isinstance(d.get("instance"), str) else None


def claim(cwd, remote: str, machine: str, mine: str, *, advertised: str | None = None, known: bool = False) -> bool:
    """Claim ``machine`` for instance ``mine`` on ``remote`` (a rerun by the same instance is success); True
    when this call created the claim. HeldElsewhere when another instance holds the name; GitError when the
    remote cannot be reached or refuses. ``advertised`` / ``known``: the remote's tip of the claim as an
    ls-remote just saw it (``known``: that look was made; None then means it has none)."""
    ref = records.MACHINES + machine
    tip = advertised if known else _fetch(cwd, remote, ref)
    if tip is not None:
        if refs.resolve(cwd, ref) != tip:
            tip = _fetch(cwd, remote, ref)
        holder = owner(cwd, tip)
        if holder == mine:
            return False
        raise refused(machine, holder)
    body = json.dumps({"machine": machine, "instance": mine, "ts": clock.now()}, sort_keys=True).encode() + b"\n"
    sha = remote_refs.write_record(cwd, {MACHINE_FILE: body}, None, f"nerve machine {machine}")
    res = remote_refs.cas_push(cwd, remote, [(ref, sha, None)])
    if res.ok:
        refs.update(cwd, ref, sha, refs.resolve(cwd, ref), "git-nerve: machine name claimed")
        return True
    if res.stale:  # another clone claimed it a moment before: whose is it?
        holder = owner(cwd, _fetch(cwd, remote, ref))
        if holder == mine:
            return False
        raise refused(machine, holder)
    what = "cannot reach" if res.unreachable else ("refused by policy:" if res.policy else "refused by")
    raise GitError(f"{what} {remote} while claiming the machine name {machine}: {res.message}; nothing changed here")


def _fetch(cwd, remote: str, ref: str) -> str | None:
    res = remote_refs.fetch(cwd, remote, [f"+{ref}:{ref}"])
    if not res.ok:
        if "couldn't find remote ref" in res.output:
            return None
        what = "cannot reach" if res.unreachable else "refused by"
        raise GitError(f"{what} {remote} while reading the claim of this machine's name: {res.message}; "
                       "nothing changed here")
    return refs.resolve(cwd, ref)
