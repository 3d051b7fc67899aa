"""Git's own leftovers that a killed git child of ours left, proven through its dead liveness token.

See :mod:`.repair` (which re-exports :func:`clean_git_leftovers` and :func:`say`) for what is repaired, the
proof, and the residual window. Standard library only (and the git binary through :mod:`..git`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .. import liveness
from ..git import destroy, worktrees


def say(line: str) -> None:
    """One line on stderr for each repair (never on stdout: --json output stays data)."""
    print(f"repaired: {line}", file=sys.stderr, flush=True)


# -- git's own leftovers -------------------------------------------------------------------------------

#: lock files of one worktree's git dir (the main one's is the common dir; a linked one's, its admin dir)
WORKTREE_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "AUTO_MERGE.lock", "FETCH_HEAD.lock",
                  # what a killed rebase / cherry-pick / merge step leaves (pseudorefs and message files)
                  "MERGE_MSG.lock", "MERGE_HEAD.lock", "MERGE_MODE.lock", "CHERRY_PICK_HEAD.lock", "REBASE_HEAD.lock",
                  "REVERT_HEAD.lock", "SQUASH_MSG.lock", "rebase-merge/git-rebase-todo.lock")
#: lock files of the common dir that any git of the repository may take (besides refs/**/*.lock)
SHARED_LOCKS = ("packed-refs.lock", "config.lock", "shallow.lock", "objects/maintenance.lock", "gc.log.lock")


def kept_lock_line(path: Path | str) -> str:
    return (f"kept: {path}: a git lock file of another process (a git still running?); "
            f"if no git is running there, remove it")


def _candidate_locks(common: Path, admins: list[tuple[str, set[str] | None]] | None = None
                     ) -> list[tuple[Path, str | None]]:
    """(lock file, the git dir whose worktree it belongs to; None: shared by the whole repository).
    Every command looks (spawn, start, done, ...): a real path is made only for a lock file that is there.
    ``admins``: :func:`_admin_listing` when the caller has it (each admin dir is listed once per command)."""
    found = _worktree_locks(os.fspath(common))
    found += [(path, None) for n in SHARED_LOCKS if _is_file(path := common / n)]
    for admin, here in (_admin_listing(common) if admins is None else admins):
        found += _worktree_locks(admin, here)
    for top, _dirs, files in os.walk(common / "refs"):  # symlinked directories are not followed
        found += [(path, None) for f in files if f.endswith(".lock") and _is_file(path := Path(top) / f)]
    return found


def _worktree_locks(git_dir: str, here: set[str] | None = None) -> list[tuple[Path, str | None]]:
    """``here``: the names in ``git_dir`` when the caller listed it (None: listed now)."""
    if here is None:
        try:
            here = set(os.listdir(git_dir))  # one listing instead of a stat per lock name
        except OSError:
            return []
    return [(path, os.path.realpath(git_dir)) for n in WORKTREE_LOCKS
            if n.split("/", 1)[0] in here and _is_file(path := Path(git_dir) / n)]


def _admin_listing(common: Path) -> list[tuple[str, set[str] | None]]:
    """Each linked worktree's admin dir with the names in it (None: not a directory one can list): one
    listing of each, which finding unfinished adds and lock files share."""
    try:
        with os.scandir(common / "worktrees") as entries:
            paths = [e.path for e in entries]
    except OSError:
        return []
    listing = []
    for path in paths:
        try:
            listing.append((path, set(os.listdir(path))))
        except OSError:
            listing.append((path, None))
    return listing


def _is_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _ident(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def _covers(record: dict | None, scope: str | None, admin_of_scope: Path | None) -> bool:
    """True when a git child so recorded may have taken a lock of ``scope`` (None record: cannot tell: yes)."""
    if record is None:
        return True
    if scope is None:
        return True
    if record.get("git_dir") == scope:
        return True
    add = record.get("add")
    return bool(add) and admin_of_scope is not None and _admin_matches(admin_of_scope, add)


def _admin_matches(admin: Path, add: str) -> bool:
    """True when ``admin`` is the admin dir `git worktree add <add>` makes: its ``gitdir`` names ``add``, or
    git has not written it (whole) yet and the dir has the name git gives it (the path's base name, + digits)."""
    expected = os.path.join(add, ".git")
    try:
        named = (admin / "gitdir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        named = ""
    if named:
        full = os.path.realpath(os.path.join(admin, named))
        return full == os.path.realpath(expected) or (os.path.isabs(named) and expected.startswith(named))
    base, name = os.path.basename(add), admin.name
    return name == base or (name.startswith(base) and name[len(base):].isdigit())


def stale_git_locks(common: Path, scan: liveness.Scan) -> tuple[list[tuple[Path, object]], list[Path]]:
    """(git lock files proven left by a killed git child of ours, each with its dead token (None for the lock:
    a live git of ours may hold it too, so not now); lock files of anyone else, which are kept).

    Proof: a dead token (:mod:`git_nerve.liveness`) had a git child running whose worktree the lock belongs
    to (any of ours, for the repository's shared locks), the lock is not older than that child, and no live
    token has a git child there. ``scan`` must be taken after the locks are listed: pass the listing
    (:func:`_candidate_locks`) made before it through :func:`clean_git_leftovers`.
    """
    return _judge_locks(_candidate_locks(common), scan)


def _judge_locks(locks, scan: liveness.Scan):
    dead_locks: list[tuple[Path, object]] = []
    others: list[Path] = []
    live = scan.alive_records("git")
    for path, scope in locks:
        ident = _ident(path)
        if ident is None:
            continue
        admin = Path(scope) if scope is not None and Path(scope).parent.name == "worktrees" else None
        owner = None
        for d in scan.dead:
            if any(ident[1] >= mtime and _covers(r, scope, admin) for r, mtime in d.records("git")):
                owner = d
                break
        if any(_covers(r, scope, admin) for r in live):
            # a live git of a git-nerve command may hold it: not judged now (and a dead token that may have
            # made it is kept for the next command)
            if owner is not None:
                dead_locks.append((None, owner))
            continue
        if owner is None:
            others.append(path)
        elif _ident(path) == ident:
            dead_locks.append((path, owner))
    return dead_locks, others


def _initializing(common: Path, admins: list[tuple[str, set[str] | None]] | None = None) -> list[Path]:
    """Admin dirs of worktrees whose `git worktree add` has not finished (or died). ``admins``:
    :func:`_admin_listing` when the caller has it."""
    found = []
    for path, here in (_admin_listing(common) if admins is None else admins):
        admin = Path(path)
        reason = None
        if here is None or "locked" in here:
            try:
                reason = (admin / "locked").read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                reason = None
        no_gitdir = not (admin / "gitdir").exists() if here is None else "gitdir" not in here
        if reason == "initializing" or (no_gitdir and admin.is_dir()):
            found.append(admin)
    return found


def _dead_add(admin: Path, scan: liveness.Scan) -> tuple[str, object] | None | bool:
    """The path a dead token's `git worktree add` was making in ``admin`` (with that token); True when a live
    token may be making it; None when no token says (cannot tell: kept)."""
    for r in scan.alive_records("git"):
        if r is None or (r.get("add") and _admin_matches(admin, r["add"])):
            return True
    for d in scan.dead:
        for r, _ in d.records("git"):
            if r.get("add") and _admin_matches(admin, r["add"]):
                return r["add"], d
    return None


class _Repair:
    """One repair's findings and its door scope (built only when something is to be removed)."""

    def __init__(self, common: Path, cwd: Path, worktree_lock: Path | None, scope, add_lock=None):
        self.common, self.cwd, self.worktree_lock, self.scope = common, cwd, worktree_lock, scope
        self.add_lock = add_lock  # path -> the lock of that worktree path (None: worktree_lock for every path)
        self.repaired: list[str] = []
        self.kept: list[str] = []
        self.blocked: set[int] = set()  # dead tokens something of which is left: not consumed this time
        self._door: destroy.Scope | None = None

    def door(self) -> destroy.Scope:
        if self._door is None:
            self._door = self.scope() if self.scope is not None else destroy.tmp_scope(self.common)
        return self._door

    def worktree_locked(self):
        from ..locks import hold

        return hold(self.worktree_lock, what="the worktree lock") if self.worktree_lock is not None else _null()

    def unfinished_adds(self, admins: list[Path], sc: liveness.Scan) -> None:
        for admin in admins:
            # judged without a lock: an add in flight (its token alive) is someone's live work and is skipped;
            # only a dead one is removed, under the lock of its path (``add_lock``), never behind other adds
            if not admin.exists():
                continue
            found = _dead_add(admin, sc)
            if found is True:
                continue
            if found is None:
                if not sc.alive_records("git"):
                    self.kept.append(f"kept: {admin}: an unfinished `git worktree add` no git-nerve command "
                                     f"recorded; if no git is running there, remove that directory (git's entry for "
                                     f"the worktree goes with it; `git worktree prune` keeps a locked one)")
                continue
            self._remove_dead_add(admin, *found)

    def _remove_dead_add(self, admin: Path, wt: str, owner) -> None:
        """Remove what the dead add of ``wt`` left in ``admin``, holding the lock of that path (None: the caller
        holds what it must)."""
        from ..locks import hold

        lock = self.add_lock(wt) if self.add_lock is not None else self.worktree_lock
        with hold(lock, what="the worktree lock") if lock is not None else _null():
            if not admin.exists():
                return
            try:  # the path our own token recorded for that add, never read from git's files
                destroy.remove_unfinished_add(admin, self.door(), worktree=wt)
            except destroy.Refused as exc:
                self.kept.append(_kept_line(f"{exc.message} (left by an unfinished `git worktree add`)"))
                self.blocked.add(id(owner))
                return
        self.repaired.append(f"removed the unfinished worktree {wt} left by a killed `git worktree add`")
        if admin.exists():
            self.blocked.add(id(owner))

    def temporary_checkouts(self, listed: list, sc: liveness.Scan) -> None:
        dead, unknown = worktrees.dead_temporary_checkouts(self.common, sc, listed)
        if dead:
            with self.worktree_locked():
                for path, owner in dead:
                    if not path.exists():
                        # killed inside git's removal, after the files went: git's registration of it goes too
                        # (the door drops that one entry, never a global prune)
                        if destroy.prune_entry(self.cwd, path, self.door()):
                            self.repaired.append(f"dropped git's registration of the temporary checkout {path} "
                                                 f"whose removal was killed")
                        continue
                    line = destroy.discard(self.cwd, path, self.door())
                    if line:
                        self.kept.append(_kept_line(line))
                    if path.exists():
                        self.blocked.add(id(owner))
                    else:
                        self.repaired.append(f"removed the temporary checkout {path} a killed merge left")
        for path in unknown:
            self.kept.append(f"kept: {path}: a temporary checkout no git-nerve command recorded; if no git-nerve "
                             f"command is running, remove it with `git worktree remove -f -f {path}`")

    def locks(self, locks, sc: liveness.Scan) -> None:
        dead_locks, others = _judge_locks(locks, sc)
        for lock, owner in dead_locks:
            if lock is None:
                self.blocked.add(id(owner))
                continue
            try:  # its dead token proves it ours; a link or directory at a lock's name is kept
                if not destroy.remove_own_file(lock, within=self.common, kind="git-lock"):
                    continue
            except (OSError, destroy.Refused):
                self.blocked.add(id(owner))
                continue
            self.repaired.append(f"removed {lock}, a lock file left by a killed git of git-nerve")
        self.kept += [kept_lock_line(p) for p in others if p.exists()]


def clean_git_leftovers(common: Path, *, cwd: Path, worktree_lock: Path | None = None, scope=None,
                        add_lock=None) -> list[str]:
    """Repair what killed git processes of ours left in the repository whose common dir is ``common``.

    Only what a dead liveness token of ours covers (:mod:`git_nerve.liveness`: no ``/proc``, no ages); what no
    token covers is kept, with one ``kept:`` line saying what to do. ``worktree_lock``: our worktrees lock,
    taken around the removal of unfinished worktrees (None: the caller already holds it); ``add_lock``: path ->
    the lock of that worktree path, taken instead around the removal of a dead add there. ``scope``: a callable
    returning the door's :class:`..git.destroy.Scope` (built only when something is to be removed): every
    removal goes through the door (:mod:`..git.destroy`), which keeps what it cannot prove ours. Cheap when there
    is nothing to repair (a few stats).
    """
    fix = _Repair(common, cwd, worktree_lock, scope, add_lock)
    # everything is listed before the tokens are read: what a live command makes is recorded before it exists
    listing = _admin_listing(common)  # each admin dir listed once, for unfinished adds and lock files
    admins = _initializing(common, listing)
    listed_tmp = worktrees.temporary_checkouts(common)
    locks = _candidate_locks(common, listing)
    if not (admins or listed_tmp or locks or _has_tokens(common)):
        _hooks_temporaries(common, fix.repaired)
        return _say_all(fix.repaired, fix.kept)
    with liveness.scan(common) as sc:
        if admins:
            fix.unfinished_adds(admins, sc)
        fix.temporary_checkouts(listed_tmp, sc)
        fix.locks(locks, sc)
        if sc.dead:  # a command of ours was killed: it may have been writing a repair marker
            _marker_temporaries(common, listing, fix.repaired)
        for d in sc.dead:
            if id(d) not in fix.blocked:
                d.consume()
    _hooks_temporaries(common, fix.repaired)
    return _say_all(fix.repaired, fix.kept)


def _kept_line(line: str) -> str:
    """The door's "kept X: why" as one ``kept: X: why`` line."""
    return f"kept: {line[len('kept '):] if line.startswith('kept ') else line}"


def _has_tokens(common: Path) -> bool:
    try:
        return bool(os.listdir(liveness.alive_dir(common)))
    except OSError:
        return False


def _hooks_temporaries(common: Path, repaired: list[str]) -> None:
    from ..git.destroy import remove_dead_temporaries

    for tmp in remove_dead_temporaries(common / "hooks"):
        repaired.append(f"removed {tmp}, a half-written hook a killed install left")


def _marker_temporaries(common: Path, listing: list[tuple[str, set[str] | None]], repaired: list[str]) -> None:
    """The temporaries of repair markers (:func:`.repair.set_marker`: ``.<marker>.nerve-<pid>.tmp``, flocked
    while written) a killed command left in the main worktree's or a linked worktree's ``nerve`` dir; each removed
    only once its writer is proven gone (its flock can be taken: :func:`..git.destroy.remove_dead_temporaries`)."""
    from ..git.destroy import remove_dead_temporaries

    dirs = [common / "nerve"] + [Path(admin) / "nerve" for admin, here in listing if here is None or "nerve" in here]
    for d in dirs:
        for tmp in remove_dead_temporaries(d):
            repaired.append(f"removed {tmp}, a repair marker a killed command was writing")


def _say_all(repaired: list[str], kept: list[str]) -> list[str]:
    for line in repaired:
        say(line)
    for line in kept:
        print(line, file=sys.stderr, flush=True)
    return repaired


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
