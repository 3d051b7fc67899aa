"""Worktrees through the git binary (measured faster than pygit2's add_worktree)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
import itertools
import os
import threading
import time
from pathlib import Path

from ..errors import GitError
from ..fs import make_dirs
from . import cli, ident


@dataclass(frozen=True)
class WorktreeInfo:
    path: Path
    head: str | None
    branch: str | None  #: full ref name, e.g. refs/heads/main; None when detached
    bare: bool = False
    locked: bool = False
    prunable: bool = False


#: `git worktree list` attempts while another process adds or removes a worktree
LIST_ATTEMPTS = 6


def list_all(cwd) -> list[WorktreeInfo]:
    for attempt in range(LIST_ATTEMPTS):
        proc = cli.run(["worktree", "list", "--porcelain", "-z"], cwd=cwd, check=False)
        if proc.returncode == 0:
            break
        # a `git worktree add` running meanwhile leaves its admin directory half-written for a
        # moment ("failed to read .git/worktrees/<name>/commondir"): look again
        if "worktrees/" not in proc.stderr or attempt == LIST_ATTEMPTS - 1:
            raise GitError(f"git worktree list failed: {cli.message(proc.stderr) or f'exit {proc.returncode}'}")
        time.sleep(0.02 * 2**attempt)
    out = proc.stdout.rstrip("\n")
    items: list[WorktreeInfo] = []
    cur: dict = {}
    for field in out.split("\0"):
        if not field:
            if cur:
                items.append(_info(cur))
                cur = {}
            continue
        key, _, value = field.partition(" ")
        cur[key] = value
    if cur:
        items.append(_info(cur))
    return items


def _info(d: dict) -> WorktreeInfo:
    return WorktreeInfo(
        path=Path(d["worktree"]),
        head=d.get("HEAD"),
        branch=d.get("branch"),
        bare="bare" in d,
        locked="locked" in d,
        prunable="prunable" in d,
    )


def find_for_branch(cwd, branch_ref: str) -> WorktreeInfo | None:
    for wt in list_all(cwd):
        if wt.branch == branch_ref and not wt.prunable:
            return wt
    return None


def add(cwd, path: Path, *, branch: str, start: str | None) -> None:
    """Create ``path`` checked out on ``branch`` (created at ``start`` if given), with no upstream tracking.

    ``--no-track`` keeps git from writing branch tracking into .git/config,
    whose lock would make concurrent spawns fail. Adds run side by side: one that died reading the admin dir
    another add was writing (before it made anything here) is tried again (:func:`_raced`).
    """
    for attempt in range(LIST_ATTEMPTS):
        if start is not None and attempt and cli.run(["rev-parse", "-q", "--verify", f"refs/heads/{branch}"], cwd=cwd,
                                                     check=False).stdout.strip() == start:
            start = None  # the attempt that died had made the branch (at ``start``) before it looked at the others
        if start is not None:
            args = ["worktree", "add", "--quiet", "--no-track", "-b", branch, os.fspath(path), start]
        else:
            args = ["worktree", "add", "--quiet", os.fspath(path), branch]
        proc = cli.run(args, cwd=cwd, check=False, bulk=True)  # the checkout: agents' short commands go first
        if proc.returncode == 0 or not _raced(proc.stderr, path) or attempt == LIST_ATTEMPTS - 1:
            break
        time.sleep(0.02 * 2**attempt)
    if proc.returncode == 0:
        return
    said = cli.message(proc.stderr) or f"exit {proc.returncode}"
    message = f"git worktree add failed: {said}{cli.disk_full_hint(said, cwd)}"
    full = _disk_full(cwd, path, start or branch) if "unable to write" in message or "Could not reset index" in message else None
    raise GitError(f"{message} ({full})" if full else message)


def _raced(stderr: str, path: Path) -> bool:
    """git died reading another worktree's admin dir while a concurrent `git worktree add` was writing it
    ("failed to read .git/worktrees/<name>/commondir"), before it made anything at ``path``: worth another try."""
    if "failed to read" not in stderr or "worktrees/" not in stderr:
        return False
    try:
        return not os.listdir(path)  # an empty directory: nothing of git's in it yet
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _disk_full(cwd, path: Path, rev: str) -> str | None:
    """git says "unable to write file X" without the cause when the disk is full: compare what the
    checkout needs with the space left where it goes, and say "No space left on device" if it does not fit."""
    where = Path(path)
    while not where.exists() and where.parent != where:
        where = where.parent
    try:
        st = os.statvfs(where)
        free = st.f_bavail * st.f_frsize
        listing = cli.run(["ls-tree", "-r", "-l", "--end-of-options", rev], cwd=cwd, check=False).stdout
    except OSError:
        return None
    need = 0
    for line in listing.splitlines():
        size = line.split(None, 4)[3] if len(line.split(None, 4)) > 3 else "-"
        need += int(size) if size.isdigit() else 0
    if need <= free:
        return None
    return f"No space left on device: the checkout needs about {need // 1024} KiB, {where} has {free // 1024} KiB free"


def add_detached(cwd, path: Path, commit: str) -> None:
    cli.run(["worktree", "add", "--quiet", "--detach", os.fspath(path), commit], cwd=cwd)


def dirty_files(worktree: Path, *, untracked: bool = True) -> list[str]:
    """Paths with uncommitted changes (and untracked, non-ignored files when asked)."""
    args = ["status", "--porcelain=v1", "-z", f"--untracked-files={'normal' if untracked else 'no'}"]
    out = cli.run(args, cwd=worktree).stdout
    files = []
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        if not entry:
            i += 1
            continue
        files.append(entry[3:])
        if entry[:1] in ("R", "C"):
            i += 1  # the rename source follows
        i += 1
    return files


def operation_in_progress(git_dir: Path) -> str | None:
    """'rebase', 'merge', 'cherry-pick' or 'revert' when one is under way in this worktree."""
    if (git_dir / "rebase-merge").exists() or (git_dir / "rebase-apply").exists():
        return "rebase"
    if (git_dir / "MERGE_HEAD").exists():
        return "merge"
    if (git_dir / "CHERRY_PICK_HEAD").exists():
        return "cherry-pick"
    if (git_dir / "REVERT_HEAD").exists():
        return "revert"
    return None


def git_dir_of(worktree: Path) -> Path:
    return Path(cli.out(["rev-parse", "--path-format=absolute", "--git-dir"], cwd=worktree))


def conflicted_files(worktree: Path) -> list[str]:
    out = cli.run(["diff", "--name-only", "--diff-filter=U", "-z"], cwd=worktree, check=False).stdout
    return [f for f in out.split("\0") if f]


def snapshot(worktree: Path, parent: str | None, message: str, *, parents: list[str] | None = None) -> str:
    """A commit of everything in the worktree, untracked files included, that moves nothing.

    Like ``git stash create``, but untracked (non-ignored) files are kept too:
    a temporary index receives ``git add -A`` and becomes a commit on top of
    ``parent`` (or of ``parents``, in that order, to keep more history
    reachable; ``parent`` None: a commit without parents, from a fresh index).
    Nothing in the worktree, its index or any ref changes.
    """
    tmp_index = git_dir_of(worktree) / "nerve" / f"snapshot-{os.getpid()}-{threading.get_ident()}.index"
    make_dirs(tmp_index.parent)
    env = cli.clean_env({"GIT_INDEX_FILE": os.fspath(tmp_index)})
    try:
        # Start from a copy of the worktree's own index when there is one: its stat data lets `add -A` hash
        # only what changed (a fresh index rehashes every file). The tree is the work tree's either way.
        if parent is not None:
            try:
                _copy_index(tmp_index.parent.parent / "index", tmp_index)
            except OSError:
                _drop_index(tmp_index)  # a copy cut short is no index to start from
                cli.run(["read-tree", parent], cwd=worktree, env=env)
        cli.run(["add", "-A", "--", "."], cwd=worktree, env=env)
        tree = cli.out(["write-tree"], cwd=worktree, env=env)
        parent_args = [arg for p in (parents or ([parent] if parent else [])) for arg in ("-p", p)]
        return ident.commit_tree([tree, *parent_args, "-m", message], cwd=worktree, env=env)
    finally:
        _drop_index(tmp_index, quietly=True)


def _drop_index(tmp_index: Path, *, quietly: bool = False) -> None:
    """A snapshot's temporary index, removed through the door; ``quietly``: a refusal keeps it, no failure."""
    from . import destroy

    try:
        destroy.remove_own_file(tmp_index, within=tmp_index.parent, kind="snapshot-index")
    except destroy.Refused:
        if not quietly:
            raise


