"""The one door for destruction (issue 21): nothing outside git_nerve/git/destroy.py removes a tree, a worktree,
a branch or a ref; the door proves a target is git-nerve's own before it acts, and keeps it otherwise."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from fixtures.repos import build
from fixtures.repos import worker as wfx
from git_nerve.git import destroy, ownership
from tests import crash_support as cs
from tests import reliability_support as rs
from waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "git_nerve"
DOOR = PACKAGE / "git" / "destroy.py"
FILE_DOOR = PACKAGE / "filedoor.py"

#: what only the door may do
FORBIDDEN = {
    "shutil.rmtree": re.compile(r"\brmtree\s*\("),
    "os.rmdir": re.compile(r"\.rmdir\s*\(|\bos\.removedirs\s*\("),
    "git worktree remove": re.compile(r"[\"']worktree[\"']\s*,\s*[\"']remove[\"']"),
    "git worktree prune": re.compile(r"[\"']worktree[\"']\s*,\s*[\"']prune[\"']"),
    "git branch -d/-D": re.compile(r"[\"']branch[\"']\s*,\s*(?:[^\]\n]*,\s*)?[\"'](?:-d|-D|--delete)[\"']"),
    "git update-ref -d": re.compile(r"[\"']update-ref[\"']\s*,\s*(?:[^\]\n]*,\s*)?[\"'](?:-d|--delete)[\"']"),
    "a ref's delete()": re.compile(r"\bdelete_reference\s*\(|\b(?:ref|reference|branch|refs?\[[^\]]*\])\.delete\s*\("),
    "a push of :refs/": re.compile(r"[\"']:refs/|f[\"']:\{|[\"']--delete[\"']"),
    "a file's unlink": re.compile(r"\.unlink\s*\("),
    "os.remove": re.compile(r"\bos\.remove\s*\("),
}

#: what must stay outside the door: (file, what) -> (how many, why)
ALLOWED = {
    ("git_nerve/filedoor.py", "a file's unlink"): (1, "the door for single files itself (git/destroy.py re-exports it)"),
    ("git_nerve/fs.py", "a file's unlink"): (1, "replace_file's own temporary, which that very call created (O_CREAT) "
                                                "a moment before, removed when the write fails before its rename"),
}


def test_nothing_outside_the_door_destroys():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == DOOR:
            continue
        text = path.read_text(encoding="utf-8")
        for what, pattern in FORBIDDEN.items():
            hits = [text.count("\n", 0, m.start()) + 1 for m in pattern.finditer(text)]
            allowed, _why = ALLOWED.get((str(path.relative_to(ROOT)), what), (0, ""))
            if hits and len(hits) != allowed:
                found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line in hits]
    assert not found, "destruction outside git_nerve/git/destroy.py:\n" + "\n".join(found)
    for (name, what), (count, _why) in ALLOWED.items():  # an entry no longer needed goes
        assert len(FORBIDDEN[what].findall((ROOT / name).read_text(encoding="utf-8"))) == count, (name, what)


def test_the_patterns_catch_what_they_forbid():
    """The grep above must be able to fail: each pattern matches the call it forbids."""
    samples = {
        "shutil.rmtree": "shutil.rmtree(path, ignore_errors=True)",
        "os.rmdir": "os.rmdir(d)",
        "git worktree remove": 'cli.run(["worktree", "remove", "--force", p])',
        "git worktree prune": 'cli.run(["worktree", "prune"], cwd=cwd)',
        "git branch -d/-D": 'cli.run(["branch", "-D", name])',
        "git update-ref -d": 'cli.run(["update-ref", "-d", ref])',
        "a ref's delete()": "repo.references.delete_reference(name)",
        "a push of :refs/": 'cli.run(["push", remote, f":{ref}"])',
        "a file's unlink": "path.unlink(missing_ok=True)",
        "os.remove": "os.remove(path)",
    }
    assert FORBIDDEN["os.rmdir"].search("directory.rmdir()")
    for sample in ("os.unlink(path)", "Path(p).unlink()", "(d / name).unlink ()"):
        assert FORBIDDEN["a file's unlink"].search(sample), sample
    for what, sample in samples.items():
        assert FORBIDDEN[what].search(sample), what


# -- hostile inputs on real repositories ------------------------------------------------------------------------

GW = "git-worker"


def _run(argv, cwd, env=None):
    import subprocess

    proc = subprocess.run(argv, cwd=cwd, text=True, capture_output=True, env=env or dict(os.environ), timeout=120)
    return proc


@pytest.fixture
def setup(repo):
    """A repository with a live task t1 (spawned through git-nerve), its door scope, and a fingerprint of
    everything that must survive a refused removal."""
    work = repo.work
    wt1 = wfx.spawn(work, "t1")
    root = wt1.parent
    common = work / ".git"
    return work, wt1, root, common


def _scope(work):
    from git_nerve.worker import lifecycle

    with wfx.opened(work) as r:
        return lifecycle.door_scope(r)


def _fingerprint(*dirs: Path) -> dict:
    out = {}
    for d in dirs:
        for dirpath, dirnames, filenames in os.walk(d):
            for name in filenames + dirnames:
                p = Path(dirpath, name)
                out[str(p)] = p.is_dir()
    return out


def _dead_add(common: Path, name: str, gitdir: str) -> Path:
    """What a killed `git worktree add` leaves: an admin dir locked "initializing" with ``gitdir`` as written."""
    admin = common / "worktrees" / name
    admin.mkdir(parents=True)
    (admin / "locked").write_text("initializing", encoding="utf-8")
    (admin / "gitdir").write_text(gitdir, encoding="utf-8")
    (admin / "commondir").write_text("../..\n", encoding="utf-8")
    (admin / "HEAD").write_text("0" * 40 + "\n", encoding="utf-8")
    old = time.time() - 10
    for f in admin.iterdir():
        os.utime(f, (old, old))
    return admin


def _refused(fn, *args, match: str, **kw) -> str:
    with pytest.raises(destroy.Refused) as info:
        fn(*args, **kw)
    assert re.search(match, info.value.message), info.value.message
    assert info.value.exit_code == 9  # its own code (issue 42), not a git failure's 4
    return info.value.message


def _intact(work: Path, wt1: Path, admin: Path | None, before: dict) -> None:
    assert (work / ".git" / "HEAD").is_file() and (work / "src" / "app.py").is_file()
    assert build.git(work, "rev-parse", "main")
    assert build.git(wt1, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"
    if admin is not None:
        assert (admin / "gitdir").exists(), "the unproven admin dir is kept"
    assert _fingerprint(work, wt1) == before


@pytest.mark.parametrize("case", [
    "empty", "newline-only", "relative-unrecorded", "main-checkout", "root", "truncated", "not-dotgit",
    "live-task", "outside-roots",
])
def test_an_unfinished_add_is_kept_unless_provably_ours(setup, case, tmp_path):
    work, wt1, root, common = setup
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("a person's file\n", encoding="utf-8")
    if case == "outside-roots":
        ownership.record(common, "worktree", str(outside), task="t9")  # even a record does not make it ours
    gitdir, match = {
        "empty": ("", "empty"),
        "newline-only": ("\n", "empty"),
        "relative-unrecorded": ("../../../project.worktrees/ghost/.git\n", "not one git-nerve recorded"),
        "main-checkout": (f"{work}/.git\n", "not one git-nerve recorded|main checkout"),
        "root": ("/.git\n", "not one git-nerve recorded|root"),
        "truncated": (f"{root}/t2/.gi", "not a .git"),
        "not-dotgit": (f"{root}\n", "not a .git"),
        "live-task": (f"{wt1}/.git\n", "another git dir"),
        "outside-roots": (f"{outside}/.git\n", "outside the worktree root"),
    }[case]
    admin = _dead_add(common, "tree", gitdir)
    before = _fingerprint(work, wt1)
    _refused(destroy.remove_unfinished_add, admin, _scope(work), match=match)
    _intact(work, wt1, admin, before)
    assert (outside / "keep.txt").is_file()


def test_a_relative_gitdir_is_resolved_against_its_own_directory_not_the_cwd(setup, tmp_path, monkeypatch):
    """5d: `worktree.useRelativePaths` writes gitdir relative to the admin dir. Resolved against the cwd, the
    same text would name a decoy; the door removes only the recorded half checkout it really names."""
    work, wt1, root, common = setup
    half = root / "t2"
    ownership.record(common, "worktree", str(half), task="t2")
    half.mkdir()
    (half / "partial.txt").write_text("half a checkout\n", encoding="utf-8")
    admin = _dead_add(common, "t2", os.path.relpath(half / ".git", common / "worktrees" / "t2") + "\n")
    decoy_base = tmp_path / "a" / "b" / "c"
    decoy_base.mkdir(parents=True)
    decoy = Path(os.path.normpath(decoy_base / os.path.relpath(half, common / "worktrees" / "t2")))
    decoy.mkdir(parents=True, exist_ok=True)
    (decoy / "keep.txt").write_text("not ours\n", encoding="utf-8")
    monkeypatch.chdir(decoy_base)
    removed = destroy.remove_unfinished_add(admin, _scope(work))
    assert os.path.realpath(removed) == os.path.realpath(half)
    assert not half.exists() and not admin.exists()
    assert (decoy / "keep.txt").is_file()
    assert wt1.is_dir() and (work / ".git").is_dir()


def test_the_cwd_and_its_parents_are_never_removed_even_when_recorded(setup, monkeypatch):
    work, wt1, root, common = setup
    here = root / "t3"
    (here / "sub").mkdir(parents=True)
    ownership.record(common, "worktree", str(here), task="t3")
    for cwd in (here, here / "sub"):
        monkeypatch.chdir(cwd)
        admin = _dead_add(common, "t3", f"{here}/.git\n")
        _refused(destroy.remove_unfinished_add, admin, _scope(work), match="current directory or a parent")
        assert here.is_dir() and (here / "sub").is_dir() and admin.is_dir()
        _refused(destroy.remove_tree, here, _scope(work), task="t3", match="current directory or a parent")
        destroy_admin = admin
        import shutil

        shutil.rmtree(destroy_admin)  # the test's own scaffolding, rebuilt for the next cwd


def test_a_symlink_escaping_the_root_is_never_followed(setup, tmp_path):
    work, wt1, root, common = setup
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "keep.txt").write_text("a person's file\n", encoding="utf-8")
    link = root / "evil"
    link.symlink_to(outside)
    ownership.record(common, "worktree", str(link), task="evil")
    ownership.record(common, "worktree", str(link / "deep"), task="evil")
    sc = _scope(work)
    _refused(destroy.remove_tree, link, sc, task="evil", match="symbolic link")
    _refused(destroy.remove_tree, link / "deep", sc, task="evil", match="outside the worktree root")
    admin = _dead_add(common, "evil", f"{link}/deep/.git\n")
    _refused(destroy.remove_unfinished_add, admin, sc, match="outside the worktree root")
    assert (outside / "deep" / "keep.txt").is_file() and link.is_symlink()


def test_main_checkout_common_dir_root_and_relative_paths_are_refused(setup):
    work, wt1, root, common = setup
    sc = _scope(work)
    before = _fingerprint(work, wt1)
    for target, match in [(work, "main checkout"), (work.parent, "main checkout"), (common, "git dir"),
                          (common / "objects", "inside the git dir"), (Path("/"), "root directory"),
                          (Path(""), "not an absolute path"), (Path("."), "not an absolute path"),
                          (Path("project.worktrees/t1"), "not an absolute path")]:
        _refused(destroy.remove_tree, target, sc, task="t1", match=match)
        _refused(destroy.remove_worktree, work, target, sc, task="t1", match=match)
    _intact(work, wt1, None, before)


def test_another_live_tasks_worktree_is_never_removed(setup):
    work, wt1, root, common = setup
    wt2 = wfx.spawn(work, "t2")
    sc = _scope(work)
    before = _fingerprint(work, wt1)
    _refused(destroy.remove_tree, wt1, sc, task="t2", match="live task t1")
    _refused(destroy.remove_worktree, work, wt1, sc, task="t2", match="live task t1")
    assert destroy.discard(work, wt1, sc, task="t2") is not None
    _refused(destroy.remove_tree, wt1, sc, task=None, match="live task t1")
    _intact(work, wt1, None, before)
    # the task's own worktree, named by its row, is removable by git
    destroy.remove_worktree(work, wt2, sc, task="t2")
    assert not wt2.exists()


def test_a_path_under_the_root_that_no_record_names_is_kept(setup):
    work, wt1, root, common = setup
    stray = root / "a-persons-dir"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine\n", encoding="utf-8")
    _refused(destroy.remove_tree, stray, _scope(work), task="t1", match="no record says git-nerve made it")
    _refused(destroy.remove_tree, stray, _scope(work), match="no record")
    assert (stray / "notes.txt").is_file()


def test_git_refusing_a_removal_keeps_the_tree(setup):
    """5c: when `git worktree remove` refuses, nothing is removed by hand."""
    work, wt1, root, common = setup
    (wt1 / "uncommitted.txt").write_text("work in progress\n", encoding="utf-8")
    sc = _scope(work)
    with pytest.raises(destroy.GitError):
        destroy.remove_worktree(work, wt1, sc, task="t1")  # not --force: git refuses a dirty worktree
    assert (wt1 / "uncommitted.txt").is_file()
    # a directory git does not know as a worktree: discard reports it and keeps it
    made = root / "t5"
    ownership.record(common, "worktree", str(made), task="t5")
    made.mkdir()
    (made / "file.txt").write_text("x\n", encoding="utf-8")
    line = destroy.discard(work, made, _scope(work), task="t5")
    assert line and "git refused" in line
    assert (made / "file.txt").is_file()


def test_branches_and_refs_only_when_a_record_says_ours(setup):
    work, wt1, root, common = setup
    build.git(work, "branch", "persons-branch")
    sha = build.git(work, "rev-parse", "persons-branch")
    _refused(destroy.delete_branch, work, common, "persons-branch", owned_by_task="t1", match="no record")
    _refused(destroy.delete_branch, work, common, "persons-branch", owned_by_task=None, match="no record")
    ownership.record(common, "branch", "persons-branch", task="t3", adopted=True)  # spawn --adopt's record
    _refused(destroy.delete_branch, work, common, "persons-branch", owned_by_task="t3", match="adopted")
    ownership.record(common, "branch", "persons-branch", task="t3", adopted=None)  # an older bus: cannot tell
    _refused(destroy.delete_branch, work, common, "persons-branch", owned_by_task="t3", match="cannot tell")
    _refused(destroy.delete_branch, work, common, "feat/t1", owned_by_task="t2", match="no record")
    _refused(destroy.delete_remote_branch, work, common, "origin", "persons-branch", owned_by_task="t1",
             match="no record")
    _refused(destroy.delete_ref, work, "refs/nerve/archive/t1", match="temporary")
    _refused(destroy.delete_ref, work, "refs/heads/main", match="temporary")
    assert build.git(work, "rev-parse", "persons-branch") == sha
    # spawn recorded feat/t1 as made for t1 (record-then-create)
    assert ownership.recorded(common, "branch", "feat/t1")["task"] == "t1"
    assert ownership.recorded(common, "worktree", str(wt1))["task"] == "t1"


# -- the reproduction, through the CLI ----------------------------------------------------------------


def test_an_empty_gitdir_no_longer_deletes_the_repository(repo):
    """21.1: `.git/worktrees/tree/` locked "initializing" with an empty gitdir, 10 s old; `git worker spawn t2`
    used to remove the current directory (the main checkout, .git included)."""
    work = repo.work
    assert _run(["git-nerve", "init"], work).returncode == 0
    wt1 = wfx.spawn(work, "t1")
    admin = work / ".git" / "worktrees" / "tree"
    admin.mkdir(parents=True)
    (admin / "locked").write_text("initializing", encoding="utf-8")
    (admin / "gitdir").write_text("", encoding="utf-8")
    old = time.time() - 10
    for f in (admin / "locked", admin / "gitdir"):
        os.utime(f, (old, old))
    head = build.git(work, "rev-parse", "HEAD")
    res = _run([GW, "spawn", "t2"], work)
    assert res.returncode == 0, res.stderr
    kept = [ln for ln in res.stderr.splitlines() if ln.startswith("kept: ")]
    assert len(kept) == 1 and "empty" in kept[0] and str(admin) in kept[0], res.stderr
    assert not any(ln.startswith("repaired: ") for ln in res.stderr.splitlines()), res.stderr
    assert (work / ".git" / "HEAD").is_file() and (work / "src" / "app.py").is_file()
    assert build.git(work, "rev-parse", "HEAD") == head
    assert wt1.is_dir() and admin.is_dir()
    assert wfx.state(work, "t2") == "ASSIGNED" and wfx.worktree(work, "t2").is_dir()


def test_an_unfinished_add_of_ours_is_repaired_through_the_cli(repo):
    """The same leftover, when its gitdir names a worktree spawn recorded making, is removed (and the task made)."""
    work = repo.work
    assert _run(["git-nerve", "init"], work).returncode == 0
    common = work / ".git"
    half = work.parent / f"{work.name}.worktrees" / "t2"
    ownership.record(common, "worktree", str(half), task="t2")
    # the spawn that was making it was SIGKILLed inside `git worktree add`: its liveness token is dead
    cs.killed_token(work, ["worktree", "add", "--quiet", "-b", "feat/t2", str(half), "main"])
    half.mkdir(parents=True)
    (half / "src").mkdir()
    admin = _dead_add(common, "t2", f"{half}/.git\n")
    (half / ".git").write_text(f"gitdir: {admin}\n", encoding="utf-8")
    res = _run([GW, "spawn", "t2"], work)
    assert res.returncode == 0, res.stderr
    assert any(ln.startswith("repaired: ") and "unfinished worktree" in ln for ln in res.stderr.splitlines()), res.stderr
    assert build.git(half, "symbolic-ref", "HEAD") == "refs/heads/feat/t2"
    assert (work / ".git" / "HEAD").is_file()


# -- item 4: removals that converge -------------------------------------------------------------------------------


def _registered(work: Path) -> list[str]:
    out = build.git(work, "worktree", "list", "--porcelain")
    return [ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("worktree ")]


def test_cancel_cleanup_force_killed_after_git_deleted_the_dotgit_file_converges(repo):
    """21.4: killed inside `git worktree remove` after git deleted the worktree's .git file: every rerun used to
    exit 4 ("validation failed, cannot remove working tree") and a prunable entry stayed."""
    work = repo.work
    wt = wfx.drive(work, "t1", "WORKING")
    (wt / "wip.txt").write_text("uncommitted\n", encoding="utf-8")
    killed = _run([GW, "cancel", "t1", "--cleanup", "--force"], work,
                  env={**os.environ, "NERVE_FAULT": "cleanup.before-remove"})
    assert killed.returncode == -9, killed.stderr
    archived = build.git(work, "rev-parse", "refs/nerve/archive/t1")
    # what git had done when it was killed: the .git file and some files gone, the rest and its admin dir not
    (wt / ".git").unlink()
    (wt / "src" / "app.py").unlink()
    assert wt.is_dir() and str(wt) in _registered(work)
    res = _run([GW, "cancel", "t1", "--cleanup", "--force"], work)
    assert res.returncode == 0, res.stderr
    assert not wt.exists() and str(wt) not in _registered(work)
    assert "finished removing" in res.stderr
    assert build.git(work, "rev-parse", "refs/nerve/archive/t1") == archived
    assert build.git(work, "show", f"{archived}:wip.txt") == "uncommitted"
    assert wfx.state(work, "t1") == "FAILED"
    assert _run([GW, "cancel", "t1", "--cleanup", "--force"], work).returncode == 0  # and again: nothing to do


def test_merge_check_killed_while_its_check_runs_leaves_nothing_registered(repo, tmp_path):
    """21.4: the check worktree lived under the system temp dir and stayed registered for good; now it is a
    recorded temporary checkout under <common>/nerve/tmp/ that the next command removes."""
    import signal
    import subprocess
    import tempfile

    work = repo.work
    wfx.drive(work, "t1", "APPROVED")
    flag = tmp_path / "check-started"
    before_tmp = set(os.listdir(tempfile.gettempdir()))
    child = subprocess.Popen([GW, "merge", "t1", "--check", f"sh -c 'touch {flag}; sleep 60'"], cwd=work,
                             start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(flag.exists, 60, what="the check to start", interval=0.02, alive=child)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    tmp_root = work / ".git" / "nerve" / "tmp"
    checks = [p for p in _registered(work) if p.startswith(str(tmp_root) + "/check-")]
    assert len(checks) == 1, _registered(work)
    assert ownership.recorded(work / ".git", "tmp", checks[0]) is not None
    assert not [n for n in set(os.listdir(tempfile.gettempdir())) - before_tmp if n.startswith("nerve-check-")]
    res = _run([GW, "merge", "t1"], work)
    assert res.returncode == 0, res.stderr
    assert any(ln.startswith("repaired: ") and "temporary checkout" in ln for ln in res.stderr.splitlines()), res.stderr
    assert not [p for p in _registered(work) if p.startswith(str(tmp_root))]
    assert not any(tmp_root.iterdir())
    assert wfx.state(work, "t1") == "COMPLETED"


def test_two_cancel_cleanups_of_one_task_at_once(repo):
    """21.4: the loser used to print a raw git error; now it is one clear line (exit 4) and removes nothing."""
    from git_nerve.locks import hold

    work = repo.work
    wt = wfx.drive(work, "t1", "WORKING")
    with hold(work / ".git" / "nerve" / "locks" / "cleanup-t1.lock"):  # the other cleanup, mid-way
        res = _run([GW, "cancel", "t1", "--cleanup"], work)
        assert res.returncode == 4, res.stderr
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "another command is cleaning up t1" in lines[0], res.stderr
        assert wt.is_dir() and build.git(wt, "symbolic-ref", "HEAD") == "refs/heads/feat/t1"
    res = _run([GW, "cancel", "t1", "--cleanup"], work)
    assert res.returncode == 0, res.stderr
    assert not wt.exists()


def test_two_cancel_cleanups_racing_for_real(repo):
    import subprocess

    work = repo.work
    wt = wfx.drive(work, "t1", "WORKING")
    procs = [subprocess.Popen([GW, "cancel", "t1", "--cleanup"], cwd=work, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    assert 0 in [code for code, _ in results], results
    for code, err in results:
        assert code in (0, 4), results
        if code == 4:
            assert "another command is cleaning up t1" in err and "fatal:" not in err, results
    assert not wt.exists() and str(wt) not in _registered(work)
    assert "refs/heads/feat/t1" not in wfx.branches(work)


# -- the door's other removals: a private temporary directory, a killed write's temporary file ------------------


def test_remove_own_tempdir_refuses_anything_but_a_private_temporary_directory_of_ours(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ours = Path(tempfile.mkdtemp(prefix="nerve-x-"))
    (ours / "f").write_text("f")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "nerve-x-deep").mkdir(parents=True)
    link = tmp_path / "nerve-x-link"
    link.symlink_to(elsewhere)
    other_prefix = Path(tempfile.mkdtemp(prefix="person-"))
    for target in (tmp_path, elsewhere / "nerve-x-deep", link, other_prefix, tmp_path / "nerve-x-",
                   Path(os.getcwd()), Path("/")):
        with pytest.raises(destroy.Refused):
            destroy.remove_own_tempdir(target, prefix="nerve-x-")
    assert elsewhere.is_dir() and (elsewhere / "nerve-x-deep").is_dir() and link.is_symlink() and other_prefix.is_dir()
    destroy.remove_own_tempdir(ours, prefix="nerve-x-")
    assert not ours.exists()


def test_remove_dead_temporaries_removes_only_a_dead_writers_temporary(tmp_path):
    """A killed write's temporary (ours by name, its writer's flock free) goes; a live writer's, a symlink with our
    name, a person's file and a directory stay."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    dead = hooks / ".pre-push.nerve-999999.tmp"
    dead.write_text("half a hook")
    live = hooks / ".post-commit.nerve-1.tmp"
    live.write_text("being written")
    with rs.flock_held(live):
        target = tmp_path / "precious"
        target.write_text("keep me")
        (hooks / ".post-merge.nerve-999998.tmp").symlink_to(target)
        (hooks / "pre-commit").write_text("a person's hook")
        (hooks / ".post-rewrite.nerve-999997.tmp").mkdir()

        removed = destroy.remove_dead_temporaries(hooks)

        assert removed == [dead] and not dead.exists()
        assert live.read_text() == "being written"
        assert (hooks / ".post-merge.nerve-999998.tmp").is_symlink() and target.read_text() == "keep me"
        assert (hooks / "pre-commit").exists() and (hooks / ".post-rewrite.nerve-999997.tmp").is_dir()


