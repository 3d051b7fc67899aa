"""`status` at many workers asks git again only for what moved (issue 27): what it found about an APPROVED
task and the remote is kept, and a merge that reaches the remote afterwards is still recorded."""

from __future__ import annotations

import json
import os

from fixtures.repos import worker as wk
from fixtures.repos.worker import fsck_after  # noqa: F401  (autouse: `git fsck` after every test)


def states(gw, work) -> dict[str, str]:
    res = gw(["status", "--json"], work)
    assert res.code == 0, res
    return {r["task_id"]: r["state"] for r in json.loads(res.out)}


def test_status_keeps_what_it_found_and_still_records_a_merge_that_reaches_origin(remote_repo, gw, sh):
    work = remote_repo.work
    for t in ("t1", "t2"):
        wk.drive(work, t, "APPROVED")
    assert states(gw, work) == {"t1": "APPROVED", "t2": "APPROVED"}
    seen = json.loads((work / ".git" / "nerve" / "reconciled.json").read_text())
    assert sorted(seen) == ["t1", "t2"]  # both looked at, neither merged: kept with the tips looked at
    assert states(gw, work) == {"t1": "APPROVED", "t2": "APPROVED"}
    # `git worker merge t1` killed just after its push reached origin: origin's main moved
    res = sh(["git", "worker", "merge", "t1"], work, env={**os.environ, "NERVE_FAULT": "merge.after-push"})
    assert res.code != 0, res
    assert wk.state(work, "t1") == "APPROVED"
    res = gw(["status", "--json"], work)
    assert {r["task_id"]: r["state"] for r in json.loads(res.out)} == {"t1": "COMPLETED", "t2": "APPROVED"}
    assert "recorded it as COMPLETED" in res.err
