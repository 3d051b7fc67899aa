"""The door for single files (git_nerve/filedoor.py, re-exported by git/destroy.py): a file git-nerve removes is a
regular file of its own name, strictly inside its own directory; a link, a directory, a path leading out, a name
that is not ours or a file no record names is kept. And the callers that used to remove something that was not
theirs: the hook installer (a person's symlinked hook), `mcp uninstall` (a person's link at the config file it had
created); the notes-pending markers of finished tasks, which were never removed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.repos import worker as wfx
from fixtures.repos.hooks import hooks_dir
from git_nerve import filedoor
from git_nerve.fs import notes_marker
from git_nerve.git import destroy
from tests.conftest import BIN, run


@pytest.fixture
def nerve(tmp_path):
    """``<common>/nerve`` with a notes-pending dir, and a person's file outside it."""
    d = tmp_path / "repo" / ".git" / "nerve"
    (d / "notes-pending").mkdir(parents=True)
    person = tmp_path / "person.txt"
    person.write_text("a person's file\n", encoding="utf-8")
    return d, person


def _refused(path, *, match: str, **kw) -> None:
    with pytest.raises(destroy.Refused) as info:
        destroy.remove_own_file(path, **kw)
    assert match in info.value.message, info.value.message
    assert info.value.exit_code == 9  # its own code (issue 42), not a git failure's 4
    assert filedoor.keep_or_remove(path, **kw).startswith("kept ")


def test_a_regular_file_of_our_name_in_our_dir_is_removed_and_a_gone_one_is_no_error(nerve):
    d, _ = nerve
    marker = d / "notes-pending" / "t1"
    marker.write_bytes(b"")
    assert destroy.remove_own_file(marker, within=marker.parent, kind="notes-pending") is True
    assert not marker.exists()
    assert destroy.remove_own_file(marker, within=marker.parent, kind="notes-pending") is False
    assert filedoor.keep_or_remove(marker, within=marker.parent, kind="notes-pending") is None


def test_a_symlink_planted_at_the_name_is_kept_and_its_target_survives(nerve):
    d, person = nerve
    link = d / "notes-pending" / "t1"
    link.symlink_to(person)
    _refused(link, within=link.parent, kind="notes-pending", match="symbolic link")
    assert link.is_symlink() and person.read_text(encoding="utf-8") == "a person's file\n"
    dangling = d / "stop-request"
    dangling.symlink_to(d / "nowhere")
    _refused(dangling, within=d, kind="stop-request", match="symbolic link")
    assert dangling.is_symlink()


def test_a_directory_at_the_name_is_kept(nerve):
    d, _ = nerve
    there = d / "notes-pending" / "t1"
    there.mkdir()
    (there / "inside").write_text("x", encoding="utf-8")
    _refused(there, within=there.parent, kind="notes-pending", match="not a regular file")
    assert (there / "inside").is_file()


def test_a_path_leading_out_of_the_owned_dir_is_kept(nerve, tmp_path):
    d, person = nerve
    out = d / "notes-pending" / ".." / ".." / ".." / ".." / person.name
    assert os.path.realpath(out) == str(person)
    _refused(out, within=d / "notes-pending", kind="notes-pending", match="not inside")
    # a directory inside that is a link leading out
    (d / "notes-pending" / "sub").symlink_to(tmp_path)
    _refused(d / "notes-pending" / "sub" / person.name, within=d / "notes-pending", kind="notes-pending",
             match="not inside")
    # an owned dir that is itself a link to a person's directory
    (d / "elsewhere").symlink_to(tmp_path)
    _refused(d / "elsewhere" / person.name, within=d / "elsewhere", kind="notes-pending",
             match="not a git-nerve directory")
    # a directory that is no nerve dir at all, the root, a relative path
    _refused(person, within=tmp_path, kind="notes-pending", match="not a git-nerve directory")
    _refused(Path("/person.txt"), within=Path("/"), kind="mcp-config", match="not a git-nerve directory",
             record={"file": "/person.txt", "created_file": True})
    _refused(Path("t1"), within=d / "notes-pending", kind="notes-pending", match="not an absolute path")
    assert person.is_file()


