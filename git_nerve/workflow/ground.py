"""Git is the ground truth of a run: what the branch and the worktree say, not the agent.

After every role the runner looks at the task's branch tip and worktree
(:func:`observe`): the commits the role added, the changes it left
uncommitted. A role that must commit (``Role.commits``) and did not, or any
role that left uncommitted changes, fails its round whatever the agent
claimed. Every commit seen on the branch is recorded on the bus
(:func:`record_commits`) unless a hook already recorded it, so an agent CLI
that bypasses hooks (Gemini's shell empties ``core.hooksPath``) still leaves a
complete history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import clock
from ..bus import messages
from ..bus.connection import Bus
from ..bus.spool import ingest_quietly
from ..errors import GitError
from ..git import refs, worktrees

#: At most this many uncommitted paths are named in a round's verdict.
NAMED_PATHS = 10


@dataclass(frozen=True)
class Observation:
    tip: str | None  #: the branch tip now (None: the branch is gone)
    commits: list[str] = field(default_factory=list)  #: new on the branch since ``before``, oldest first
    dirty: list[str] = field(default_factory=list)  #: uncommitted changes and untracked, non-ignored files
    rewritten: bool = False  #: the old tip is no longer on the branch (a rebase or reset)


def tip(workdir: str | Path, branch: str) -> str | None:
    return refs.resolve(workdir, f"refs/heads/{branch}") if branch else refs.resolve(workdir, "HEAD")


def observe(workdir: str | Path, branch: str, before: str | None) -> Observation:
    now = tip(workdir, branch)
    try:
        dirty = worktrees.dirty_files(Path(workdir))
    except GitError:
        dirty = []
    if now is None or now == before:
        return Observation(now, [], dirty)
    if before is None:
        return Observation(now, [now], dirty)
    commits = refs.commits_between(workdir, before, now)
    return Observation(now, commits, dirty, rewritten=not refs.is_ancestor(workdir, before, now))


def verdict(obs: Observation, *, must_commit: bool, branch: str) -> str | None:
    """Why the round failed according to git, or None."""
    if obs.tip is None and branch:
        return f"the branch {branch} no longer exists"
    if must_commit and not obs.commits:
        return f"no new commit on {branch or 'HEAD'}"
    if obs.dirty:
        named = ", ".join(obs.dirty[:NAMED_PATHS]) + (f" and {len(obs.dirty) - NAMED_PATHS} more" if len(obs.dirty) > NAMED_PATHS else "")
        return f"uncommitted changes left in the worktree: {named}"
    return None


def record_commits(bus: Bus, workdir: str | Path, task_id: str, commits: list[str], source: str) -> list[str]:
    """Publish a ``commit`` message for each of ``commits`` the bus does not hold yet; the recorded shas."""
    if not commits:
        return []
    ingest_quietly(bus)  # what the hooks spooled first: a commit they saw is theirs, not recorded twice
    subjects = {c: refs.commit_subject(workdir, c) for c in commits}  # git first, the bus transaction last
    with bus.write() as conn:  # check and publish in one transaction: a hook recording meanwhile is seen
        known = {m.payload.get("sha") for m in messages.for_task(conn, task_id, kinds=("commit",))}
        fresh = [c for c in commits if c not in known]
        for c in fresh:
            messages.publish(conn, task_id, "commit", {"sha": c, "subject": subjects[c], "source": source}, clock.now())
    return fresh


__all__ = ["Observation", "observe", "record_commits", "tip", "verdict"]
