"""The git-side checks of pre-push: which remote is git-nerve's, the pushed conflict blocks and copied secrets, the
integration branch's tip and whether the pushed branch would conflict with it (pygit2, imported only when it runs)."""

from __future__ import annotations

from collections import namedtuple

from ..bus import workers
from ..git import here, refs
from .common import Where, load_site_packages, open_bus, warn

ZERO = frozenset({"0" * 40, "0" * 64})


class RefUpdate(namedtuple("RefUpdate", "local_ref local_sha remote_ref remote_sha")):
    """One line of pre-push's input."""

    __slots__ = ()

    @property
    def deletes(self) -> bool:
        return self.local_sha in ZERO


def parse_updates(text: str) -> list[RefUpdate]:
    """git's pre-push input: ``<local ref> <local sha> <remote ref> <remote sha>`` per line."""
    updates = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4:
            updates.append(RefUpdate(*parts))
    return updates


def is_nerve_remote(remote: str, url: str) -> bool:
    """Is this push aimed at the remote git-nerve merges into (``nerve.remote``, else ``origin``, else the only
    remote)? A push of the integration branch to another remote (a backup mirror) is none of our business."""
    configured, urls = None, {}
    for key, value in here.config_get_regexp(r"^(nerve\.remote|remote\..+\.(url|pushurl))$"):
        if key == "nerve.remote":
            configured = value
        else:
            urls.setdefault(key[len("remote."):key.rfind(".")], []).append(value)
    if configured is not None:
        ours = None if configured in ("", "none") else configured
    else:
        ours = "origin" if "origin" in urls else (next(iter(urls)) if len(urls) == 1 else None)
    if ours is None:
        return False
    return remote == ours or (bool(url) and url in urls.get(ours, [])) or (remote in urls.get(ours, []))


def pushed_commits(worker: workers.Worker | None, updates: list[RefUpdate]) -> list[str]:
    """The commits this push carries that the remote does not have yet (nor the integration branch), oldest first."""
    from ..git import conflicts

    tips = [u.local_sha for u in updates if not u.deletes]
    exclude = ["--remotes", *(u.remote_sha for u in updates if u.remote_sha not in ZERO)]
    if worker is not None:
        exclude.append(f"refs/heads/{worker.integration}")
    return conflicts.pushed_commits(None, tips, exclude, inherit_location=True)


def marked_files(worker: workers.Worker | None, updates: list[RefUpdate]):
    """The conflict blocks in the commits this push carries that the remote does not have yet."""
    from ..git import conflicts

    return conflicts.conflict_blocks(None, pushed_commits(worker, updates), inherit_location=True)


def copied_secret(where: Where, task_id: str, worker: workers.Worker | None, updates: list[RefUpdate]) -> str | None:
    """The refusal when a commit this push carries adds a file or a value git-nerve copied into the task's worktree
    (the one check of every exit, :func:`git_nerve.worktree_prep.secrets.published_refusal`); a task given no copies
    costs one read of the bus."""
    from ..worktree_prep.secrets import published_refusal

    with open_bus(where.common_dir, ingest=False) as bus:
        return published_refusal(bus.conn, task_id, lambda: pushed_commits(worker, updates), inherit_location=True)


def integration_tip(remote: str, integration: str) -> tuple[str, str] | None:
    """(ref, sha) of the integration branch's tip: the remote's copy if we have one, else the local branch."""
    candidates = [f"refs/remotes/{remote}/{integration}", f"refs/heads/{integration}"]
    found = here.ref_objects(candidates)
    for ref in candidates:
        if ref in found:
            return ref, found[ref]
    return None


def warn_if_conflicting(where: Where, remote: str, worker: workers.Worker, updates: list[RefUpdate]) -> None:
    """One warning per pushed branch that would conflict with the integration branch's tip."""
    tip = integration_tip(remote, worker.integration)
    if tip is None:
        return
    ref, onto = tip
    target = f"refs/heads/{worker.integration}"
    for u in updates:
        if u.deletes or not u.remote_ref.startswith("refs/heads/") or u.remote_ref == target or u.local_sha == onto:
            continue
        if refs.is_ancestor_quiet(None, onto, u.local_sha, inherit_location=True):
            continue  # already contains the integration tip: nothing to conflict with
        load_site_packages()
        from ..git import conflicts

        files = conflicts.would_conflict(where.common_dir, onto, u.local_sha)
        if files:
            branch = u.remote_ref[len("refs/heads/"):]
            shown = ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else "")
            warn("pre-push", f"{branch} would conflict with {worker.integration} ({ref}) in {shown}; "
                             "`git worker done` rebases onto it")
