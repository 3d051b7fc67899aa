"""The one door for destruction: the only module that removes a directory tree, removes or prunes a worktree,
or deletes a branch or ref (here, or on a remote with a ``push :ref``). Single files go through its other half,
:mod:`git_nerve.filedoor` (re-exported here: ``remove_own_file``, ``keep_or_remove``, :class:`Refused`), which
sits at the bottom floor so that ``fs``, ``liveness``, ``context`` and ``bus/`` can use it too.

Each function first proves that its target is git-nerve's own, and when the proof fails it removes nothing and
raises :class:`Refused` (exit 9, its own code) saying what it found:

* a path: :func:`.proofs.prove_path` (re-exported here with the rest of :mod:`.proofs`: the roots, never the
  main checkout, the common dir, the current directory or a live task's worktree; a record names it).
* a branch: only the one the ownership record (:mod:`.ownership`, the one record of what git-nerve made) says
  git-nerve created for the task, and not adopted (it existed before the task, or cannot tell); on a remote only
  at the value that record says git-nerve last pushed there; a ref: only ``refs/nerve/`` refs other than the
  archive.
* a worktree: ``git worktree remove`` first; when git refuses, the tree is kept (never removed by hand).

Ownership records (:mod:`.ownership`) are written BEFORE git-nerve creates the thing (record-then-create): a kill
leaves at most a record of something missing, never an unrecorded thing of ours. Standard library only (repair
and hooks read the records).

`tests/test_destroy_door.py` allows rmtree, `git worktree remove` and branch or ref deletion here and nowhere
else: a reviewer reads every way git-nerve can destroy something in this file, and every proof it makes in
:mod:`.proofs` and :mod:`.ownership`, which remove nothing.

Size: one module on purpose, over the usual 400 lines: it is the door, and a reviewer reads every way git-nerve
destroys something here, in one file (the proofs, which remove nothing, live in :mod:`.proofs`).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..errors import GitError  # noqa: F401  (what the door raises when git refuses)
from ..filedoor import Refused, keep_or_remove, remove_own_file  # noqa: F401  (the door's single files: re-exported)
from ..fs import _LOCKED_TEMPORARY as LOCKED_TEMPORARY
from . import cli
from .ownership import forget, pushed_sha, recorded
from .proofs import Scope, _admin_naming, _half_written_gitfile, _prove_admin, _under, prove_path, worktree_of_gitdir
from .proofs import scope, tmp_scope  # noqa: F401  (re-exported: what callers build a proof's scope with)


# -- directories ----------------------------------------------------------------------------------------------


def _rmtree(real: str) -> None:
    import shutil  # here: it imports bz2 and lzma, which a reader never needs

    shutil.rmtree(real, ignore_errors=True)


def remove_unfinished_add(admin: Path, sc: Scope, *, worktree: str | None = None) -> str:
    """What a killed ``git worktree add`` left: its half checkout and its admin dir, only when the worktree (the
    path the dead command's liveness token recorded for that add, ``worktree``; else what the admin dir's
    ``gitdir`` names) is one git-nerve recorded making (or a worker row names). Returns what was removed."""
    real_admin = _prove_admin(admin, sc)
    wt = os.fspath(worktree) if worktree is not None else worktree_of_gitdir(admin)
    if not os.path.isabs(wt):
        raise Refused(f"kept {admin}: the worktree recorded for it ({wt!r}) is not an absolute path")
    rec = recorded(sc.common, "worktree", wt) or recorded(sc.common, "tmp", wt)
    real_wt = os.path.realpath(wt)
    task = (rec or {}).get("task") or sc.owners.get(real_wt)
    if rec is None and real_wt not in sc.owners:
        raise Refused(f"kept {admin}: its worktree {wt} is not one git-nerve recorded making")
    real_wt = prove_path(wt, sc, task=task)
    dotgit = os.path.join(real_wt, ".git")
    if os.path.lexists(dotgit) and not _half_written_gitfile(dotgit, admin, real_admin):
        try:
            points = open(dotgit, encoding="utf-8").read().strip()
        except (OSError, UnicodeDecodeError):
            points = ""
        target = points[len("gitdir:"):].strip() if points.startswith("gitdir:") else ""
        if target and not os.path.isabs(target):
            target = os.path.join(real_wt, target)
        if not target or os.path.realpath(target) != real_admin:
            raise Refused(f"kept {admin}: its worktree {wt} belongs to another git dir ({points[:200] or 'a .git directory'})")
    # what a dead add held is git's own half checkout (a worktree still "initializing" is never handed to an agent)
    if os.path.isdir(real_wt):
        _rmtree(real_wt)
    _rmtree(real_admin)
    return wt


def remove_tree(path, sc: Scope, *, task: str | None = None) -> None:
    """Remove a directory tree git-nerve made (proved by :func:`prove_path`)."""
    real = prove_path(path, sc, task=task)
    _rmtree(real)


def remove_own_tempdir(path, *, prefix: str) -> None:
    """A private directory this process made with ``tempfile.mkdtemp(prefix=prefix)``."""
    import tempfile

    raw = os.fspath(path)
    real = os.path.realpath(raw)
    if (os.path.islink(raw) or os.path.dirname(real) != os.path.realpath(tempfile.gettempdir())
            or not os.path.basename(real).startswith(prefix) or len(os.path.basename(real)) <= len(prefix)):
        raise Refused(f"kept {raw}: not a private temporary directory {prefix}* of ours")
    _rmtree(real)


#: the mark a run's private temporary directory holds while its runner lives: a lock file its runner keeps
#: locked, holding the run's id (:func:`remove_dead_private_dirs`)
PRIVATE_MARK = ".nerve-run"


def remove_dead_private_dirs(prefix: str, *, still_running) -> list[str]:
    """The private temporary directories of agent runs whose runner was killed before it removed them (SIGKILL:
    no ``finally``), which may hold copies of a person's settings or keys: in the temporary directory, named
    ``<prefix>*``, a directory of this user closed to others, holding a :data:`PRIVATE_MARK` of this user with
    a run id; removed only when proven dead: the mark's lock can be taken (its runner is gone) and
    ``still_running(run_id)`` is False (no process carries the run's id: an agent left running keeps its
    directory; None, cannot tell, keeps it too). The removed paths."""
    import fcntl
    import tempfile

    base = os.path.realpath(tempfile.gettempdir())
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    me = os.getuid()
    for name in names:
        if not name.startswith(prefix) or len(name) <= len(prefix):
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
            fd = os.open(os.path.join(path, PRIVATE_MARK), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # gone, or no mark: cannot tell
        try:
            mark = os.fstat(fd)
            if (not stat.S_ISDIR(st.st_mode) or st.st_uid != me or stat.S_IMODE(st.st_mode) & 0o077
                    or not stat.S_ISREG(mark.st_mode) or mark.st_uid != me):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: its runner lives
            run = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            if not re.fullmatch(r"[0-9a-f]{32}", run) or still_running(run) is not False:
                continue
            if not os.path.samestat(st, os.lstat(path)):
                continue  # replaced meanwhile
            _rmtree(path)
            removed.append(path)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def remove_recorded_link(records: Path, link: str) -> None:
    """Remove the symbolic link ``link`` (absolute) only when an ownership record under ``records`` (kind
    ``manlink``: :mod:`..manlink`'s man page links, recorded before each is made) says git-nerve made it and it
    still is that link (pointing where the record says it was made to point: a link someone made there since
    is theirs); else :class:`Refused`, nothing removed."""
    rec = recorded(records, "manlink", link) if os.path.isabs(link) else None
    if rec is None:
        raise Refused(f"kept {link}: no record says git-nerve made it")
    try:
        now = os.readlink(link)
    except OSError:
        raise Refused(f"kept {link}: not a symbolic link") from None
    if now != rec.get("target"):
        raise Refused(f"kept {link}: it points at {now}, not where git-nerve made it point")
    os.unlink(link)
    forget(records, "manlink", link)


def remove_empty_dirs(paths) -> None:
    """Directories git-nerve recorded creating, removed only while empty (a non-empty one is kept)."""
    for d in paths:
        try:
            if stat.S_ISDIR(os.lstat(d).st_mode):
                os.rmdir(d)
        except OSError:
            pass  # not empty (something else lives there now), or gone


def remove_dead_temporaries(directory: Path, *, of: str | None = None) -> list[Path]:
    """Remove the temporaries (:func:`..fs.locked_tmp_name`) of a locked :func:`..fs.replace_file` killed mid-write: ours by
    name, and only when the process that wrote them is proven gone: its flock on the file can be taken (no
    ``/proc``). An empty one (its writer may be between creating and locking it) also needs its pid gone.
    ``of``: only the temporaries of the file of that name (a person's work tree: nothing else of theirs is looked at)."""
    import fcntl

    from ..liveness import pid_alive

    removed: list[Path] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = re.match(LOCKED_TEMPORARY, name)
        if m is None or (of is not None and m["name"] != of):
            continue
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_size == 0 and pid_alive(int(m["pid"])):
                continue
            if os.path.exists(path) and os.path.samestat(os.fstat(fd), os.stat(path)):
                path.unlink()
                removed.append(path)
        except OSError:
            continue  # held (its writer lives), or cannot tell
        finally:
            os.close(fd)
    return removed


def replace_work_tree_file(path: Path, data: bytes | str, *, keep_mode: bool = False) -> None:
    """Write a file of a person's work tree (nerve.toml, an agent CLI's MCP configuration) whole or not at all,
    through a locked temporary; the temporary of an earlier write of it killed mid-way goes first (ours by name,
    its writer proven gone), so a rerun leaves the tree as one uninterrupted run does."""
    from .. import faults
    from ..fs import locked_tmp_name, replace_file

    path = Path(path)
    remove_dead_temporaries(path.parent, of=path.name)
    replace_file(path, data, tmp_name=locked_tmp_name(path), create_mode=0o666, keep_mode=keep_mode, lock=True,
                 before_replace=lambda: faults.point("work-tree-file.written"))


# -- worktrees ------------------------------------------------------------------------------------------------


def remove_worktree(cwd, path, sc: Scope, *, task: str | None = None, force: bool = False,
                    admin: Path | None = None) -> None:
    """``git worktree remove`` of a worktree proved ours. When git refuses, the tree is kept (GitError).

    ``admin``: the worktree's admin dir, when a removal of ours was interrupted after git deleted the
    worktree's ``.git`` file: that file is written back (pointing at ``admin``, whose ``gitdir`` names it) so
    that git can finish the removal itself.
    """
    real = prove_path(path, sc, task=task, kind="tmp" if _under(os.path.realpath(path), sc.tmp_root) else "worktree",
                      git_removes=True)
    if admin is not None and os.path.isdir(real) and not os.path.lexists(os.path.join(real, ".git")):
        _write_back_gitfile(path, real, admin, sc)
        force = True
    args = ["worktree", "remove"] + (["--force", "--force"] if force else [])
    cli.run([*args, real], cwd=cwd)
    forget(sc.common, "worktree", real)


def _write_back_gitfile(path, real: str, admin: Path, sc: Scope) -> None:
    """A removal of ours killed after git deleted the worktree's ``.git`` file (the rest of it, and the admin dir,
    still there): the file written back, pointing at ``admin`` (whose ``gitdir`` names it), so that git can
    finish the removal itself. ``real``: the proven worktree."""
    real_admin = _prove_admin(admin, sc)
    if os.path.realpath(worktree_of_gitdir(admin)) != real:
        raise Refused(f"kept {path}: the admin dir {admin} names another worktree")
    fd = os.open(os.path.join(real, ".git"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with open(fd, "w", encoding="utf-8") as fh:
        fh.write(f"gitdir: {real_admin}\n")


def discard(cwd, path, sc: Scope, *, task: str | None = None) -> str | None:
    """Take back a worktree git-nerve just made (a rollback, a temporary checkout). Best effort: returns None when
    it is gone, else a line saying what was kept (git refused, or it is not provably ours)."""
    raw = os.fspath(path)
    kind = "tmp" if _under(os.path.realpath(raw), sc.tmp_root) else "worktree"
    try:
        real = prove_path(raw, sc, task=task, kind=kind)
        admin = _admin_naming(sc, real) if os.path.isdir(real) and not os.path.lexists(os.path.join(real, ".git")) else None
        if admin is not None:  # a removal of ours killed after git deleted the .git file: git finishes it
            _write_back_gitfile(raw, real, admin, sc)
    except (Refused, OSError) as exc:
        return (exc.message if isinstance(exc, Refused) else f"kept {raw}: {exc}") if os.path.lexists(raw) else None
    proc = cli.run(["worktree", "remove", "--force", "--force", real], cwd=cwd, check=False)
    if proc.returncode != 0 and os.path.lexists(real):
        return f"kept {raw}: git refused to remove it ({cli.message(proc.stderr) or 'exit ' + str(proc.returncode)})"
    prune_entry(cwd, real, sc)
    forget(sc.common, kind, real)
    return None


def prune_entry(cwd, path, sc: Scope) -> bool:
    """Drop git's registration of the worktree ``path`` once its directory is gone (what ``git worktree prune``
    does, for this one entry only: a person's worktree on an unplugged disk keeps its own). True if dropped."""
    real = os.path.realpath(path)
    if os.path.lexists(real):
        return False
    try:
        admins = sorted((sc.common / "worktrees").iterdir())
    except OSError:
        return False
    dropped = False
    for admin in admins:
        try:
            named = worktree_of_gitdir(admin)
        except Refused:
            continue
        if os.path.realpath(named) != real:
            continue
        try:
            _prove_admin(admin, sc)
            task = sc.owners.get(real) or (recorded(sc.common, "worktree", real) or {}).get("task")
            prove_path(real, sc, task=task, kind="tmp" if _under(real, sc.tmp_root) else "worktree")
        except Refused:
            continue  # not provably ours: git's registration stays
        _rmtree(os.path.realpath(admin))
        dropped = True
    return dropped


# -- branches and refs ----------------------------------------------------------------------------------------


def prove_branch(common: Path, branch: str, *, owned_by_task: str | None, made_now: bool = False) -> dict:
    """The task's branch is git-nerve's to delete: its ownership record (:mod:`.ownership`, nothing else) says
    git-nerve created it for ``owned_by_task`` and that it did not exist before the task (``adopted`` False:
    True is the person's, a record that does not say is "cannot tell", both kept). ``made_now``: the rollback of
    the branch this very command just made (one it made from an adopted branch only the remote had, too), which
    needs only the record naming the task. Returns the record."""
    if not branch or branch.startswith("-") or "\n" in branch:
        raise Refused(f"kept branch {branch!r}: not a branch name")
    rec = recorded(common, "branch", branch)
    if owned_by_task is None or rec is None or rec.get("task") != owned_by_task:
        raise Refused(f"kept branch {branch}: no record says git-nerve created it" +
                      (f" for {owned_by_task}" if owned_by_task else ""))
    if rec.get("adopted") is not False and not made_now:
        raise Refused(f"kept branch {branch}: " + (
            "it existed before git-nerve (adopted), so git-nerve never deletes it" if rec.get("adopted") else
            "its record does not say whether it existed before the task (cannot tell: kept)"))
    return rec


def delete_branch(cwd, common: Path, branch: str, *, owned_by_task: str | None, old: str | None = None,
                  made_now: bool = False) -> None:
    """Delete local ``refs/heads/<branch>`` (only if it still points at ``old``, when given; ``made_now``, a
    rollback of what this command made, only with ``old``). Its record goes too, unless it says git-nerve pushed
    the branch: then it stays until the branch is gone there (:func:`delete_tracking_ref`)."""
    rec = prove_branch(common, branch, owned_by_task=owned_by_task, made_now=made_now and bool(old))
    cli.run(["update-ref", "-d", f"refs/heads/{branch}", *([old] if old else [])], cwd=cwd)
    if not pushed_sha(rec)[0]:
        forget(common, "branch", branch)


def delete_tracking_ref(cwd, common: Path, remote: str, branch: str, *, owned_by_task: str | None) -> None:
    """Drop ``refs/remotes/<remote>/<branch>`` of a branch of ours deleted on the remote (and its record, once
    the branch is gone here too)."""
    prove_branch(common, branch, owned_by_task=owned_by_task)
    cli.run(["update-ref", "-d", f"refs/remotes/{remote}/{branch}"], cwd=cwd, check=False)
    if cli.run(["rev-parse", "-q", "--verify", f"refs/heads/{branch}"], cwd=cwd, check=False).returncode != 0:
        forget(common, "branch", branch)


def delete_remote_branch(cwd, common: Path, remote: str, branch: str, *, owned_by_task: str | None,
                         expected: str = "", config: dict | None = None):
    """Delete ``branch`` on ``remote``, only while it still holds ``expected``, the value git-nerve itself pushed
    there as its record says (``git push --force-with-lease=refs/heads/<branch>:<expected> <remote>
    :refs/heads/<branch>``: a branch someone pushed onto since is never deleted; git runs the pre-push hook for
    a deletion too); returns a :class:`remote.PushResult` (``rejected``: it no longer holds ``expected``)."""
    from .remote import PushResult, _config_args, _lease_value, relative_url_config

    pushed, sha = pushed_sha(prove_branch(common, branch, owned_by_task=owned_by_task))
    if not pushed:
        raise Refused(f"kept branch {branch} on {remote}: no record says git-nerve pushed it there")
    if not expected or not _lease_value(expected) or expected != sha:
        raise Refused(f"kept branch {branch} on {remote}: no value git-nerve pushed there to lease the deletion on"
                      + (f" ({expected[:12]} is not {sha[:12]}, the one it recorded)" if expected and sha else ""))
    settings = {**relative_url_config(cwd, remote), **(config or {})}
    ref = f"refs/heads/{branch}"
    proc = cli.run([*_config_args(settings), "push", "--quiet", f"--force-with-lease={ref}:{expected}", remote,
                    f":{ref}"], cwd=cwd, check=False)
    text = proc.stdout + proc.stderr
    if proc.returncode == 0:
        return PushResult(True, False, "", text)
    rejected = "[remote rejected]" not in text and any(w in text for w in ("stale info", "[rejected]"))
    return PushResult(False, rejected, cli.message(proc.stderr) or cli.last_line(proc.stdout), text,
                      not rejected and "failed to push some refs" in text and "[remote rejected]" not in text)


def delete_ref(cwd, ref: str, old: str | None = None) -> None:
    """Delete one of git-nerve's temporary refs (``refs/nerve/...``, never an archive ref)."""
    if not ref.startswith("refs/nerve/") or ref.startswith("refs/nerve/archive/") or ".." in ref:
        raise Refused(f"kept {ref}: only git-nerve's temporary refs/nerve/ refs are ever deleted")
    cli.run(["update-ref", "-d", ref, *([old] if old else [])], cwd=cwd)


def delete_remote_probe_ref(cwd, remote: str, ref: str, expected: str):
    """Delete ``refs/nerve/probe/<machine>-<random>`` on ``remote``, only while it still holds ``expected`` (the
    probe of `git nerve init --shared`, which made it); returns a :class:`remote_refs.RemoteResult`."""
    from . import remote_refs

    if not ref.startswith("refs/nerve/probe/") or ".." in ref or not expected:
        raise Refused(f"kept {ref} on {remote}: only git-nerve's own probe refs are ever deleted on a remote")
    return remote_refs.atomic_push(cwd, remote, [(ref, "", expected)])


# -- finished tasks' claims (shared mode) -----------------------------------------------------------------------
#: the namespaces of the claim refs git-nerve makes (every one by its own compare-and-set create) and of the
#: archive refs that keep them
CLAIMS, FINISHED = "refs/nerve/claims/", "refs/nerve/finished/"


def _claim_refs(claims, where: str) -> None:
    for ref, tip in claims:
        if not ref.startswith(CLAIMS) or ".." in ref or ref.endswith("/") or not tip or len(tip) < 40:
            raise Refused(f"kept {ref}{where}: only git-nerve's claim refs (refs/nerve/claims/<task>), at the value "
                          "read, are ever deleted this way")


def _kept(cwd, tips: list[str], keepers: list[str]) -> bool:
    """Is every commit of ``tips`` reachable from one of ``keepers`` (here, in this clone)? One rev-list: nothing
    reachable from the tips but not from the keepers. An unknown commit is "cannot tell": False."""
    if not keepers:
        return False
    proc = cli.run(["rev-list", "-n1", "--stdin"], cwd=cwd, check=False,
                   input="".join(f"{t}\n" for t in tips) + "".join(f"^{k}\n" for k in keepers))
    return proc.returncode == 0 and not proc.stdout.strip()


def archive_finished_claims(cwd, remote: str, finished_ref: str, new: str, old: str | None,
                            claims: list[tuple[str, str]]):
    """Delete finished tasks' claim refs on ``remote``, each only while it still holds the tip read (its
    ``--force-with-lease``), in one atomic push with this machine's archive ref ``finished_ref`` moving from
    ``old`` to ``new``: the claims go only if the archive that keeps them lands, and an archive that another
    machine's push beat changes nothing. Git-nerve's own: it created every claim ref (a compare-and-set create of
    its spawn) and never deletes one before ``new`` reaches its tip here (proven first). ``claims``: (ref, tip).
    Returns a :class:`remote_refs.RemoteResult`."""
    from . import remote_refs

    if not finished_ref.startswith(FINISHED) or ".." in finished_ref or not new:
        raise Refused(f"kept the claims on {remote}: {finished_ref} is not an archive of finished claims")
    _claim_refs(claims, f" on {remote}")
    if not claims or not _kept(cwd, [tip for _, tip in claims], [new]):
        raise Refused(f"kept the claims on {remote}: the archive {new} does not keep every one of them")
    return remote_refs.atomic_push(cwd, remote, [(finished_ref, new, old), *((ref, "", tip) for ref, tip in claims)])


def drop_claim_mirrors(cwd, mirrors: list[tuple[str, str]], keepers: list[str]) -> bool:
    """Delete this clone's copies of claim refs the remote archived (``mirrors``: (ref, value read)), only when
    every one is kept by an archive ref here (``keepers``: their values) and still holds the value read (one
    transaction: all or none). False when nothing was deleted because a copy moved meanwhile."""
    _claim_refs(mirrors, " here")
    if not mirrors:
        return True
    if not _kept(cwd, [tip for _, tip in mirrors], keepers):
        raise Refused("kept this clone's copies of the claims: no archive ref here keeps them")
    proc = cli.run(["update-ref", "--stdin"], cwd=cwd, check=False,
                   input="".join(f"delete {ref} {tip}\n" for ref, tip in mirrors))
    return proc.returncode == 0
