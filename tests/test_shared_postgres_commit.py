"""PostgreSQL's transitions at their edges (issue 29): a connection lost during a transition's COMMIT, and
done's push with its claim as one step while a takeover races it. A real PostgreSQL started here
(tests/pg_support.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures.repos import build
from tests import shared_support as ss
from tests.pg_support import query, schema_of, team


pytestmark = pytest.mark.real

_row = ss.row
_schema = schema_of
_query = query


def test_a_connection_lost_during_commit_says_the_outcome_is_unknown_and_a_rerun_is_safe(tmp_path, db):
    (one,) = team(tmp_path, db, ["one"], background=False, listen=False)
    schema = _schema(one)
    ss.ok(["worker", "spawn", "t"], one)
    # the server ends the session at COMMIT (a deferred trigger fires there), the first time only
    _query(db, f"CREATE SEQUENCE {schema}.cut; "
               f"CREATE FUNCTION {schema}.cut() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
               f"IF NEW.state = 'WORKING' AND nextval('{schema}.cut') = 1 THEN "
               "PERFORM pg_terminate_backend(pg_backend_pid()); END IF; RETURN NULL; END $$; "
               f"CREATE CONSTRAINT TRIGGER cut AFTER UPDATE ON {schema}.claims DEFERRABLE INITIALLY DEFERRED "
               f"FOR EACH ROW EXECUTE FUNCTION {schema}.cut()")
    proc = ss.run(["worker", "start", "--task", "t"], one)
    assert proc.returncode == 5 and len(proc.stderr.splitlines()) == 1, proc
    assert "lost while committing" in proc.stderr and "whether it was recorded is unknown" in proc.stderr
    assert "running the command again is safe" in proc.stderr and "nothing changed" not in proc.stderr
    assert _row(one, "t").state == "ASSIGNED"
    ss.ok(["worker", "start", "--task", "t"], one)  # the rerun: done once
    assert _row(one, "t").state == "WORKING"
    assert _query(db, f"SELECT state, version FROM {schema}.claims WHERE task_id = 't'") == [("WORKING", 2)]


def test_a_takeover_racing_dones_push_waits_and_exactly_one_outcome_matches_git(tmp_path, db):
    """done holds the task's claim row across its push (slowed by the origin's pre-receive hook); a takeover
    arriving meanwhile waits for the row, then finds the task IN_REVIEW and is refused: the branch on the
    remote and the claim agree."""
    import subprocess
    import time

    one, two = team(tmp_path, db, ["one", "two"], lease=1, background=False, listen=False)
    schema = _schema(one)
    bare = tmp_path / "srv" / "project.git"
    ss.ok(["worker", "spawn", "t"], one)
    ss.ok(["worker", "start", "--task", "t"], one)
    build.commit_file(Path(_row(one, "t").worktree), "t.txt", "one's work\n")
    pushing = tmp_path / "pushing"
    (bare / "hooks").mkdir(exist_ok=True)
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\ncat >/dev/null\ntouch '{pushing}'\nsleep 4\n")
    hook.chmod(0o755)
    time.sleep(1.5)  # one is silent past its lease, by the database's clock
    done = subprocess.Popen([str(ss.BIN / "git-worker"), "done", "--task", "t"], cwd=one, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    deadline = time.monotonic() + 30
    while not pushing.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pushing.exists(), done.communicate()
    taken = ss.run(["worker", "takeover", "t"], two)  # while done's push is under way
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, (out, err)
    assert taken.returncode == 8 and "task t is held by machine one (IN_REVIEW" in taken.stderr, taken
    assert build.git(bare, "branch", "--list", "feat/t").strip() == "feat/t"
    assert _query(db, f"SELECT state, owner FROM {schema}.claims WHERE task_id = 't'") == [("IN_REVIEW", "one")]
    assert _row(one, "t").state == "IN_REVIEW" and _row(two, "t") is None
