"""Notifications (issue 38): `[notify]` command and url called when a task's attention becomes non-null, one per task
and attention, bursts coalesced into a digest, only once trusted; a real command writing its stdin to a file and
a real HTTP receiver on 127.0.0.1 started by the test."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fixtures.repos import worker as wk
from fixtures.repos.build import commit_file
from waiting import wait_until

#: the command: appends the JSON object it reads on stdin to a file, one per line
WRITER = "import sys\nwith open(sys.argv[1], 'a') as f:\n    f.write(sys.stdin.read().strip() + '\\n')\n"


class Receiver:
    """A webhook on 127.0.0.1: every POSTed JSON body, in order."""

    def __init__(self):
        self.bodies: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.bodies.append({"type": self.headers.get("Content-Type"), **json.loads(data)})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def pairs(self) -> list[tuple]:
        out = []
        for b in self.bodies:
            out += [(e["task"], e["attention"]) for e in b.get("events", [b])]
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def configure(work: Path, tmp_path: Path, url: str, *, coalesce: float = 0, trust: bool = True) -> Path:
    (tmp_path / "writer.py").write_text(WRITER)
    out = tmp_path / "notified.jsonl"
    toml = (f"[notify]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(tmp_path / 'writer.py'))}, "
            f"{json.dumps(str(out))}]\nurl = {json.dumps(url)}\ncoalesce = {coalesce}\n"
            'console_url = "http://127.0.0.1:8765"\n')
    commit_file(work, "nerve.toml", toml, "nerve.toml: notify")
    if trust:
        subprocess.run(["git", "nerve", "trust"], cwd=work, check=True, capture_output=True)
    return out


def lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


def test_a_task_needing_review_reaches_the_command_and_the_webhook_once(repo, tmp_path, receiver, gw):
    work = repo.work
    out = configure(work, tmp_path, receiver.url)
    wk.drive(work, "t1", "IN_REVIEW", description="add the feature")
    wait_until(lambda: receiver.bodies and lines(out), what="t1's notification by both channels")
    got = lines(out)[0]
    assert got == {k: v for k, v in receiver.bodies[0].items() if k != "type"}
    assert receiver.bodies[0]["type"] == "application/json"
    assert got["task"] == "t1" and got["attention"] == "review" and got["state"] == "IN_REVIEW"
    assert got["url"] == "http://127.0.0.1:8765/#/task/t1/diff" and got["summary"] == got["text"] == "t1 waits for your review: add the feature"
    assert got["machine"]

    # looking again (status) sends nothing new; the next task that needs the person is sent, t1 never twice
    assert gw("status", work).code == 0
    wk.drive(work, "t2", "FAILED")
    wait_until(lambda: ("t2", "failed") in receiver.pairs() and len(lines(out)) >= 2, what="t2's notification")
    assert receiver.pairs() == [("t1", "review"), ("t2", "failed")]
    assert [(e["task"], e["attention"]) for e in lines(out)] == [("t1", "review"), ("t2", "failed")]
    log = (Path(work) / ".git" / "nerve" / "notify.log").read_text()
    assert "t1 review: command exited 0" in log and "t1 review: url answered 204" in log


def test_a_burst_becomes_one_digest(repo, tmp_path, receiver):
    work = repo.work
    configure(work, tmp_path, receiver.url, coalesce=5)
    for task in ("b1", "b2", "b3"):
        wk.drive(work, task, "IN_REVIEW")
    wait_until(lambda: len(receiver.pairs()) >= 3, what="every task's notification", timeout=60)
    assert sorted(receiver.pairs()) == [("b1", "review"), ("b2", "review"), ("b3", "review")]
    assert len(receiver.bodies) <= 2, receiver.bodies
    digest = receiver.bodies[-1]
    assert digest["attention"] == "digest" and digest["task"] is None and digest["summary"].startswith(
        f"{len(digest['events'])} tasks need you:")


def test_an_untrusted_command_is_skipped_said_in_the_log_and_by_trust_show(repo, tmp_path, receiver, gn):
    work = repo.work
    out = configure(work, tmp_path, receiver.url, trust=False)
    wk.drive(work, "t1", "IN_REVIEW")
    log = Path(work) / ".git" / "nerve" / "notify.log"
    wait_until(lambda: log.exists() and log.read_text().count("not trusted on this machine") >= 2,
               what="both channels skipped in the log")
    assert "skipped nerve.toml [notify] command" in log.read_text() and "skipped nerve.toml [notify] url" in log.read_text()
    assert not out.exists() and receiver.bodies == []
    shown = gn("trust --show", work).out
    assert "nerve.toml [notify] command" in shown and "nerve.toml [notify] url" in shown


def test_a_command_that_hangs_is_stopped_at_its_timeout_and_the_task_moved_on_meanwhile(repo, tmp_path, gw):
    work = repo.work
    toml = (f"[notify]\ncommand = [{json.dumps(sys.executable)}, \"-c\", \"import time; time.sleep(60)\"]\n"
            "timeout = 1\ncoalesce = 0\n")
    commit_file(work, "nerve.toml", toml, "nerve.toml: a notify command that hangs")
    subprocess.run(["git", "nerve", "trust"], cwd=work, check=True, capture_output=True)
    wk.drive(work, "t1", "IN_REVIEW")
    assert wk.state(work, "t1") == "IN_REVIEW"  # the command did not wait for the notification
    log = Path(work) / ".git" / "nerve" / "notify.log"
    wait_until(lambda: log.exists() and "t1 review: command timed out after 1s" in log.read_text(),
               what="the timeout in the notify log")
