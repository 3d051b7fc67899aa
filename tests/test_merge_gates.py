"""`git worker merge` pushes from a real checkout: every manager's pre-push gate runs, as for a person's push.

Real pre-commit, lefthook and husky (pinned as in test_hooks_managers). The
gate refuses while a "closed" file exists outside the repository and logs the
checkout it ran in. A refused merge shows the gate's own words, exits 7
(CHECK_FAILED) and moves nothing (origin, local main, the task's state); the
rerun after opening the gate lands.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures.repos import worker as wfx
from fixtures.repos.build import git
from test_hooks_managers import HUSKY, LEFTHOOK, PRE_COMMIT, run_ok, with_path
from realtools import npm_tool, pip_tool


def gate_script(tmp: Path) -> str:
    """A POSIX gate: refuses while <tmp>/closed exists; logs the work tree it ran in."""
    return (f'git rev-parse --show-toplevel >> {tmp}/gate.log; '
            f'if [ -e {tmp}/closed ]; then echo "GATE: release notes missing, merge refused" >&2; exit 1; fi')


def gate_file(tmp: Path) -> Path:
    path = tmp / "gate.sh"
    path.write_text(gate_script(tmp) + "\n")
    return path


def origin_main(origin: Path) -> str:
    return git(origin, "rev-parse", "refs/heads/main")


def temp_checkouts(work: Path) -> list[str]:
    root = Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "nerve" / "tmp"
    listed = git(work, "worktree", "list", "--porcelain")
    return ([p.name for p in root.iterdir()] if root.is_dir() else []) + [ln for ln in listed.splitlines() if "/nerve/tmp/" in ln]


def refused_then_merged(work: Path, origin: Path, tmp: Path, gw, *, also=None) -> None:
    """The shared scenario: a closed gate refuses the merge and nothing moves; once open, the rerun lands."""
    wfx.drive(work, "t1", "APPROVED")
    before_remote, before_local = origin_main(origin), git(work, "rev-parse", "main")
    (tmp / "closed").write_text("")

    res = gw("merge t1", work)

    assert res.code == 7, res
    assert "a pre-push hook refused the push of main to origin; nothing was merged" in res.err
    assert "GATE: release notes missing, merge refused" in res.err  # the gate's own words reach the user
    assert origin_main(origin) == before_remote and git(work, "rev-parse", "main") == before_local
    assert wfx.state(work, "t1") == "APPROVED"
    assert wfx.worktree(work, "t1").is_dir()
    assert temp_checkouts(work) == []
    ran_in = (tmp / "gate.log").read_text().split()
    assert ran_in and all("/nerve/tmp/push-" in p for p in ran_in[-1:]), ran_in  # a real checkout, not the git dir

    (tmp / "closed").unlink()
    if also:
        also()
    res = gw("merge t1", work)

    assert res.code == 0, res
    assert wfx.state(work, "t1") == "COMPLETED"
    assert origin_main(origin) == git(work, "rev-parse", "main") != before_remote
    assert git(origin, "log", "-1", "--format=%s", "main").startswith("Merge feat/t1 (t1)")
    assert temp_checkouts(work) == []
    assert gw("merge t1", work).code == 0  # idempotent


@pytest.mark.real
def test_pre_commit_gate_refuses_then_passes_even_with_our_hooks_uninstalled(remote_repo, gn, gw, tmp_path):
    pre_commit = pip_tool(*PRE_COMMIT, "pre-commit")
    work, origin = remote_repo.work, remote_repo.origin
    (work / ".pre-commit-config.yaml").write_text(
        "repos:\n- repo: local\n  hooks:\n  - id: gate\n    name: gate\n"
        f"    entry: sh {gate_file(tmp_path)}\n"
        "    language: system\n    always_run: true\n    pass_filenames: false\n    stages: [pre-push]\n"
    )
    git(work, "add", ".pre-commit-config.yaml")
    git(work, "commit", "-q", "-m", "pre-commit config")
    git(work, "push", "-q", "origin", "main")
    run_ok([pre_commit, "install", "-t", "pre-push"], work)
    assert gn("init", work).code == 0

    # the rerun also runs with our own hooks gone: pre-commit's gate alone must still work
    refused_then_merged(work, origin, tmp_path, gw, also=lambda: gn("hooks uninstall", work))


@pytest.mark.real
def test_lefthook_gate_refuses_then_passes(remote_repo, gn, gw, tmp_path, monkeypatch):
    lefthook = npm_tool(*LEFTHOOK, "lefthook")
    monkeypatch.setenv("PATH", with_path(lefthook.parent)["PATH"])
    work, origin = remote_repo.work, remote_repo.origin
    (work / "lefthook.yml").write_text(f"pre-push:\n  commands:\n    gate:\n      run: sh {gate_file(tmp_path)}\n")
    git(work, "add", "lefthook.yml")
    git(work, "commit", "-q", "-m", "lefthook config")
    git(work, "push", "-q", "origin", "main")
    run_ok([lefthook, "install"], work)
    assert gn("init", work).code == 0
    assert gn("hooks install", work).code == 0

    refused_then_merged(work, origin, tmp_path, gw)


@pytest.mark.real
def test_husky_gate_under_its_relative_hooks_path_refuses_then_passes(remote_repo, gn, gw, tmp_path, monkeypatch):
    husky = npm_tool(*HUSKY, "husky")
    monkeypatch.setenv("PATH", with_path(husky.parent)["PATH"])
    work, origin = remote_repo.work, remote_repo.origin
    (work / ".husky").mkdir()
    (work / ".husky" / "pre-push").write_text(gate_script(tmp_path) + "\n")
    git(work, "add", ".husky")
    git(work, "commit", "-q", "-m", "husky hooks")
    git(work, "push", "-q", "origin", "main")
    run_ok([husky], work, dict(os.environ))  # husky's `prepare`: core.hooksPath=.husky/_ (relative)
    assert git(work, "config", "core.hooksPath") == ".husky/_"
    assert gn("init", work).code == 0

    refused_then_merged(work, origin, tmp_path, gw)


def test_a_temporary_checkout_a_killed_merge_left_is_removed_by_the_next_command(remote_repo, gw):
    """A merge SIGKILLed inside its temporary push checkout: its liveness token is dead, so the next command
    removes the checkout (and only it); a checkout no git-nerve command recorded is kept, and said."""
    import subprocess

    work = remote_repo.work
    wfx.drive(work, "t1", "APPROVED")
    common = Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    killed = subprocess.run(["git", "worker", "merge", "t1"], cwd=work, capture_output=True, text=True,
                            env={**os.environ, "NERVE_FAULT": "merge.in-checkout"})
    assert killed.returncode == 137 and "signal 9" in killed.stderr, killed  # git reports its child killed
    (left,) = [p for p in (common / "nerve" / "tmp").iterdir() if p.name.startswith("push-")]
    foreign = common / "nerve" / "tmp" / "push-999999-1"  # made by hand: no token of ours recorded it
    git(work, "worktree", "add", "-q", "--detach", str(foreign), "HEAD")

    res = gw("merge t1", work)

    assert res.code == 0, res
    assert f"repaired: removed the temporary checkout {left}" in res.err
    assert not left.exists() and str(left) not in git(work, "worktree", "list")
    assert f"kept: {foreign}" in res.err and foreign.is_dir()


def test_merge_all_and_batch_run_the_gate_from_a_checkout_and_a_refusal_moves_nothing(remote_repo, sh, tmp_path):
    """A plain pre-push hook of the user's (no manager): `merge --all` and `--batch` push through it too."""
    from fixtures.repos.hooks import hooks_dir, write_hook

    work, origin = remote_repo.work, remote_repo.origin
    for task in ("t1", "t2"):
        wfx.drive(work, task, "APPROVED")
    # the user's own gate in place of ours; it needs a work tree (`git status` fails in a git dir)
    write_hook(hooks_dir(work), "pre-push", "#!/bin/sh\ngit status --porcelain >/dev/null || exit 9\n" + gate_script(tmp_path) + "\n")
    before = origin_main(origin)
    (tmp_path / "closed").write_text("")

    res = sh("git worker merge --all", work)

    assert res.code == 7, res
    assert res.err.count("GATE: release notes missing, merge refused") == 2, res.err
    assert origin_main(origin) == before and git(work, "rev-parse", "main") == before
    assert {wfx.state(work, t) for t in ("t1", "t2")} == {"APPROVED"}
    assert temp_checkouts(work) == []

    (tmp_path / "closed").unlink()
    res = sh("git worker merge --all --batch 2 --check true", work)

    assert res.code == 0, res
    assert {wfx.state(work, t) for t in ("t1", "t2")} == {"COMPLETED"}
    assert origin_main(origin) == git(work, "rev-parse", "main") != before


def test_delete_branch_goes_through_the_gate_and_a_refusal_is_a_warning_not_a_failed_merge(remote_repo, gw):
    from fixtures.repos.hooks import hooks_dir, write_hook

    work, origin = remote_repo.work, remote_repo.origin
    wfx.drive(work, "t1", "APPROVED")
    assert git(origin, "rev-parse", "--verify", "refs/heads/feat/t1")  # `done` pushed it
    # a gate that refuses deleting branches on the remote (the local sha of a deletion is all zeros)
    write_hook(hooks_dir(work), "pre-push", "#!/bin/sh\ngit status --porcelain >/dev/null || exit 9\n"
               "while read l lsha r rsha; do case $lsha in *[!0]*) ;; *) echo \"GATE: keep $r\" >&2; exit 1;; esac; done\n")

    res = gw("merge t1 --delete-branch", work)

    assert res.code == 0, res
    assert wfx.state(work, "t1") == "COMPLETED"
    assert origin_main(origin) == git(work, "rev-parse", "main")
    assert "feat/t1 was not deleted on origin: GATE: keep refs/heads/feat/t1" in res.err
    assert git(origin, "rev-parse", "--verify", "refs/heads/feat/t1")
    assert temp_checkouts(work) == []