def test_a_snapshots_index_is_removed_only_when_it_is_this_processs_own_file_in_a_nerve_dir(repo, monkeypatch):
    """The snapshot's temporary index goes through the door: only a regular file of this process's name, directly
    in a ``nerve`` directory; the checkout, the cwd, a parent, a link, a directory, another process's file are kept."""
    nerve = repo.work / ".git" / "nerve"
    nerve.mkdir(exist_ok=True)
    mine = nerve / f"snapshot-{os.getpid()}-1.index"
    person = repo.work / "notes.txt"
    person.write_text("mine\n")
    link = nerve / f"snapshot-{os.getpid()}-2.index"
    link.symlink_to(person)
    a_dir = nerve / f"snapshot-{os.getpid()}-3.index"
    a_dir.mkdir()
    other = nerve / f"snapshot-{os.getpid() + 1}-1.index"
    other.write_text("x")
    outside = repo.work / f"snapshot-{os.getpid()}-1.index"
    outside.write_text("x")
    monkeypatch.chdir(repo.work)
    for target, where in ((link, nerve), (a_dir, nerve), (other, nerve), (outside, repo.work), (repo.work, nerve),
                          (Path(os.getcwd()), nerve), (repo.work.parent, nerve), (nerve, nerve.parent),
                          (outside, nerve), (mine, repo.work)):
        with pytest.raises(destroy.Refused):
            destroy.remove_own_file(target, within=where, kind="snapshot-index")
    assert link.is_symlink() and person.read_text() == "mine\n" and a_dir.is_dir() and other.exists()
    assert outside.exists() and repo.work.is_dir() and nerve.is_dir()
    destroy.remove_own_file(mine, within=nerve, kind="snapshot-index")  # gone already: nothing to do
    mine.write_text("index")
    destroy.remove_own_file(mine, within=nerve, kind="snapshot-index")
    assert not mine.exists()


