"""The HTTP adapter against a real OpenAI-shaped server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from fixtures.agents import ChatServer, Reply, completion
from git_nerve.bus.rounds import Round
from git_nerve.workflow.adapters import (AdapterAborted, AdapterAgentFailed, AdapterNonZeroExit, AdapterSpawnFailed,
                                         AdapterTimeout, AgentContext, StartFrame, create_http)
from git_nerve.workflow.adapters.http import transcript

KEY = "sk-test-planted-0123456789abcdef"


@pytest.fixture
def server():
    srv = ChatServer()
    yield srv
    srv.close()


def ctx(rounds=(), abort=None) -> AgentContext:
    start = StartFrame(task_id="t1", workflow="wf", content="Add a greeting.", workdir="/nonexistent")
    return AgentContext(start, tuple(rounds), "/nonexistent", abort or threading.Event(), "t1", "planner")


def test_chat_completion_with_the_key_read_from_the_named_variable(server, monkeypatch):
    monkeypatch.setenv("NERVE_TEST_KEY", KEY)
    server.reply(Reply(body=completion("the plan\n```json\n{\"ok\": true}\n```")))
    adapter = create_http(server.base_url, "fake-model", api_key_env="NERVE_TEST_KEY")
    rounds = [Round(1, 0.0, "coder", {"files": 2}, "changed two files")]
    assert adapter("You are the planner.", ctx(rounds)).startswith("the plan")
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {KEY}"
    body = req["body"]
    assert body["model"] == "fake-model"
    assert body["messages"][0] == {"role": "system", "content": "You are the planner."}
    assert "Add a greeting." in body["messages"][1]["content"]
    assert "[#1 coder]" in body["messages"][1]["content"] and "changed two files" in body["messages"][1]["content"]
    assert KEY not in repr(adapter)  # only the variable's name is held


def test_no_key_variable_means_no_authorization_header(server):
    server.reply(Reply(body=completion([{"type": "text", "text": "part one, "}, {"type": "text", "text": "part two"}])))
    assert create_http(server.base_url, "m")("p", ctx()) == "part one, part two"
    assert "Authorization" not in server.requests[0]["headers"]


def test_unset_key_variable_is_spawn_failed(server, monkeypatch):
    monkeypatch.delenv("NERVE_TEST_KEY", raising=False)
    adapter = create_http(server.base_url, "m", api_key_env="NERVE_TEST_KEY")
    with pytest.raises(AdapterSpawnFailed) as info:
        adapter("p", ctx())
    assert "NERVE_TEST_KEY" in info.value.message
    assert adapter.check() == [f"environment variable NERVE_TEST_KEY (the API key for {adapter.url}) is not set"]
    assert not server.requests


def test_a_rejected_key_is_one_line_naming_the_cause_and_the_key_is_scrubbed(server, monkeypatch):
    monkeypatch.setenv("NERVE_TEST_KEY", KEY)
    server.reply(Reply(status=401, echo_auth=True))
    adapter = create_http(server.base_url, "m", api_key_env="NERVE_TEST_KEY")
    with pytest.raises(AdapterAgentFailed) as info:
        adapter("p", ctx())
    err = info.value
    assert err.exit_code == 401 and err.kind == "agent_failed"
    first = err.message.splitlines()[0]
    assert "the API key was rejected (bad or missing key: $NERVE_TEST_KEY)" in first
    assert "bad credentials" in err.message and "[redacted]" in err.message
    assert KEY not in err.message


def test_other_http_error_statuses_are_non_zero_exit(server):
    server.reply(Reply(status=500, body={"error": "boom"}))
    with pytest.raises(AdapterNonZeroExit) as info:
        create_http(server.base_url, "m")("p", ctx())
    assert info.value.exit_code == 500 and "boom" in info.value.message


def test_a_body_that_is_not_a_chat_completion(server):
    server.reply(Reply(body={"result": "wrong shape"}))
    with pytest.raises(AdapterNonZeroExit) as info:
        create_http(server.base_url, "m")("p", ctx())
    assert "not a chat completion" in info.value.message and "wrong shape" in info.value.message


def test_unreachable_endpoint_is_spawn_failed():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AdapterSpawnFailed) as info:
        create_http(f"http://127.0.0.1:{port}/v1", "m", timeout=5)("p", ctx())
    assert "cannot reach" in info.value.message


def test_timeout(server):
    server.reply(Reply(delay=2.0))
    t0 = time.monotonic()
    with pytest.raises(AdapterTimeout):
        create_http(server.base_url, "m", timeout=0.3)("p", ctx())
    assert time.monotonic() - t0 < 1.5


def test_abort(server):
    server.reply(Reply(delay=2.0))
    abort = threading.Event()
    threading.Timer(0.2, abort.set).start()
    t0 = time.monotonic()
    with pytest.raises(AdapterAborted):
        create_http(server.base_url, "m")("p", ctx(abort=abort))
    assert time.monotonic() - t0 < 1.5


def test_bad_configuration_is_refused_early():
    with pytest.raises(ValueError):
        create_http("ftp://example.invalid", "m")
    with pytest.raises(ValueError):
        create_http("http://127.0.0.1:1/v1", "")


def test_transcript_keeps_the_newest_rounds_within_budget():
    rounds = [Round(i, 0.0, "coder", {}, f"round {i} " + "x" * 100) for i in range(1, 21)]
    text = transcript(rounds, budget=500)
    assert "[#20 coder]" in text and "[#1 coder]" not in text
    assert "earlier rounds omitted" in text
    assert text.index("[#19 coder]") < text.index("[#20 coder]")