def test_a_file_the_record_does_not_name_or_a_name_not_ours_is_kept(nerve, tmp_path):
    d, person = nerve
    config = tmp_path / "settings.json"
    config.write_text("{}", encoding="utf-8")
    for record in (None, {"file": str(person), "created_file": True}, {"file": str(config), "created_file": False}):
        _refused(config, within=tmp_path, kind="mcp-config", record=record, match="no record says")
    assert config.is_file()
    destroy.remove_own_file(config, within=tmp_path, kind="mcp-config", record={"file": str(config), "created_file": True})
    assert not config.exists()
    # our own names only: another process's claimed notice, the bus itself, an unknown kind
    other = d / f"radar-notice.{os.getpid() + 1}"
    other.write_text("theirs", encoding="utf-8")
    _refused(other, within=d, kind="radar-notice", match="not this process's")
    (d / "bus.db").write_bytes(b"SQLite format 3\0")
    _refused(d / "bus.db", within=d, kind="spool-claimed", match="not one git-nerve gives")
    _refused(d / "bus.db", within=d, kind="anything", match="no kind of file")
    assert other.is_file() and (d / "bus.db").is_file()


def test_a_hook_is_removed_only_when_the_installer_wrote_it(tmp_path):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    mine = hooks / "pre-push"
    mine.write_bytes(b"#!/bin/sh\n# " + filedoor.HOOK_MARKER + b"\nexit 0\n")
    theirs = hooks / "post-commit"
    theirs.write_text("#!/bin/sh\necho a person's hook\n", encoding="utf-8")
    _refused(theirs, within=hooks, kind="hook-shim", match="not a hook git-nerve's installer wrote")
    destroy.remove_own_file(mine, within=hooks, kind="hook-shim")
    assert theirs.is_file() and not mine.exists()


# -- callers --------------------------------------------------------------------------------------------------


def test_a_persons_symlinked_hook_survives_install_and_uninstall(repo, gn, tmp_path):
    """A person's hook that is a link to a file holding our shim's marker (a shim copied from another repository
    into their dotfiles): the old installer followed the link, took it for its own and removed it."""
    work = repo.work
    hdir = hooks_dir(work)
    shared = tmp_path / "dotfiles" / "pre-push"
    shared.parent.mkdir()
    shared.write_bytes(b"#!/bin/sh\n# " + filedoor.HOOK_MARKER + b" (copied from another repository)\nexit 0\n")
    shared.chmod(0o755)
    hdir.mkdir(parents=True, exist_ok=True)
    (hdir / "pre-push").symlink_to(shared)

    assert gn("hooks install", work).code == 0
    assert (hdir / "pre-push.nerve-chained").is_symlink()  # kept, as any hook of a person's
    res = gn("hooks uninstall", work)

    assert res.code == 0, res
    assert os.readlink(hdir / "pre-push") == str(shared)
    assert shared.read_bytes().startswith(b"#!/bin/sh\n# " + filedoor.HOOK_MARKER)


def test_mcp_uninstall_keeps_a_persons_link_at_the_file_install_created(repo):
    """Install created ~/.qwen/settings.json; the person then moved it to their dotfiles and linked it back. The
    old uninstall removed their link (the file was "the one install created")."""
    work = repo.work
    exe = str(BIN / "git-nerve")
    assert run([exe, "init"], work).code == 0
    assert run([exe, "mcp", "install", "qwen"], work).code == 0
    created = Path(os.environ["HOME"]) / ".qwen" / "settings.json"
    moved = Path(os.environ["HOME"]) / "dotfiles" / "qwen.json"
    moved.parent.mkdir()
    os.replace(created, moved)
    created.symlink_to(moved)

    res = run([exe, "mcp", "uninstall", "--json"], work)

    assert created.is_symlink() and os.readlink(created) == str(moved), res
    out = json.loads(res.out)
    assert out[0]["action"] == "refused" and "symbolic link" in out[0]["reason"], out