def _copy_index(real: Path, copy: Path) -> None:
    """``real`` copied with its mtime. Git trusts an entry whose stat data matches the file unless the entry
    is *racy*: not older than the index file itself (a file changed in the second the index was written, with
    the same size). A copy with a new mtime would make such an entry look settled and `add -A` would keep
    the old content. The mtime is the opened file's (git replaces an index by renaming a new one in)."""
    import shutil  # here: it imports bz2 and lzma, which a reader never needs

    with open(real, "rb") as src:
        st = os.fstat(src.fileno())
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)  # never through a planted link
        with open(fd, "wb") as dst:
            shutil.copyfileobj(src, dst)
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))


# -- temporary checkouts (merge's push, --check) ----------------------------------------------------

#: where temporary checkouts live, under the common dir; each is named ``<what>-<pid>-<n>``
TMP_DIR = ("nerve", "tmp")


def tmp_root(common_dir: Path) -> Path:
    return Path(common_dir).joinpath(*TMP_DIR)


_tmp_count = itertools.count(1)


@contextlib.contextmanager
def checkout_at(cwd, common_dir: Path, commit: str, *, what: str = "push"):
    """A detached worktree at ``commit`` under ``<common-dir>/nerve/tmp/``, removed on exit (even on failure).

    Named ``<what>-<pid>-<n>``; a marker of this process's liveness token records it first, so one a killed
    process left behind is removed by the next command only once that token is proven dead
    (:func:`dead_temporary_checkouts`); one no token records is never removed.
    """
    from .. import liveness
    from . import destroy, ownership

    root = make_dirs(tmp_root(common_dir))
    path = root / f"{what}-{os.getpid()}-{next(_tmp_count)}"
    while path.exists():  # another (dead) process had our pid: its checkout is not ours to remove here
        path = root / f"{what}-{os.getpid()}-{next(_tmp_count)}"
    scope = destroy.tmp_scope(common_dir)
    # both before git creates it: the ownership record (what the door may remove) and the marker of this
    # process's liveness token (when it may: once that token is proven dead)
    ownership.record(common_dir, "tmp", os.fspath(path))
    marker = liveness.mark(common_dir, {"kind": "tmp", "path": os.path.realpath(path)})
    try:
        add_detached(cwd, path, commit)
        yield path
    finally:
        kept = destroy.discard(cwd, path, scope)
        if kept:
            import sys

            print(f"warning: {kept}", file=sys.stderr)
        if not path.exists():
            liveness.unmark(marker)


