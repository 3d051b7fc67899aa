"""What a killed command (or a killed git child of one) leaves behind, found and repaired by the next command.

A git process killed half-way leaves its own leftovers, which git never cleans up by itself:

* a worktree whose ``git worktree add`` died: its admin dir is still ``locked`` with the reason
  "initializing" (git removes that lock only once HEAD is written and the checkout is done), its
  HEAD may be 0000… (then every ``git fetch`` in the repository fails: "did not send all
  necessary objects"), its checkout half done (an index that stages the deletion of every file);
* ``*.lock`` files (``index.lock``, ``refs/heads/x.lock``, ``git-rebase-todo.lock``, ...) whose
  owner is dead, which make every later git command in that place fail.

:func:`clean_git_leftovers` removes those, each with one line on stderr saying what was repaired, but only
when git-nerve can *prove* that a git of its own made them and is gone: each git-nerve command holds a
liveness token that its git children inherit (:mod:`git_nerve.liveness`, no ``/proc``: the same on macOS and
in another PID namespace). A lock file is removed when a dead token had a git child running in the worktree the
lock belongs to (any of its git children, for the repository's shared locks: refs, packed-refs, config), the
lock is not older than that child (same filesystem clock) and no live token has a git child there. An unfinished
`git worktree add` and a temporary checkout are removed when a dead token recorded making them. Everything else
(a person's ``git commit`` waiting in its editor, another tool's git, a leftover from before tokens) is kept
with one ``kept:`` line naming it and what to do; a command that then needs it fails with git's message and
that hint (exit 4). A repaired token is consumed (removed), so nothing is acted on twice.

Residual window, honestly: between the kill of our command and the next repair, a person's git may take a
lock in the very worktree our killed git child was in (or a shared ref lock of the repository), and keep it
(an editor): that lock is newer than our child and is removed as ours. The repair runs at the start of the
next git-nerve command, so the window is "a git of yours started in that worktree after git-nerve was killed
there and before you ran git-nerve again". The last check (the lock is still the one judged: same inode and
times) and its removal are not atomic either: a lock replaced in those microseconds may be removed.
In-process pygit2 writes take no git lock (objects only), so only git children need covering.

Our own multi-step git operations leave a marker first (``<worktree git dir>/nerve/<name>``), so a
rerun knows an interrupted one was ours and how to finish or undo it:

* ``removing``: a worktree removal (``cancel --cleanup``, merge's cleanup) whose archive is made:
  what is missing from the worktree was deleted by the removal itself, which the rerun resumes;
* ``done-reset``: ``done``'s ``git reset --keep`` from the old tip to the rebased one: a rerun
  puts the files the killed reset already wrote back as they were at the old tip;
* ``done-rebase``: ``done``'s own ``git rebase`` (started on a conflict libgit2 found): killed
  before it stopped on a conflict, it is aborted and ``done`` starts again.

Standard library only (and the git binary through :mod:`..git.cli`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from .. import liveness
from ..fs import replace_file
from ..git import cli, destroy, worktrees


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


def _candidate_locks(common: Path) -> list[tuple[Path, str | None]]:
    """(lock file, the git dir whose worktree it belongs to; None: shared by the whole repository)."""
    main = os.path.realpath(common)
    found: list[tuple[Path, str | None]] = [(common / n, main) for n in WORKTREE_LOCKS]
    found += [(common / n, None) for n in SHARED_LOCKS]
    admin_root = common / "worktrees"
    if admin_root.is_dir():
        for admin in admin_root.iterdir():
            found += [(admin / n, os.path.realpath(admin)) for n in WORKTREE_LOCKS]
    refs_dir = common / "refs"
    if refs_dir.is_dir():
        found += [(p, None) for p in refs_dir.rglob("*.lock")]
    return [(p, scope) for p, scope in found if p.is_file() and not p.is_symlink()]


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


def _initializing(common: Path) -> list[Path]:
    """Admin dirs of worktrees whose `git worktree add` has not finished (or died)."""
    root = common / "worktrees"
    if not root.is_dir():
        return []
    found = []
    for admin in root.iterdir():
        try:
            reason = (admin / "locked").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            reason = None
        if reason == "initializing" or (admin.is_dir() and not (admin / "gitdir").exists()):
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
    repaired: list[str] = []
    kept: list[str] = []
    door_scope = None

    def door() -> destroy.Scope:
        nonlocal door_scope
        if door_scope is None:
            door_scope = scope() if scope is not None else destroy.tmp_scope(common)
        return door_scope

    # everything is listed before the tokens are read: what a live command makes is recorded before it exists
    admins = _initializing(common)
    listed_tmp = worktrees.temporary_checkouts(common)
    locks = _candidate_locks(common)
    if not (admins or listed_tmp or locks or _has_tokens(common)):
        _hooks_temporaries(common, repaired)
        return _say_all(repaired, kept)
    with liveness.scan(common) as sc:
        blocked: set[int] = set()  # dead tokens something of which is left: not consumed this time
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
                    kept.append(f"kept: {admin}: an unfinished `git worktree add` no git-nerve command "
                                f"recorded; if no git is running, remove it and run `git worktree prune`")
                continue
            wt, owner = found
            _remove_dead_add(admin, wt, owner, door, add_lock or (lambda _: worktree_lock), repaired, kept, blocked)
        dead, unknown = worktrees.dead_temporary_checkouts(common, sc, listed_tmp)
        if dead:
            from ..locks import hold

            with hold(worktree_lock, what="the worktree lock") if worktree_lock is not None else _null():
                for path, owner in dead:
                    if not path.exists():
                        continue
                    line = destroy.discard(cwd, path, door())
                    if line:
                        kept.append(_kept_line(line))
                    if path.exists():
                        blocked.add(id(owner))
                    else:
                        repaired.append(f"removed the temporary checkout {path} a killed merge left")
        for path in unknown:
            kept.append(f"kept: {path}: a temporary checkout no git-nerve command recorded; if no git-nerve "
                        f"command is running, remove it with `git worktree remove --force {path}`")
        dead_locks, others = _judge_locks(locks, sc)
        for lock, owner in dead_locks:
            if lock is None:
                blocked.add(id(owner))
                continue
            try:
                lock.unlink()
            except FileNotFoundError:
                continue
            except OSError:
                blocked.add(id(owner))
                continue
            repaired.append(f"removed {lock}, a lock file left by a killed git of git-nerve")
        kept += [kept_lock_line(p) for p in others if p.exists()]
        for d in sc.dead:
            if id(d) not in blocked:
                d.consume()
    _hooks_temporaries(common, repaired)
    return _say_all(repaired, kept)


def _remove_dead_add(admin: Path, wt: str, owner, door, lock_of, repaired: list[str], kept: list[str],
                     blocked: set[int]) -> None:
    """Remove what the dead add of ``wt`` left in ``admin``, holding the lock of that path (None: the caller
    holds what it must)."""
    from ..locks import hold

    lock = lock_of(wt)
    with hold(lock, what="the worktree lock") if lock is not None else _null():
        if not admin.exists():
            return
        try:  # the path our own token recorded for that add, never read from git's files
            destroy.remove_unfinished_add(admin, door(), worktree=wt)
        except destroy.Refused as exc:
            kept.append(_kept_line(f"{exc.message} (left by an unfinished `git worktree add`)"))
            blocked.add(id(owner))
            return
    repaired.append(f"removed the unfinished worktree {wt} left by a killed `git worktree add`")
    if admin.exists():
        blocked.add(id(owner))


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


# -- markers of our own multi-step operations ----------------------------------------------------------------


def marker(git_dir: Path, name: str) -> Path:
    return git_dir / "nerve" / name


def set_marker(git_dir: Path, name: str, data: dict) -> None:
    path = marker(git_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a full disk: no half-written marker left behind
    replace_file(path, json.dumps(data), tmp_name=f"{name}.{os.getpid()}.tmp", create_mode=0o666)


def get_marker(git_dir: Path, name: str) -> dict | None:
    try:
        data = json.loads(marker(git_dir, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def clear_marker(git_dir: Path, name: str) -> None:
    marker(git_dir, name).unlink(missing_ok=True)


def removal_interrupted(wt: Path, common: Path | None = None) -> bool:
    """True when ``wt`` is what a killed removal of ours left (its archive was made first)."""
    admin = _admin_dir_of(wt, common)
    return admin is not None and marker(admin, "removing").exists()


def _admin_dir_of(wt: Path, common: Path | None = None) -> Path | None:
    """The admin dir of worktree ``wt``: the one its ``.git`` file points at, readable even when the worktree is
    half deleted; when a killed ``git worktree remove`` already deleted that file, the one under ``common``'s
    ``worktrees/`` whose ``gitdir`` names ``wt``."""
    dotgit = wt / ".git"
    try:
        text = dotgit.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return _admin_dir_naming(wt, common) if common is not None and not dotgit.exists() else None
    if not text.startswith("gitdir:"):
        return None
    path = Path(text[len("gitdir:"):].strip())
    if not path.is_absolute():
        path = (wt / path).resolve()
    return path if path.is_dir() else None


def _admin_dir_naming(wt: Path, common: Path) -> Path | None:
    want = os.path.realpath(wt)
    try:
        admins = list((common / "worktrees").iterdir())
    except OSError:
        return None
    for admin in admins:
        try:
            named = destroy.worktree_of_gitdir(admin)  # verified; a relative one against the admin dir
        except destroy.Refused:
            continue
        if os.path.realpath(named) == want:
            return admin
    return None


def remove_worktree(cwd: Path, wt: Path, *, force: bool, scope, task: str, common: Path | None = None) -> None:
    """``git worktree remove`` through the door, marked first so that a rerun after a kill resumes it (a
    removal killed after git deleted the worktree's ``.git`` file is finished by git itself, the file
    written back from the admin dir that names it)."""
    admin = _admin_dir_of(wt, common)
    resume = admin is not None and marker(admin, "removing").exists()
    if admin is not None and not resume:
        set_marker(admin, "removing", {"pid": os.getpid(), "at": time.time()})
    from .. import faults

    faults.point("cleanup.before-remove")  # marked, git not started
    # git refuses a plain removal of a worktree with initialised submodules; the callers have checked
    # there is nothing unsaved in it (or its submodules) first, or were told --force
    submodules = admin is not None and (admin / "modules").is_dir()
    try:
        destroy.remove_worktree(cwd, wt, scope, task=task, force=force or resume or submodules,
                                admin=admin if resume else None)
    except Exception:
        if admin is not None and not resume:
            clear_marker(admin, "removing")
        raise
    if resume:
        say(f"finished removing the worktree {wt} (its removal was interrupted)")


def undo_partial_reset(wt: Path, git_dir: Path, name: str = "done-reset") -> str | None:
    """After a kill inside a checkout move OLD -> NEW (done's ``git reset --keep``, merge's ``git merge
    --ff-only`` of the integration checkout; ``name`` is the marker set before it): put back, as at OLD,
    the files it wrote. Only files whose content is exactly NEW's are touched, so nothing of a person's is lost.

    Returns a line saying what was repaired, or None when there was nothing to do.
    """
    m = get_marker(git_dir, name)
    if m is None:
        return None
    old, new = m.get("from"), m.get("to")
    head = cli.run(["rev-parse", "-q", "--verify", "HEAD"], cwd=wt, check=False).stdout.strip()
    line = None
    if old and new and head == old:
        changed = [p for p in cli.run(["diff", "--name-only", "-z", "--no-renames", old, new], cwd=wt).stdout.split("\0") if p]
        restored = []
        for rel in changed:
            path = wt / rel
            now = _blob_of_file(wt, path)
            at_new, at_old = _blob_at(wt, new, rel), _blob_at(wt, old, rel)
            if now is not None and now != at_old and now != at_new and _cut_off(wt, path, at_new):
                now = at_new  # git was stopped (killed, or the disk filled) while writing NEW's content
            if now is None or now == at_old or now != at_new:
                if now is None and at_old is not None and at_new is None:
                    restored.append(rel)  # the killed reset deleted it
                    cli.run(["checkout", old, "--", rel], cwd=wt)
                continue
            restored.append(rel)
            if at_old is None:
                path.unlink()
            else:
                cli.run(["checkout", old, "--", rel], cwd=wt)
        # the index was never written (its lock died with git), but make it HEAD's for the paths touched
        if restored:
            cli.run(["reset", "-q", old, "--", *restored], cwd=wt, check=False)
            what = "reset" if name == "done-reset" else "fast-forward"
            line = f"undid the interrupted {what} of {wt} ({len(restored)} file(s) put back)"
    clear_marker(git_dir, name)
    return line


def _blob_at(wt: Path, rev: str, rel: str) -> str | None:
    proc = cli.run(["rev-parse", "-q", "--verify", f"{rev}:{rel}"], cwd=wt, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _cut_off(wt: Path, path: Path, blob: str | None) -> bool:
    """True when ``path`` holds the start of ``blob``'s content (nothing else): what git leaves when it is
    stopped half-way through writing the file."""
    if blob is None:
        return False
    try:
        have = path.read_bytes()
    except OSError:
        return False
    full = cli.run(["cat-file", "blob", blob], cwd=wt, text=False, check=False).stdout or b""
    return len(have) < len(full) and full.startswith(have)


def _blob_of_file(wt: Path, path: Path) -> str | None:
    if not path.is_file() or path.is_symlink():
        return None
    return cli.out(["hash-object", "--no-filters", "--", os.fspath(path)], cwd=wt)


def abort_killed_rebase(wt: Path, git_dir: Path, branch: str) -> str | None:
    """A ``git rebase`` that done started and that was killed before it stopped on a conflict: undo it.

    Only ours (the ``done-rebase`` marker) and only before its stop is complete (no conflicted file, or no
    ``rebase-merge/message`` yet): a rebase the agent started, or one stopped on a conflict, is the agent's to finish. Call after
    :func:`clean_git_leftovers` (which removes a dead ``git-rebase-todo.lock``).
    """
    m = get_marker(git_dir, "done-rebase")
    if m is None or worktrees.operation_in_progress(git_dir) != "rebase":
        if m is not None and worktrees.operation_in_progress(git_dir) is None:
            clear_marker(git_dir, "done-rebase")
        return None
    # stopped on a conflict: from now on the agent's rebase, once git wrote all of its stop (the commit message
    # `git rebase --continue` reads is its last file); killed between the conflict and that file, it is redone
    if worktrees.conflicted_files(wt) and (git_dir / "rebase-merge" / "message").is_file():
        clear_marker(git_dir, "done-rebase")
        return None
    proc = cli.run(["rebase", "--abort"], cwd=wt, check=False)
    if proc.returncode != 0:
        # killed before git wrote its state: drop the state, go back to the branch as it was
        cli.run(["rebase", "--quit"], cwd=wt, check=False)
        tip = m.get("tip")
        cli.run(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], cwd=wt, check=False)
        if tip:
            cli.run(["reset", "-q", "--hard", f"refs/heads/{branch}"], cwd=wt, check=False)
    clear_marker(git_dir, "done-rebase")
    return f"undid the rebase in {wt} that an interrupted `git worker done` had started (killed before it had stopped on a conflict)"