def test_a_link_planted_at_the_snapshots_index_name_is_never_written_through(repo):
    """An agent can write into its worktree's git dir: a link named like the snapshot's temporary index must not
    make the snapshot copy the index onto the link's target, and is kept (the snapshot refuses)."""
    import threading

    from git_nerve.errors import GitError
    from git_nerve.git import worktrees

    person = repo.work.parent / "persons-file"
    person.write_text("a person's file\n")
    planted = repo.work / ".git" / "nerve" / f"snapshot-{os.getpid()}-{threading.get_ident()}.index"
    planted.parent.mkdir(exist_ok=True)
    planted.symlink_to(person)
    head = build.git(repo.work, "rev-parse", "HEAD")
    with pytest.raises(GitError):
        worktrees.snapshot(repo.work, head, "snap")
    assert person.read_text() == "a person's file\n" and planted.is_symlink()
    planted.unlink()
    assert worktrees.snapshot(repo.work, head, "snap")  # without the link: a snapshot, its index removed
    assert not list(planted.parent.glob("snapshot-*"))


def test_a_killed_runs_private_directory_goes_only_when_proven_dead_and_ours(tmp_path, monkeypatch):
    """remove_dead_private_dirs handed hostile targets: a link named like a private directory (to a marked one
    elsewhere), a directory others may enter, a mark that is a link, a run still carrying its id, a mark whose
    runner holds its lock, a mark with no run id: all kept, whatever they point at. Only a marked, closed,
    dead one goes."""
    import fcntl
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    elsewhere = tmp_path / "elsewhere"

    def private(path, run="a" * 32, mode=0o700):
        path.mkdir(mode=mode)
        path.chmod(mode)
        (path / destroy.PRIVATE_MARK).write_text(run + "\n")
        (path / "settings.json").write_text("{}")
        return path

    private(elsewhere)
    (temp / "nerve-link").symlink_to(elsewhere)
    private(temp / "nerve-open", mode=0o755)
    linked = private(temp / "nerve-markislink")
    (linked / destroy.PRIVATE_MARK).unlink()
    (linked / destroy.PRIVATE_MARK).symlink_to(elsewhere / destroy.PRIVATE_MARK)
    private(temp / "nerve-running", run="b" * 32)
    held = private(temp / "nerve-held", run="c" * 32)
    private(temp / "nerve-norun", run="")
    dead = private(temp / "nerve-dead", run="d" * 32)
    fd = os.open(held / destroy.PRIVATE_MARK, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # its runner lives
    try:
        removed = destroy.remove_dead_private_dirs("nerve-", still_running=lambda run: run == "b" * 32)
    finally:
        os.close(fd)
    assert removed == [os.path.realpath(dead)]
    assert not dead.exists() and (elsewhere / "settings.json").exists()
    assert sorted(p.name for p in temp.iterdir()) == ["nerve-held", "nerve-link", "nerve-markislink", "nerve-norun",
                                                      "nerve-open", "nerve-running"]
    # cannot tell whether the run still goes (no /proc, no ps): kept
    assert destroy.remove_dead_private_dirs("nerve-", still_running=lambda run: None) == []
