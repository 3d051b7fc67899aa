"""The REAL opencode (pinned, tests/agent_drivers.py) loads a plugin committed to the repository's `.opencode/`
only once the person trusted its exact content (issue 35: an agent's or a teammate's commit could have put it
there, and it runs as code with the person's rights).

A plugin on main that writes a marker file when opencode imports it, in the task's worktree: the first run
(untrusted) starts no opencode (opencode 1.18.33 imports a project's plugins even with
OPENCODE_DISABLE_PROJECT_CONFIG=1, which this test showed): one line naming the plugin and `git nerve trust`,
the run ends with an error, the marker is never written; after `git nerve trust` in the main checkout (it shows
the plugin) the run loads it, works (the coder's commit) and git-nerve's own notes plugin, named by the run's
OPENCODE_CONFIG, still hands a note over mid-run. The run ends after the coder (a one-token budget); what opencode
wrote into `.opencode/` meanwhile (its plugin package's install) leaves the settings trusted for the next run.
And the agent's own write under `.opencode/` is refused by opencode's edit rules.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from fixtures.repos.build import commit_file, git
from git_nerve import trust
from git_nerve.bus import steer
from git_nerve.bus.connection import Bus
from git_nerve.demo.scripted_model.server import ScriptedModel
from tests.agent_drivers import DRIVERS, env_for
from tests.real_agents import AgentRepo, _check, chat_params, stop_process
from tests.waiting import wait_until

pytestmark = pytest.mark.real

NOTE = "Nerve note: the plugin question is settled."
REFUSED = "opencode: not started: opencode project settings in "
PLUGIN = """// a project's plugin: opencode imports it when it loads the project's .opencode/
import { writeFileSync } from "node:fs"
writeFileSync(%s, "loaded\\n")
export const Marker = async () => ({})
"""


def test_a_committed_opencode_plugin_loads_only_once_trusted(tmp_path):
    driver = DRIVERS["opencode"]
    binary = driver.install()
    marker = tmp_path / "project-plugin-loaded"
    repo = AgentRepo.create(tmp_path, "opencode", toml_extra="\n[budget]\ntask_tokens = 1\n")
    commit_file(repo.work, ".opencode/plugins/marker.js", PLUGIN % json.dumps(str(marker)), "a project plugin")
    git(repo.work, "push", "-q", "origin", "main")
    git(repo.worktree, "merge", "-q", "--ff-only", "main")  # t1's worktree holds it, committed
    repo = dataclasses.replace(repo, base=git(repo.worktree, "rev-parse", "HEAD"))

    # untrusted: opencode is not started (1.18.33 loads a project's plugins even with
    # OPENCODE_DISABLE_PROJECT_CONFIG=1: the flag alone let this very plugin write its marker)
    with ScriptedModel(params=chat_params(repo)) as model:
        env = env_for(driver, binary, model)
        res = repo.run_develop(env)
        assert model.entries() == []  # no request: no opencode ran
    assert res.code == 1 and res.result["outcome"] == "error", res
    assert REFUSED in res.result["reason"] and ".opencode/plugins/marker.js" in res.result["reason"], res
    assert "git nerve trust" in res.result["reason"], res
    assert not marker.exists()
    assert repo.new_commits() == [] and repo.status() == ""

    # the person reads it in the main checkout and trusts it
    shown = _check(["git", "nerve", "trust"], repo.work, env)
    assert "opencode project settings" in shown and ".opencode/plugins/marker.js" in shown, shown

    # trusted: opencode runs with the project's plugin loaded, and git-nerve's own notes plugin (the run's
    # OPENCODE_CONFIG) beside it still hands a note over mid-run
    with ScriptedModel(mode="notes", params=chat_params(repo)) as model:
        model.delay_seconds = 1.0
        env = env_for(driver, binary, model)
        proc = repo.start_develop(env)
        try:
            def coder_at(step):
                def check():
                    if proc.poll() is not None:
                        raise AssertionError(f"the run ended first: {proc.communicate()}")
                    return any(e.step >= step for e in model.entries("coder"))
                return check

            wait_until(coder_at(1), timeout=120)
            _check(["git", "nerve", "tell", "--task", "t1", NOTE], repo.work, env)
            out, err = proc.communicate(timeout=300)
        finally:
            stop_process(proc)
        carried = [e.step for e in model.entries("coder") if NOTE in e.prompt or any(NOTE in r for r in e.results)]
    assert REFUSED not in out + err, (out, err)
    assert marker.read_text() == "loaded\n", (out, err)
    assert [r["role"] for r in json.loads(out)["rounds"]][-1:] == ["coder"], (out, err)  # then the one-token budget
    assert len(repo.new_commits()) == 1, (out, err)
    with Bus(repo.work / ".git" / "nerve" / "bus.db") as bus:
        deliveries = steer.deliveries_for(bus.conn, "t1")
    assert carried and [(d.via, d.reader) for d in deliveries] == [("hook", "opencode (plugin)")], (carried, deliveries)
    # what opencode wrote into the worktree's .opencode/ while it ran (its plugin package's install, a .gitignore
    # naming it), none of it tracked, does not un-trust the next run
    own = repo.worktree / ".opencode"
    assert (own / ".gitignore").exists() and (own / "node_modules").is_dir(), sorted(p.name for p in own.iterdir())
    assert trust.untrusted_in(repo.work / ".git", repo.worktree, trust.OPENCODE) is None


def test_the_agent_cannot_write_opencodes_project_settings_itself(tmp_path):
    """opencode's edit rules refuse a write under the worktree's `.opencode/` (the scripted model's escape
    scenario, its write aimed there): nothing is written, the refusal goes back to the model."""
    driver = DRIVERS["opencode"]
    binary = driver.install()
    repo = AgentRepo.create(tmp_path, "opencode", toml_extra="\n[budget]\ntask_tokens = 1\n")
    target = repo.worktree / ".opencode" / "plugins"
    with ScriptedModel(mode="escape", params={**chat_params(repo), "home": str(target)}) as model:
        res = repo.run_develop(env_for(driver, binary, model))
        results = model.results("coder")
    assert [r["role"] for r in res.result["rounds"]][:1] == ["coder"], res
    assert not (target / "escaped-write.txt").exists() and not (repo.worktree / ".opencode").exists(), res
    assert driver.refused(results), results
    assert repo.status() == ""
