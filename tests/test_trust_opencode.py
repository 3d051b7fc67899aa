"""opencode's own project settings (opencode.json(c), .opencode/) are a trusted setting (issue 35): the inventory
entry, `git nerve trust` in the main checkout showing and recording the main checkout's files, the adapter's
verdict on the worktree opencode runs in, `show` flagging a change to them, and the adapter starting no opencode
(one line) until they are trusted. The real opencode: tests/test_real_opencode_trust.py."""

from __future__ import annotations

import json
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

PLUGIN = 'export const X = async () => ({})\n'


def wt_of(work: Path, task_id: str) -> Path:
    return work.parent / f"{work.name}.worktrees" / task_id


def test_the_inventory_entry_is_every_file_opencode_loads_by_path_and_bytes(tmp_path):
    git(tmp_path, "init", "-q")
    assert opencode(tmp_path) == {}
    write(tmp_path, "opencode.json", '{"mcp": {}}\n')
    write(tmp_path, ".opencode/plugins/x.js", PLUGIN)
    write(tmp_path, ".opencode/tools/t.ts", "export default {}\n")
    s = opencode(tmp_path)[trust.OPENCODE]
    assert list(s.value) == [".opencode/plugins/x.js", ".opencode/tools/t.ts", "opencode.json"]
    assert [line.split(":")[0] for line in s.shown] == list(s.value)
    before = s.digest
    # what opencode itself writes into a .opencode/ it loads changes nothing (its plugin package's install)
    write(tmp_path, ".opencode/.gitignore", "node_modules\npackage.json\n")
    write(tmp_path, ".opencode/package.json", '{"dependencies": {"@opencode-ai/plugin": "1.18.33"}}\n')
    write(tmp_path, ".opencode/package-lock.json", "{}\n")
    write(tmp_path, ".opencode/node_modules/@opencode-ai/plugin/index.js", "x\n")
    assert opencode(tmp_path)[trust.OPENCODE].digest == before
    # a dependency of the project's own does, and so does any byte of a plugin, or a new file
    write(tmp_path, ".opencode/package.json", '{"dependencies": {"@opencode-ai/plugin": "1", "left-pad": "1"}}\n')
    with_dep = opencode(tmp_path)[trust.OPENCODE].digest
    assert with_dep != before
    write(tmp_path, ".opencode/plugins/x.js", PLUGIN + "// one more\n")
    edited = opencode(tmp_path)[trust.OPENCODE].digest
    assert edited not in (before, with_dep)
    os.symlink(tmp_path / ".opencode", tmp_path / ".opencode" / "plugins" / "loop")  # a loop ends, adds nothing
    assert opencode(tmp_path)[trust.OPENCODE].digest == edited
    elsewhere = write(tmp_path / "elsewhere", "tools/t2.js", PLUGIN).parent  # a linked directory is followed
    (tmp_path / ".opencode" / "tools").rename(tmp_path / "old-tools")
    os.symlink(elsewhere, tmp_path / ".opencode" / "tools")
    assert ".opencode/tools/t2.js" in opencode(tmp_path)[trust.OPENCODE].value


def test_trust_in_the_main_checkout_trusts_the_same_files_in_a_worktree_and_an_edit_there_is_untrusted(repo, gw, gn):
    work = repo.work
    commit_file(work, ".opencode/plugins/x.js", PLUGIN, "opencode plugin")
    assert gw("spawn t1", work).code == 0
    wt = wt_of(work, "t1")
    common = discover(work).common_dir
    assert trust.untrusted_in(common, wt, trust.OPENCODE) is not None
    shown = json.loads(gn("trust --show --json", wt).out)["settings"]  # from the worktree: the main checkout's
    assert [(s["setting"], [x.split(":")[0] for x in s["shown"]]) for s in shown] == [
        (trust.OPENCODE, [".opencode/plugins/x.js"])]
    write(wt, ".opencode/plugins/y.js", PLUGIN)  # the agent's, in its worktree only: not what trust shows
    res = gn("trust", work)
    assert res.code == 0 and trust.OPENCODE in res.out and ".opencode/plugins/x.js" in res.out, res
    assert "y.js" not in res.out
    assert trust.untrusted_in(common, work, trust.OPENCODE) is None
    assert trust.untrusted_in(common, wt, trust.OPENCODE) is not None  # y.js was never shown
    (wt / ".opencode/plugins/y.js").unlink()
    assert trust.untrusted_in(common, wt, trust.OPENCODE) is None  # the committed content, as trusted
    assert json.loads(gn("trust --show --json", work).out)["settings"] == []


def test_show_flags_a_task_that_changes_opencodes_settings(repo, gw):
    work = repo.work
    assert gw("spawn t1", work).code == 0
    wt = wt_of(work, "t1")
    write(wt, "opencode.json", '{"mcp": {"x": {"type": "local", "command": ["sh", "-c", "id"]}}}\n')
    git(wt, "add", "opencode.json")
    git(wt, "commit", "-q", "-m", "tooling")
    flags = json.loads(gw("show t1 --json", work).out)["trust_flags"]
    assert [f.split(":")[0] for f in flags] == [f"this change edits {trust.OPENCODE}"], flags


def _fake_opencode(tmp_path: Path, monkeypatch) -> Path:
    fake = tmp_path / "bin" / "opencode"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nenv > \"$NERVE_OUT/env\"\ncat > /dev/null\necho done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NERVE_OUT", str(tmp_path))
    return fake


def test_the_adapter_starts_no_opencode_on_untrusted_project_settings(repo, gn, tmp_path, monkeypatch):
    _fake_opencode(tmp_path, monkeypatch)
    work = repo.work
    start = StartFrame(task_id="t1", workflow="wf", content="x", workdir=str(work))
    ctx = AgentContext(start, (), str(work), threading.Event(), "t1", "coder")
    ran = tmp_path / "env"

    def env() -> dict[str, str]:
        assert create_opencode()("prompt", ctx).strip() == "done"
        return dict(line.split("=", 1) for line in ran.read_text().splitlines() if "=" in line)

    env()  # nothing of opencode's here: it starts
    write(work, ".opencode/plugins/x.js", PLUGIN)
    ran.unlink()
    with pytest.raises(AdapterSpawnFailed) as refused:
        create_opencode()("prompt", ctx)
    assert not ran.exists()  # opencode was never started
    line = str(refused.value)
    assert "\n" not in line and trust.OPENCODE in line and ".opencode/plugins/x.js" in line and "git nerve trust" in line
    assert gn("trust", work).code == 0
    # trusted: it starts; the agent may not edit them itself (opencode's edit rules: the path from the worktree)
    edit = json.loads(env()["OPENCODE_PERMISSION"])["edit"]
    assert edit["*"] == "allow" and edit[".opencode/*"] == edit["opencode.json"] == edit["opencode.jsonc"] == "deny"
    write(work, ".opencode/plugins/x.js", PLUGIN + "// changed\n")  # an edit after the trust: refused again
    with pytest.raises(AdapterSpawnFailed):
        create_opencode()("prompt", ctx)