def temporary_checkouts(common_dir: Path) -> list[Path]:
    """Everything under the temporary checkouts' directory (real paths)."""
    root = tmp_root(common_dir)
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return [Path(os.path.realpath(root / name)) for name in sorted(names)]


def dead_temporary_checkouts(common_dir: Path, scan, listed: list[Path] | None = None
                             ) -> tuple[list[tuple[Path, object]], list[Path]]:
    """(checkouts a dead token recorded, each with that token; checkouts no token records: cannot tell, kept).

    ``scan``: :func:`git_nerve.liveness.scan` of the common dir, taken *after* ``listed`` (default: now) was
    listed (a checkout is recorded before it is made, so every one listed is in the scan unless it is gone).
    """
    if listed is None:
        listed = temporary_checkouts(common_dir)
    ours = {r.get("path") for r in scan.alive_records("tmp") if r is not None}
    if any(r is None for r in scan.alive):
        return [], []  # a live token's record cannot be read: it may be any of them
    dead: list[tuple[Path, object]] = []
    recorded: set[str] = set()
    for d in scan.dead:
        for r, _ in d.records("tmp"):
            recorded.add(r.get("path"))
            p = Path(r.get("path") or "")
            if p.is_absolute() and os.fspath(p) not in ours:
                dead.append((p, d))
    unknown = [p for p in listed if os.fspath(p) not in ours and os.fspath(p) not in recorded and p.exists()]
    return dead, unknown


