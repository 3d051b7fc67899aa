"""What a killed command (or a killed git child of one) leaves behind, found and repaired by the next command.

A git process killed half-way leaves its own leftovers, which git never cleans up by itself:

* a worktree whose ``git worktree add`` died: its admin dir is still ``locked`` with the reason
  "initializing" (git removes that lock only once HEAD is written and the checkout is done), its
  HEAD may be 0000… (then every ``git fetch`` in the repository fails: "did not send all
  necessary objects"), its checkout half done (an index that stages the deletion of every file);
* ``*.lock`` files (``index.lock``, ``refs/heads/x.lock``, ``git-rebase-todo.lock``, ...) whose
  owner is dead, which make every later git command in that place fail.

:func:`clean_git_leftovers` removes those, each with one line on stderr saying what was repaired.
A lock file is stale when no process has it open and it is older than :data:`LOCK_GRACE` seconds
(git keeps a lock for milliseconds, and holds it open while it writes through it).

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
import shutil
import sys
import time
from pathlib import Path

from ..git import cli, worktrees

#: seconds a git lock file must have existed, unopened, before it counts as left by a killed git
LOCK_GRACE = 2.0
#: lock files of the common dir / of each worktree's admin dir that a killed git can leave
COMMON_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "packed-refs.lock", "config.lock", "shallow.lock",
                "FETCH_HEAD.lock", "AUTO_MERGE.lock", "objects/maintenance.lock", "gc.log.lock")
ADMIN_LOCKS = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "AUTO_MERGE.lock")
#: what a killed rebase / cherry-pick / merge step leaves (pseudorefs and message files it writes through a lock),
#: in the common dir (the main checkout) and in each worktree's admin dir
SEQUENCER_LOCKS = ("CHERRY_PICK_HEAD.lock", "REBASE_HEAD.lock", "MERGE_HEAD.lock", "REVERT_HEAD.lock",
                   "MERGE_MSG.lock", "MERGE_MODE.lock", "SQUASH_MSG.lock")


def say(line: str) -> None:
    """One line on stderr for each repair (never on stdout: --json output stays data)."""
    print(f"repaired: {line}", file=sys.stderr, flush=True)


# -- git's own leftovers -------------------------------------------------------------------------------


def _open_files() -> set[str]:
    """Every path some process (that we can see) has open."""
    found: set[str] = set()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                found.add(os.readlink(f"{fd_dir}/{fd}"))
            except OSError:
                continue
    return found


def _candidate_locks(common: Path) -> list[Path]:
    found = [common / n for n in (*COMMON_LOCKS, *SEQUENCER_LOCKS)]
    found.append(common / "rebase-merge" / "git-rebase-todo.lock")
    admin_root = common / "worktrees"
    if admin_root.is_dir():
        for admin in admin_root.iterdir():
            found += [admin / n for n in (*ADMIN_LOCKS, *SEQUENCER_LOCKS)]
            found.append(admin / "rebase-merge" / "git-rebase-todo.lock")
    refs_dir = common / "refs"
    if refs_dir.is_dir():
        found += list(refs_dir.rglob("*.lock"))
    return [p for p in found if p.is_file() and not p.is_symlink()]


def stale_git_locks(common: Path, *, wait: bool = True) -> list[Path]:
    """Git lock files under ``common`` that no process holds open and that outlived LOCK_GRACE.

    A running git's lock disappears within milliseconds: a young lock is watched (in small steps)
    until it goes or turns LOCK_GRACE old, so a busy repository costs no fixed wait.
    """
    locks = _candidate_locks(common)
    if not locks:
        return []
    opened = _open_files()
    locks = [p for p in locks if os.fspath(p) not in opened]
    deadline = time.monotonic() + LOCK_GRACE
    while wait and locks and time.monotonic() < deadline:
        locks = [p for p in locks if p.exists()]
        if all(_age(p) >= LOCK_GRACE for p in locks):
            break
        time.sleep(0.05)
    locks = [p for p in locks if p.exists() and (_age(p) >= LOCK_GRACE or not wait)]
    if locks:
        opened = _open_files()
        locks = [p for p in locks if os.fspath(p) not in opened]
    return locks


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return LOCK_GRACE


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


def _added_worktree(admin: Path) -> Path | None:
    """The worktree a `git worktree add` was making, from its admin dir's ``gitdir`` file: only an absolute path
    ending in ``/.git``, outside of which lie the repository and the current directory. git creates that file
    before it writes it: an empty (``Path("").parent`` is ``.``), relative or cut-off content names nothing."""
    try:
        text = (admin / "gitdir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text or not os.path.isabs(text) or Path(text).name != ".git":
        return None
    wt = Path(os.path.realpath(Path(text).parent))
    common = Path(os.path.realpath(admin.parent.parent))
    cwd = Path(os.path.realpath(os.getcwd()))
    if common == wt or wt in common.parents or cwd == wt or wt in cwd.parents:
        return None
    return wt


def _add_alive(admin: Path) -> bool:
    """True when a live `git worktree add` may still be writing ``admin`` (its worktree path is in its argv)."""
    wt = _added_worktree(admin)
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if b"worktree" in argv and b"add" in argv:
            if wt is None or os.fsencode(wt) in argv:
                return True
        if wt is not None:
            try:
                if os.readlink(f"/proc/{pid}/cwd").startswith(os.fspath(wt)):
                    return True  # its checkout child (`git reset --hard`) runs inside the new worktree
            except OSError:
                continue
    return False


def _remove_dead_add(common: Path, admin: Path) -> str:
    wt = _added_worktree(admin)
    # what a dead add held is git's own half checkout (nothing was ever handed to an agent:
    # a worktree still "initializing" is never adopted); the branch it made stays, with its commits
    if wt is not None and wt.is_dir():
        shutil.rmtree(wt, ignore_errors=True)
    shutil.rmtree(admin, ignore_errors=True)
    return f"removed the unfinished worktree {wt or admin.name} left by a killed `git worktree add`"


def clean_git_leftovers(common: Path, *, cwd: Path, worktree_lock: Path | None = None) -> list[str]:
    """Repair what killed git processes left in the repository whose common dir is ``common``.

    ``worktree_lock``: our worktrees lock, taken around the removal of unfinished worktrees
    (None: the caller already holds it). Cheap when there is nothing to repair (a few stats).
    """
    repaired: list[str] = []
    if _initializing(common):
        from ..locks import hold

        ctx = hold(worktree_lock, what="the worktree lock") if worktree_lock is not None else _null()
        with ctx:
            pruned = False
            for admin in _initializing(common):
                if _add_alive(admin):
                    continue
                repaired.append(_remove_dead_add(common, admin))
                pruned = True
            if pruned:
                worktrees.prune(cwd)
    dead = worktrees.dead_temporary_checkouts(common)
    if dead:
        from ..locks import hold

        with hold(worktree_lock, what="the worktree lock") if worktree_lock is not None else _null():
            for path in dead:
                worktrees.discard(cwd, path)
                repaired.append(f"removed the temporary checkout {path} a killed merge left")
    for lock in stale_git_locks(common):
        try:
            lock.unlink()
        except OSError:
            continue
        repaired.append(f"removed {lock}, a lock file left by a killed git")
    from ..hooks.install import remove_dead_temporaries

    for tmp in remove_dead_temporaries(common / "hooks"):
        repaired.append(f"removed {tmp}, a half-written hook a killed install left")
    for line in repaired:
        say(line)
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
    tmp = path.with_name(f"{name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk: no half-written marker left behind
        raise


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
    want = os.path.realpath(wt / ".git")
    try:
        admins = list((common / "worktrees").iterdir())
    except OSError:
        return None
    for admin in admins:
        try:
            named = (admin / "gitdir").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if named and os.path.realpath(named) == want:
            return admin
    return None


def remove_worktree(cwd: Path, wt: Path, *, force: bool, common: Path | None = None) -> None:
    """``git worktree remove``, marked first so that a rerun after a kill resumes it."""
    admin = _admin_dir_of(wt, common)
    resume = admin is not None and marker(admin, "removing").exists()
    if admin is not None and not resume:
        set_marker(admin, "removing", {"pid": os.getpid(), "at": time.time()})
    # git refuses a plain removal of a worktree with initialised submodules; the callers have checked
    # there is nothing unsaved in it (or its submodules) first, or were told --force
    submodules = admin is not None and (admin / "modules").is_dir()
    try:
        worktrees.remove(cwd, wt, force=force or resume or submodules)
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
