"""`git nerve mcp`'s front (mcptools/front.py): ``initialize`` answered from the SDK's own recorded answer while
the SDK loads, everything else passed through in order, a stale record corrected; over real stdio, raw JSON-RPC."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BIN, cli

pytest.importorskip("mcp")

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


def _worktree(main_dir: Path) -> Path:
    assert cli(["init"], main_dir, prog="nerve").code == 0
    assert cli(["spawn", "t1", "-d", "a task for MCP"], main_dir).code == 0
    return Path(json.loads(cli(["status", "--json"], main_dir).out)[0]["worktree"])


def session(wt: Path, *args: str) -> tuple[list[dict], str, int]:
    """initialize, initialized, tools/list, a heartbeat; the answers in order, stderr, exit status."""
    proc = subprocess.Popen([str(BIN / "git-nerve"), "mcp", *args], cwd=wt, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    answers = []

    def send(msg: dict, answer: bool = True) -> None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        if answer:
            answers.append(json.loads(proc.stdout.readline()))

    send(INIT)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"}, answer=False)
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "heartbeat", "arguments": {"status": "raw"}}})
    proc.stdin.close()
    rest = proc.stdout.read()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert rest == b"", rest  # nothing more: no second answer to initialize
    return answers, err, code


def record_of(main_dir: Path) -> Path:
    return main_dir / ".git" / "nerve" / "mcp-initialize.json"


def test_the_second_start_answers_initialize_from_the_sdks_recorded_answer(repo):
    wt = _worktree(repo.work)
    first, err, code = session(wt)
    assert code == 0 and err == "", err
    assert [a["id"] for a in first] == [1, 2, 3] and "thread" in {t["name"] for t in first[1]["result"]["tools"]}
    record = json.loads(record_of(repo.work).read_text())
    assert record["answers"]["2025-06-18"] == first[0]["result"]  # what the SDK itself answered

    second, err, code = session(wt, "--task", "t1")
    assert code == 0 and err == "", err
    assert second[0] == first[0] and second[1] == first[1]
    assert second[2]["result"]["content"][0]["text"].startswith("heartbeat: t1")


def test_a_stale_record_is_answered_once_then_corrected(repo):
    wt = _worktree(repo.work)
    first, _, _ = session(wt)
    path = record_of(repo.work)
    data = json.loads(path.read_text())
    data["answers"]["2025-06-18"]["instructions"] = "an older text"
    path.write_text(json.dumps(data))

    answers, err, code = session(wt)
    # the front answered (the record's text proves it), the rest of the session is the SDK's, once each
    assert code == 0 and answers[0]["result"]["instructions"] == "an older text"
    assert [a["id"] for a in answers] == [1, 2, 3] and "result" in answers[2]
    assert err == "git-nerve mcp: the recorded initialize answer was out of date; recorded anew\n"
    assert json.loads(path.read_text())["answers"]["2025-06-18"] == first[0]["result"]


def test_a_record_of_another_sdk_or_git_nerve_is_not_used(repo):
    wt = _worktree(repo.work)
    first, _, _ = session(wt)
    path = record_of(repo.work)
    data = json.loads(path.read_text())
    data["key"] = "0.0.1|elsewhere"
    data["answers"]["2025-06-18"]["instructions"] = "from another version"
    path.write_text(json.dumps(data))
    answers, err, code = session(wt)
    assert code == 0 and err == "" and answers[0] == first[0]


def test_tools_list_is_answered_from_the_sdks_recorded_list_and_corrected_when_stale(repo):
    """An agent CLI's first tool call waited for the SDK's import (issue 37): the second start answers tools/list
    from the SDK's own earlier answer, as initialize; a record that no longer matches is answered once, then
    recorded anew."""
    wt = _worktree(repo.work)
    first, err, code = session(wt)
    assert code == 0 and err == "", err
    record = json.loads(record_of(repo.work).read_text())
    assert record["tools"]["2025-06-18"] == first[1]["result"]  # what the SDK itself answered

    record["tools"]["2025-06-18"]["tools"][0]["description"] = "an older description"
    record_of(repo.work).write_text(json.dumps(record))
    answers, err, code = session(wt)
    assert code == 0 and [a["id"] for a in answers] == [1, 2, 3]
    assert answers[1]["result"]["tools"][0]["description"] == "an older description"  # the front answered it
    assert err == "git-nerve mcp: the recorded tools/list answer was out of date; recorded anew\n"
    assert json.loads(record_of(repo.work).read_text())["tools"]["2025-06-18"] == first[1]["result"]
    again, err, code = session(wt)
    assert code == 0 and err == "" and again[1] == first[1]


def test_a_tools_list_page_after_the_first_is_the_sdks(repo):
    wt = _worktree(repo.work)
    first, _, _ = session(wt)
    record = json.loads(record_of(repo.work).read_text())
    record["tools"]["2025-06-18"]["tools"][0]["description"] = "an older description"
    record_of(repo.work).write_text(json.dumps(record))
    proc = subprocess.Popen([str(BIN / "git-nerve"), "mcp"], cwd=wt, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lines = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "not-a-cursor"}}]
    out, err = proc.communicate(b"".join((json.dumps(m) + "\n").encode() for m in lines), timeout=60)
    answers = [json.loads(ln) for ln in out.splitlines()]
    assert [a["id"] for a in answers] == [1, 2] and proc.returncode == 0, err
    assert answers[1]["result"]["tools"][0]["description"] != "an older description"  # the SDK answered it
    assert json.loads(record_of(repo.work).read_text()) == record  # and no page after the first is recorded


def test_a_request_sent_just_before_the_end_of_input_is_answered(repo):
    """The MCP stdio shutdown is the client closing the server's stdin; the SDK cancels what still runs at that
    moment. A client that writes its last call and closes stdin at once gets that call's answer, and the tool
    (``done`` here, which rebases and asks for review) is not cut off half-way: the task is in review."""
    wt = _worktree(repo.work)
    assert cli(["start"], wt).code == 0
    (wt / "feature.txt").write_text("x\n")
    subprocess.run(["git", "add", "feature.txt"], cwd=wt, check=True)
    subprocess.run(["git", "commit", "-qm", "feature"], cwd=wt, check=True)
    proc = subprocess.Popen([str(BIN / "git-nerve"), "mcp"], cwd=wt, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lines = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "done", "arguments": {}}}]
    out, err = proc.communicate(b"".join((json.dumps(m) + "\n").encode() for m in lines), timeout=120)
    answers = {a["id"]: a for a in map(json.loads, out.splitlines())}
    assert sorted(answers) == [1, 2] and proc.returncode == 0, err
    assert not answers[2]["result"].get("isError"), answers[2]
    assert json.loads(cli(["status", "--json"], repo.work).out)[0]["state"] == "IN_REVIEW"
