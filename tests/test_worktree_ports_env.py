"""NERVE_PORT reaches what works in a task's worktree: `git worker run` and the agents a workflow starts."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

from pydantic import BaseModel

from conftest import git
from fixtures.repos.build import commit_file
from git_nerve.bus import rounds
from git_nerve.bus.connection import Bus
from git_nerve.workflow import END, Role, Thread, Workflow
from git_nerve.workflow.adapters import create_exec

PY = sys.executable


class Step(BaseModel):
    done: bool
    note: str = ""


def spawn_with_ports(work: Path, gw) -> Path:
    commit_file(work, "nerve.toml", "[worktree]\nport_range = [40000, 40100]\nport_block = 20\n", "ports")
    assert gw("spawn t0 --no-fetch", work).code == 0
    assert gw("spawn t1 --no-fetch", work).code == 0
    return work.parent / f"{work.name}.worktrees" / "t1"


def test_worker_run_gets_nerve_port(repo, gw):
    wt = spawn_with_ports(repo.work, gw)
    script = "import os; open('port.txt', 'w').write(os.environ['NERVE_PORT'] + ' ' + os.environ['NERVE_TASK_ID'])"
    res = gw(["run", "--", PY, "-c", script], wt)
    assert res.code == 0, res
    assert (wt / "port.txt").read_text() == "40020 t1"


def test_a_workflow_agent_gets_nerve_port(repo, gw, gn, monkeypatch):
    work = repo.work
    spawn_with_ports(work, gw)
    reply = ("import os, json; print('```json'); "
             "print(json.dumps({'done': True, 'note': os.environ.get('NERVE_PORT', 'none')})); print('```')")

    def moderator(thread: Thread):
        return END if thread.last("worker") is not None else "worker"

    flow = Workflow(name="port", roles={"worker": Role(create_exec([PY, "-c", reply]), "go", Step)},
                    moderator=moderator, max_rounds=2)
    module = types.ModuleType("nerve_port_flow")
    module.workflow = flow
    monkeypatch.setitem(sys.modules, "nerve_port_flow", module)
    res = gn(["run", "nerve_port_flow:workflow", "--task", "t1"], work)
    assert res.code == 0, res
    bus = Bus(Path(git(work, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "nerve" / "bus.db")
    try:
        (only,) = rounds.load(bus.conn, "t1", [1])
    finally:
        bus.close()
    assert only.metadata["note"] == "40020", json.dumps(only.metadata)