def has_submodules(worktree: Path) -> bool:
    """True when ``worktree`` has initialised submodules (git then refuses a plain `git worktree remove`)."""
    proc = cli.run(["rev-parse", "--path-format=absolute", "--git-dir"], cwd=worktree, check=False)
    return proc.returncode == 0 and (Path(proc.stdout.strip()) / "modules").is_dir()


def _initialised_submodules(worktree: Path) -> list[tuple[str, Path]]:
    """(path shown to people, checkout) of each initialised submodule of ``worktree`` (recursive)."""
    if not has_submodules(worktree):
        return []
    proc = cli.run(["submodule", "foreach", "--quiet", "--recursive", 'printf "%s\\0" "$displaypath"'],
                   cwd=worktree, check=False)
    return [(rel, worktree / rel) for rel in (p for p in proc.stdout.split("\0") if p.strip())
            if (worktree / rel / ".git").exists()]


def submodule_unsaved(worktree: Path) -> list[str]:
    """Initialised submodules of ``worktree`` whose work would be lost with it: uncommitted changes,
    or commits no remote-tracking ref of the submodule holds (their objects live in the worktree's
    admin dir, which the removal deletes)."""
    found = []
    for rel, sub in _initialised_submodules(worktree):
        if dirty_files(sub):
            found.append(f"{rel} (uncommitted changes)")
        elif cli.run(["rev-list", "-n", "1", "HEAD", "--not", "--remotes"], cwd=sub, check=False).stdout.strip():
            found.append(f"{rel} (commits on no remote)")
    return found


def ignored_files(worktree: Path) -> list[str]:
    """Ignored paths in ``worktree`` (``.env``, ``node_modules/``: a wholly ignored directory is one entry,
    ending in ``/``), which a removal deletes and no archive keeps. [] when git cannot tell."""
    proc = cli.run(["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
                   cwd=worktree, check=False)
    if proc.returncode != 0:
        return []
    return sorted(p for p in proc.stdout.split("\0") if p)


def submodule_git_dirs(worktree: Path) -> list[tuple[str, Path]]:
    """Initialised submodules of ``worktree`` (recursive): (path shown to people, its absolute git dir)."""
    found = []
    for rel, sub in _initialised_submodules(worktree):
        git_dir = cli.run(["rev-parse", "--path-format=absolute", "--git-dir"], cwd=sub, check=False)
        if git_dir.returncode == 0 and git_dir.stdout.strip():
            found.append((rel, Path(git_dir.stdout.strip())))
    return found


def local_branch_tips(checkout: Path) -> list[str]:
    """The commits the local branches of the repository checked out at ``checkout`` point at."""
    out = cli.run(["for-each-ref", "--format=%(objectname)", "refs/heads"], cwd=checkout, check=False).stdout
    return out.split()


def unpushed_commits(repo_dir: Path, tips: list[str]) -> list[str]:
    """The ``tips`` (commits of the repository at ``repo_dir``) that reach a commit no remote-tracking ref holds."""
    tips = [t for t in dict.fromkeys(tips) if t]
    if not tips:
        return []
    have = cli.run(["cat-file", "--batch-check=%(objectname) %(objecttype)"], cwd=repo_dir,
                   input="".join(f"{t}\n" for t in tips), check=False).stdout
    tips = [t for t in tips if f"{t} commit" in have]
    keep = []
    for tip in tips:
        if cli.run(["rev-list", "-n", "1", tip, "--not", "--remotes", "--"], cwd=repo_dir, check=False).stdout.strip():
            keep.append(tip)
    return keep


def keep_in_repository(repo_dir: Path, home: Path, shas: list[str], prefix: str) -> list[str]:
    """Copy commits of the repository checked out at ``repo_dir`` into the repository whose git dir is
    ``home``, each under ``<prefix>/<sha>`` there (a push without our side's pre-push hook). The refs written; GitError when one
    is not there afterwards."""
    if not shas:
        return []
    specs = [f"{sha}:{prefix}/{sha}" for sha in shas]
    cli.run(["push", "--no-verify", "--quiet", os.fspath(home), *specs], cwd=repo_dir)
    for sha in shas:
        if not cli.ok(["--git-dir", os.fspath(home), "cat-file", "-e", f"{prefix}/{sha}^{{commit}}"], cwd=home):
            raise GitError(f"{sha[:12]} is not in {home} after archiving it there")
    return [f"{prefix}/{sha}" for sha in shas]