def test_the_notes_marker_of_a_cleaned_up_task_goes_and_a_retry_sets_it_again(repo):
    work = repo.work
    wfx.spawn(work, "t1")
    exe = str(BIN / "git-nerve")
    subprocess.run([exe, "tell", "--task", "t1", "use the new API"], cwd=work, check=True, capture_output=True)
    marker = notes_marker(work / ".git" / "nerve", "t1")
    assert marker.is_file()

    res = run([str(Path(sys.executable).parent / "git-worker"), "cancel", "t1", "--cleanup"], work)
    assert res.code == 0, res
    assert not marker.exists(), "the marker of a task whose worktree is gone is removed"

    res = run([str(Path(sys.executable).parent / "git-worker"), "retry", "t1"], work)
    assert res.code == 0, res
    assert marker.is_file(), "a retried task's agent still gets the note told before"


def test_a_link_or_a_hard_link_planted_at_a_writes_temporary_name_is_never_written_through(tmp_path):
    """`fs.replace_file` writes a temporary beside the file, then renames it: an agent that planted a symbolic link
    or a hard link to a person's file at that temporary's name must not get the person's file truncated or
    rewritten, nor the planted entry removed; the write still lands."""
    from git_nerve.fs import replace_file

    person = tmp_path / "person.txt"
    person.write_text("the person's words\n")
    nerve = tmp_path / "nerve"
    nerve.mkdir()
    target = nerve / "state.json"
    tmp_name = f".{target.name}.{os.getpid()}.tmp"
    (nerve / tmp_name).symlink_to(person)
    replace_file(target, "{}")
    assert target.read_text() == "{}" and not target.is_symlink()
    assert person.read_text() == "the person's words\n"
    assert (nerve / tmp_name).is_symlink()

    (nerve / tmp_name).unlink()
    os.link(person, nerve / tmp_name)
    replace_file(target, '{"a": 1}')
    assert target.read_text() == '{"a": 1}'
    assert person.read_text() == "the person's words\n" and (nerve / tmp_name).exists()


def test_a_link_planted_at_a_marker_or_log_name_is_never_followed(tmp_path):
    """git-nerve's markers, logs and lock files are opened with O_NOFOLLOW: a link planted at the name does not
    make git-nerve create or append to the file the link points at."""
    from git_nerve.fs import create_file, set_marker

    outside = tmp_path / "outside"
    outside.mkdir()
    nerve = tmp_path / "nerve" / "notes-pending"
    nerve.mkdir(parents=True)
    (nerve / "t1").symlink_to(outside / "created-through-the-link")
    with pytest.raises(OSError):
        set_marker(nerve / "t1")
    assert not (outside / "created-through-the-link").exists()
    log = tmp_path / "nerve" / "shared-sync.log"
    victim = outside / "victim.log"
    victim.write_text("kept\n")
    log.symlink_to(victim)
    with pytest.raises(OSError):
        create_file(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    assert victim.read_text() == "kept\n"


def test_the_warm_readers_socket_is_removed_only_when_it_is_a_socket(nerve):
    """The warm reader's socket (kind warm-socket) goes through the door like any file of ours; a regular file, a
    directory or a link planted at its name is kept (then no server runs: tests/test_warm.py)."""
    import socket

    d, person = nerve
    path = d / "warm.sock"
    if len(os.fsencode(path)) >= 100:
        pytest.skip(f"{path} is too long for a Unix socket here")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
    assert destroy.remove_own_file(path, within=d, kind="warm-socket") is True
    assert not path.exists()
    path.write_text("a person's file\n", encoding="utf-8")
    _refused(path, within=d, kind="warm-socket", match="not a socket")
    assert path.read_text(encoding="utf-8") == "a person's file\n"
    path.unlink()
    path.symlink_to(person)
    _refused(path, within=d, kind="warm-socket", match="symbolic link")
    path.unlink()
    path.mkdir()
    _refused(path, within=d, kind="warm-socket", match="not a socket")
    other = d / "other.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(other))
    _refused(other, within=d, kind="warm-socket", match="not one git-nerve gives")
    assert other.exists()
