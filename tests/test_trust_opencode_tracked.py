"""What opencode writes into `.opencode/` itself (node_modules/, its lock files, a .gitignore, its own
`@opencode-ai/plugin` dependency) is left out of the trusted digest only while it is opencode's own write
(issue 35, its edge): a COMMITTED file there is code or a pin a commit put there, and it counts (the adapter
starts no opencode until it is trusted, `show` flags the change); the plugin dependency is left out only while it
names a registry version. Real repositories; a fake opencode on PATH records whether it was started."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from conftest import git
from fixtures.repos.build import commit_file, write
from git_nerve import trust
from git_nerve.paths import discover
from git_nerve.trust.settings import opencode
from git_nerve.workflow.adapters.base import AdapterSpawnFailed, AgentContext, StartFrame
from git_nerve.workflow.adapters.opencode import create_opencode

PLUGIN = "export const X = async () => ({})\n"
#: what opencode 1.18.33 writes into a `.opencode/` it loads (tests/test_real_opencode_trust.py runs the real one)
OWN_GITIGNORE = "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore"
OWN_PACKAGE = '{\n  "dependencies": {\n    "@opencode-ai/plugin": "1.18.33"\n  }\n}\n'


@pytest.fixture
def starts(repo, gn, tmp_path, monkeypatch):
    """``starts()``: whether the opencode adapter starts (the fake) opencode in the main checkout now; the
    checkout holds a committed plugin, trusted."""
    fake = tmp_path / "bin" / "opencode"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\ntouch "$NERVE_OUT/started"\ncat > /dev/null\necho done\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NERVE_OUT", str(tmp_path))
    work = repo.work
    ctx = AgentContext(StartFrame(task_id="t1", workflow="wf", content="x", workdir=str(work)), (), str(work),
                       threading.Event(), "t1", "coder")
    started = tmp_path / "started"

    def run() -> bool:
        started.unlink(missing_ok=True)
        try:
            assert create_opencode()("prompt", ctx).strip() == "done"
        except AdapterSpawnFailed as exc:
            assert not started.exists() and "git nerve trust" in str(exc)
            run.refused = str(exc)
            return False
        assert started.exists()
        return True

    commit_file(work, ".opencode/plugins/x.js", PLUGIN, "opencode plugin")
    assert gn("trust", work).code == 0
    assert run()
    return run


def _opencode_ran_here(work: Path) -> None:
    """What opencode 1.18.33 leaves in `.opencode/` after a run: none of it tracked."""
    write(work, ".opencode/.gitignore", OWN_GITIGNORE)
    write(work, ".opencode/package.json", OWN_PACKAGE)
    write(work, ".opencode/package-lock.json", '{"lockfileVersion": 3}\n')
    write(work, ".opencode/node_modules/@opencode-ai/plugin/dist/index.js", "export {}\n")
    write(work, ".opencode/node_modules/zod/index.js", "export {}\n")


def test_a_committed_file_under_node_modules_is_untrusted_and_opencode_is_not_started(repo, gn, starts):
    work = repo.work
    _opencode_ran_here(work)
    assert starts()  # opencode's own writes, untracked: still trusted
    # an agent's commit (past opencode's .gitignore) of a package a trusted plugin imports
    write(work, ".opencode/node_modules/@opencode-ai/plugin/dist/index.js", "require('child_process').exec('id')\n")
    git(work, "add", "-f", ".opencode/node_modules/@opencode-ai/plugin/dist/index.js")
    git(work, "commit", "-q", "-m", "vendor the plugin package")
    assert not starts()
    assert ".opencode/node_modules/@opencode-ai/plugin/dist/index.js" in starts.refused
    shown = [s for s in trust.report(discover(work).common_dir, work)["settings"] if not s["trusted"]]
    assert [s["setting"] for s in shown] == [trust.OPENCODE]
    assert any(x.startswith(".opencode/node_modules/@opencode-ai/plugin/dist/index.js:") for x in shown[0]["shown"])
    assert not any(x.startswith(".opencode/node_modules/zod/") for x in shown[0]["shown"])  # untracked: opencode's
    assert gn("trust", work).code == 0 and starts()  # once the person trusted it: it starts


@pytest.mark.parametrize("name", ["bun.lock", "package-lock.json", ".gitignore"])
def test_a_committed_lock_file_or_gitignore_is_untrusted(repo, starts, name):
    work = repo.work
    _opencode_ran_here(work)
    write(work, f".opencode/{name}", '{"packages": {"evil": ["evil@https://evil.example/evil.tgz"]}}\n')
    assert starts()  # written, not tracked
    git(work, "add", "-f", f".opencode/{name}")  # staged is tracked: it counts before the commit already
    assert not starts() and f".opencode/{name}" in starts.refused
    git(work, "commit", "-q", "-m", f"pin {name}")
    assert not starts()


def test_a_committed_symlink_in_place_of_node_modules_counts_what_it_holds(repo, gn, starts):
    work = repo.work
    commit_file(work, "vendor/x/index.js", "export {}\n", "vendored")
    assert gn("trust", work).code == 0 and starts()
    os.symlink("../vendor", work / ".opencode" / "node_modules")
    assert starts()  # an untracked link: opencode's own place, not counted
    git(work, "add", "-f", ".opencode/node_modules")
    git(work, "commit", "-q", "-m", "link node_modules")
    assert not starts() and ".opencode/node_modules/x/index.js" in starts.refused
    assert gn("trust", work).code == 0 and starts()
    (work / "vendor" / "x" / "index.js").write_text("export const evil = 1\n")  # what the link holds changed
    assert not starts()


def test_a_committed_link_into_node_modules_counts_all_it_shows(repo, gn, starts):
    """`.opencode/plugins` committed as a link to `node_modules` (which holds a committed file, so it is walked):
    every file opencode loads through the link counts, untracked ones included."""
    work = repo.work
    git(work, "rm", "-q", "-r", ".opencode/plugins")
    commit_file(work, ".opencode/node_modules/a.js", PLUGIN, "a.js")
    os.symlink("node_modules", work / ".opencode" / "plugins")
    git(work, "add", "-f", ".opencode/plugins")
    git(work, "commit", "-q", "-m", "plugins are node_modules")
    assert gn("trust", work).code == 0 and starts()
    write(work, ".opencode/node_modules/b.js", PLUGIN)
    assert not starts() and ".opencode/plugins/b.js" in starts.refused


def test_a_committed_link_in_place_of_opencode_counts_what_it_holds(repo):
    work = repo.work
    commit_file(work, "vendor/cfg/plugins/x.js", PLUGIN, "config")
    commit_file(work, "vendor/cfg/node_modules/evil/index.js", "export {}\n", "a package, committed elsewhere")
    os.symlink("vendor/cfg", work / ".opencode")
    assert list(opencode(work)[trust.OPENCODE].value) == [".opencode/plugins/x.js"]  # the link untracked
    git(work, "add", ".opencode")
    assert list(opencode(work)[trust.OPENCODE].value) == [".opencode/node_modules/evil/index.js", ".opencode/plugins/x.js"]


def test_untracked_files_outside_opencodes_own_entries_count(repo, starts):
    """Untracked files elsewhere in `.opencode/` count (as before): opencode loads them whether git tracks them or
    not, and opencode never writes there itself."""
    write(repo.work, ".opencode/tools/t.js", PLUGIN)
    assert not starts() and ".opencode/tools/t.js" in starts.refused


@pytest.mark.parametrize("value", ["1.18.33", "^1.0.0", "~1.2", ">=1.0.0 <2", "latest", "*", "1.x || ^2.0.0-beta.1"])
def test_opencodes_plugin_dependency_on_a_registry_version_is_left_out(repo, starts, value):
    write(repo.work, ".opencode/package.json", '{"dependencies": {"@opencode-ai/plugin": "%s"}}\n' % value)
    assert starts()
    git(repo.work, "add", "-f", ".opencode/package.json")  # committed or not: the same
    assert starts()


@pytest.mark.parametrize("value", ["file:../evil", "../evil", "/tmp/evil", "link:../evil", "git+https://evil.example/p.git",
                                   "github:x/y", "x/y", "npm:other-package@1", "https://evil.example/p.tgz",
                                   "workspace:*", "next", ""])
def test_opencodes_plugin_dependency_on_anything_else_counts(repo, starts, value):
    write(repo.work, ".opencode/package.json", '{"dependencies": {"@opencode-ai/plugin": "%s"}}\n' % value)
    assert not starts() and ".opencode/package.json" in starts.refused


def test_outside_a_repository_everything_counts(tmp_path):
    """Where git cannot tell what it tracks, opencode's own entries count too (never left out unseen)."""
    write(tmp_path, ".opencode/plugins/x.js", PLUGIN)
    before = opencode(tmp_path)[trust.OPENCODE].value
    write(tmp_path, ".opencode/node_modules/x/index.js", "x\n")
    assert sorted(opencode(tmp_path)[trust.OPENCODE].value) == sorted([*before, ".opencode/node_modules/x/index.js"])


def test_a_name_that_is_not_utf8_under_node_modules_is_counted(repo, starts):
    work = repo.work
    name = os.fsdecode(b".opencode/node_modules/x\xff.js")
    Path(work, name).parent.mkdir(parents=True)
    Path(work, name).write_text("x\n")
    assert starts()
    git(work, "add", "-f", "--", name)
    assert not starts()
    assert ".opencode/node_modules/x\\xff.js" in opencode(work)[trust.OPENCODE].value  # shown escaped


def test_show_flags_a_task_that_commits_under_opencodes_own_entries(repo, gw):
    import json

    work = repo.work
    assert gw("spawn t1", work).code == 0
    wt = work.parent / f"{work.name}.worktrees" / "t1"
    write(wt, ".opencode/bun.lock", "{}\n")
    git(wt, "add", "-f", ".opencode/bun.lock")
    git(wt, "commit", "-q", "-m", "lock")
    flags = json.loads(gw("show t1 --json", work).out)["trust_flags"]
    assert [f.split(":")[0] for f in flags] == [f"this change edits {trust.OPENCODE}"], flags
