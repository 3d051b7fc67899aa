"""The one door for destruction: the only module that removes a directory tree, removes or prunes a worktree,
or deletes a branch or ref (here, or on a remote with a ``push :ref``). Single files go through its other half,
:mod:`git_nerve.filedoor` (re-exported here: ``remove_own_file``, ``keep_or_remove``, :class:`Refused`), which
sits at the bottom floor so that ``fs``, ``liveness``, ``context`` and ``bus/`` can use it too.

Each function first proves that its target is git-nerve's own, and when the proof fails it removes nothing and
raises :class:`Refused` (exit 9, its own code) saying what it found:

* a path: made absolute and resolved (symlinks followed), it lies strictly under the task worktree root or
  git-nerve's temporary directory ``<common>/nerve/tmp/``; it is never the main checkout, the common git dir or
  a parent of either, never the current directory or a parent of it, never a live task's worktree but the one
  being removed; a task worktree is removed only when a record names it (an ownership record, or the task's
  worker row passed as ``owner``).
* a path read from a file (a worktree's ``gitdir``): never empty, never truncated (it must name a ``.git``);
  a relative one is resolved against the file's own directory, never the process's.
* a branch: only the one a record says git-nerve created for the task (``owned`` False, an adopted branch, is
  never deleted, locally or on a remote); a ref: only ``refs/nerve/`` refs other than the archive.
* a worktree: ``git worktree remove`` first; when git refuses, the tree is kept (never removed by hand).

Ownership records (``<common>/nerve/owned/<kind>-<hash>.json``) are written BEFORE git-nerve creates the thing
(record-then-create): a kill leaves at most a record of something missing, never an unrecorded thing of ours.
Standard library only (repair and hooks read the records).

Size: one module on purpose. It is the door: `tests/test_destroy_door.py` allows rmtree, `git worktree remove`
and branch or ref deletion here and nowhere else, and every proof of ownership (paths, records, gitdir files)
sits beside the removal it guards, so a reviewer reads every way git-nerve can destroy something in one file.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections import namedtuple
from pathlib import Path

from ..errors import GitError  # noqa: F401  (what the door raises when git refuses)
from ..filedoor import Refused, keep_or_remove, remove_own_file  # noqa: F401  (the door's single files: re-exported)
from ..fs import _LOCKED_TEMPORARY as LOCKED_TEMPORARY
from . import cli

#: ownership records, under the common dir
OWNED_DIR = ("nerve", "owned")
#: temporary checkouts, under the common dir (see worktrees.tmp_root)
TMP_DIR = ("nerve", "tmp")


class Scope(namedtuple("Scope", ["common", "main", "worktree_root", "owners", "live"])):  # typing's costs more
    """What a proof needs to know about the repository (built once per command by the worker layer).

    ``common`` (Path), ``main`` (Path | None), ``worktree_root`` (Path); ``owners``: realpath of every worker row's
    worktree -> its task id; ``live``: those of rows in a non-final state (frozenset).
    """

    __slots__ = ()

    @property
    def tmp_root(self) -> Path:
        return self.common.joinpath(*TMP_DIR)


def tmp_scope(common: Path) -> Scope:
    """A scope that proves only temporary checkouts under ``<common>/nerve/tmp/`` (no task worktree qualifies)."""
    return scope(common, None, Path(common).joinpath(*TMP_DIR))


def scope(common: Path, main: Path | None, worktree_root: Path, rows=()) -> Scope:
    """``rows``: (task_id, worktree, live?) for every worker row."""
    owners, live = {}, set()
    for task, worktree, alive in rows:
        real = os.path.realpath(worktree)
        owners[real] = task
        if alive:
            live.add(real)
    return Scope(Path(os.path.realpath(common)), Path(os.path.realpath(main)) if main is not None else None,
                 Path(os.path.realpath(worktree_root)), owners, frozenset(live))


# -- ownership records ----------------------------------------------------------------------------------------


def _key(kind: str, name: str) -> str:
    if kind in ("worktree", "tmp"):
        p = os.path.abspath(name)
        name = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
    return name


def _record_path(common: Path, kind: str, name: str) -> Path:
    import hashlib  # here: a reader that imports this module (through the lifecycle) never calls it

    digest = hashlib.sha256(f"{kind}\0{_key(kind, name)}".encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return Path(common).joinpath(*OWNED_DIR) / f"{kind}-{digest}.json"


def record(common: Path, kind: str, name: str, *, task: str | None = None, target: str | None = None) -> None:
    """Record that git-nerve is about to create ``name`` (a worktree or tmp path, a branch, a ref; a symbolic
    link to ``target``)."""
    from ..fs import make_dirs, replace_file

    path = _record_path(common, kind, name)
    make_dirs(path.parent)
    data = {"kind": kind, "name": _key(kind, name), "task": task, "pid": os.getpid(), "at": time.time()}
    if target is not None:
        data["target"] = target
    replace_file(path, json.dumps(data).encode("utf-8"))


def recorded(common: Path, kind: str, name: str) -> dict | None:
    try:
        data = json.loads(_record_path(common, kind, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("kind") != kind or data.get("name") != _key(kind, name):
        return None
    return data


def recorded_names(common: Path, kind: str) -> list[str]:
    """The names of every record of ``kind`` under ``common`` (a record that cannot be read is left out)."""
    found = []
    for path in sorted(Path(common).joinpath(*OWNED_DIR).glob(f"{kind}-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("kind") == kind and isinstance(data.get("name"), str):
            found.append(data["name"])
    return found


def forget(common: Path, kind: str, name: str) -> None:
    """Drop the record of something that is gone."""
    try:
        _record_path(common, kind, name).unlink()
    except OSError:
        pass


# -- proofs ---------------------------------------------------------------------------------------------------


def _under(path: str, root: str | Path) -> bool:
    """``path`` strictly inside ``root`` (both resolved)."""
    root = os.fspath(root).rstrip(os.sep) or os.sep
    return path != root and path.startswith(root if root.endswith(os.sep) else root + os.sep)


def _at_or_above(path: str, other: str | Path) -> bool:
    """``path`` is ``other`` or one of its parents."""
    other = os.fspath(other)
    return other == path or _under(other, path)


def prove_path(path, sc: Scope, *, task: str | None = None, kind: str = "worktree", git_removes: bool = False) -> str:
    """The resolved ``path`` when it is git-nerve's own to remove, else :class:`Refused` saying why.

    ``task``: the task whose worktree this is (its worker row or a record must name the path).
    ``git_removes``: ``git worktree remove`` will remove it (git checks it is a worktree): then a task's
    worktree its worker row names may hold the current directory (`merge` run inside the task's worktree).
    """
    raw = os.fspath(path)
    if not raw or not os.path.isabs(raw):
        raise Refused(f"kept {raw or '(empty path)'!s}: not an absolute path")
    if os.path.islink(raw):
        raise Refused(f"kept {raw}: it is a symbolic link")
    real = os.path.realpath(raw)
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        cwd = None
    if real == os.sep:
        raise Refused(f"kept {raw}: it is the root directory")
    if sc.main is not None and _at_or_above(real, sc.main):
        raise Refused(f"kept {raw}: it is the main checkout {sc.main} or a parent of it")
    if _at_or_above(real, sc.common):
        raise Refused(f"kept {raw}: it is the git dir {sc.common} or a parent of it")
    if cwd is not None and _at_or_above(real, cwd) and not (git_removes and task and sc.owners.get(real) == task):
        raise Refused(f"kept {raw}: it is the current directory or a parent of it")
    if _under(real, sc.tmp_root):
        if os.path.dirname(real) != os.fspath(sc.tmp_root):
            raise Refused(f"kept {raw}: not a temporary checkout directly under {sc.tmp_root}")
        return real
    if _under(real, sc.common):
        raise Refused(f"kept {raw}: it is inside the git dir {sc.common}")
    if not _under(real, sc.worktree_root):
        raise Refused(f"kept {raw}: it is outside the worktree root {sc.worktree_root} and {sc.tmp_root}")
    for parent in (sc.worktree_root, sc.common, sc.main):
        if parent is not None and (os.fspath(parent) == os.sep):
            raise Refused(f"kept {raw}: the worktree root is the root directory")
    holder = sc.owners.get(real)
    if real in sc.live and holder != task:
        raise Refused(f"kept {raw}: it is the worktree of the live task {holder}")
    rec = recorded(sc.common, kind, real)
    if task is None or not (holder == task or (rec is not None and rec.get("task") == task)):
        raise Refused(f"kept {raw}: no record says git-nerve made it" + (f" for {task}" if task else ""))
    return real


def worktree_of_gitdir(admin: Path) -> str:
    """The worktree a git admin dir (``<common>/worktrees/<name>``) names in its ``gitdir`` file, verified: the
    file is non-empty and names a ``.git`` (a relative one is resolved against the admin dir); else :class:`Refused`."""
    try:
        text = (Path(admin) / "gitdir").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Refused(f"kept {admin}: its gitdir file cannot be read ({exc.__class__.__name__})") from None
    named = text.strip("\n")
    if not named.strip():
        raise Refused(f"kept {admin}: its gitdir file is empty (git had not written it)")
    if not os.path.isabs(named):
        named = os.path.normpath(os.path.join(os.fspath(admin), named))
    if os.path.basename(named) != ".git":
        raise Refused(f"kept {admin}: its gitdir file names {named!r}, not a .git")
    return os.path.dirname(named)


def _prove_admin(admin: Path, sc: Scope) -> str:
    real = os.path.realpath(admin)
    if os.path.islink(admin) or os.path.dirname(real) != os.fspath(sc.common / "worktrees"):
        raise Refused(f"kept {admin}: not an admin dir directly under {sc.common / 'worktrees'}")
    return real


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


def _half_written_gitfile(dotgit: str, admin: Path, real_admin: str) -> bool:
    """The worktree's ``.git`` file a killed ``git worktree add`` had created and not yet written whole: a regular
    file holding the start of what git writes there for this admin dir (``gitdir: <admin>``; empty when it was
    killed between creating and writing it), in the worktree that admin dir's own ``gitdir`` names (git writes
    that one first). Anything else at ``.git`` (another git dir's, a directory, a link) is not."""
    try:
        if not stat.S_ISREG(os.lstat(dotgit).st_mode):
            return False
        with open(dotgit, "rb") as fh:
            data = fh.read(8192)
        named = worktree_of_gitdir(admin)
    except (OSError, Refused):
        return False
    if os.path.realpath(os.path.join(named, ".git")) != os.path.realpath(dotgit):
        return False
    wholes = [f"gitdir: {p}\n".encode("utf-8", "surrogateescape")
              for p in (real_admin, os.path.relpath(real_admin, os.path.dirname(os.path.realpath(dotgit))))]
    return any(whole.startswith(data) and len(data) < len(whole) - 1 for whole in wholes)


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


def remove_dead_temporaries(directory: Path) -> list[Path]:
    """Remove the temporaries (:func:`..fs.locked_tmp_name`) of a locked :func:`..fs.replace_file` killed mid-write: ours by
    name, and only when the process that wrote them is proven gone: its flock on the file can be taken (no
    ``/proc``). An empty one (its writer may be between creating and locking it) also needs its pid gone."""
    import fcntl

    from ..liveness import pid_alive

    removed: list[Path] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = re.match(LOCKED_TEMPORARY, name)
        if m is None:
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


def _admin_naming(sc: Scope, real: str) -> Path | None:
    """The admin dir under ``<common>/worktrees/`` whose (verified) ``gitdir`` names the worktree ``real``."""
    try:
        admins = sorted((sc.common / "worktrees").iterdir())
    except OSError:
        return None
    for admin in admins:
        try:
            if os.path.realpath(worktree_of_gitdir(admin)) == real:
                return admin
        except Refused:
            continue
    return None


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


def prove_branch(common: Path, branch: str, *, owned_by_task: str | None, owned: bool = True,
                 row_branch: str | None = None) -> None:
    """The task's branch is git-nerve's to delete: it made it (a record, or the task's row naming it), and it
    was not adopted (``owned``)."""
    if not branch or branch.startswith("-") or "\n" in branch:
        raise Refused(f"kept branch {branch!r}: not a branch name")
    if not owned:
        raise Refused(f"kept branch {branch}: it existed before git-nerve (adopted), so git-nerve never deletes it")
    rec = recorded(common, "branch", branch)
    if owned_by_task is None or not (row_branch == branch or (rec is not None and rec.get("task") == owned_by_task)):
        raise Refused(f"kept branch {branch}: no record says git-nerve created it" +
                      (f" for {owned_by_task}" if owned_by_task else ""))


def delete_branch(cwd, common: Path, branch: str, *, owned_by_task: str | None, owned: bool = True,
                  row_branch: str | None = None, old: str | None = None) -> None:
    """Delete local ``refs/heads/<branch>`` (only if it still points at ``old``, when given)."""
    prove_branch(common, branch, owned_by_task=owned_by_task, owned=owned, row_branch=row_branch)
    cli.run(["update-ref", "-d", f"refs/heads/{branch}", *([old] if old else [])], cwd=cwd)
    forget(common, "branch", branch)


def delete_tracking_ref(cwd, common: Path, remote: str, branch: str, *, owned_by_task: str | None,
                        owned: bool = True, row_branch: str | None = None) -> None:
    """Drop ``refs/remotes/<remote>/<branch>`` of a branch of ours deleted on the remote."""
    prove_branch(common, branch, owned_by_task=owned_by_task, owned=owned, row_branch=row_branch)
    cli.run(["update-ref", "-d", f"refs/remotes/{remote}/{branch}"], cwd=cwd, check=False)


def delete_remote_branch(cwd, common: Path, remote: str, branch: str, *, owned_by_task: str | None,
                         owned: bool = True, row_branch: str | None = None, expected: str = "",
                         config: dict | None = None):
    """Delete ``branch`` on ``remote``, only while it still holds ``expected``, the value git-nerve itself pushed
    there (``git push --force-with-lease=refs/heads/<branch>:<expected> <remote> :refs/heads/<branch>``: a
    branch someone pushed onto since is never deleted; git runs the pre-push hook for a deletion too); returns
    a :class:`remote.PushResult` (``rejected``: it no longer holds ``expected``)."""
    from .remote import PushResult, _config_args, _lease_value, relative_url_config

    prove_branch(common, branch, owned_by_task=owned_by_task, owned=owned, row_branch=row_branch)
    if not expected or not _lease_value(expected):
        raise Refused(f"kept branch {branch} on {remote}: no value git-nerve pushed there to lease the deletion on")
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
