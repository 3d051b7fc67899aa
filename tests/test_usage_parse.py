"""Each agent CLI's usage report, parsed from what the pinned CLI really printed (tests/data/usage/: captured
against the scripted model), and the price table (issue 39)."""

from __future__ import annotations

import json
from pathlib import Path

from git_nerve.workflow.adapters import usage
from git_nerve.workflow.adapters.usage import Usage

DATA = Path(__file__).parent / "data" / "usage"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_claude_json_result_per_model_with_its_cost():
    rep = usage.claude(_read("claude.json"))
    assert rep.answer == "OK"
    assert rep.usage == [Usage("claude-opus-5-5", 4382, 0, 2, 0, 0.017567999999999997)]


def test_claude_cache_reads_are_cached_input_and_cache_writes_input():
    out = json.dumps({"type": "result", "result": "done", "modelUsage": {"m": {
        "inputTokens": 10, "cacheCreationInputTokens": 100, "cacheReadInputTokens": 1000, "outputTokens": 5,
        "costUSD": 0.5}}})
    assert usage.claude(out).usage == [Usage("m", 1110, 1000, 5, None, 0.5)]


def test_claude_stream_json_last_result_line():
    lines = [json.dumps({"type": "system"}), json.dumps({"type": "result", "result": "x", "modelUsage": {
        "m": {"inputTokens": 3, "outputTokens": 4}}})]
    rep = usage.claude("\n".join(lines))
    assert rep.answer == "x" and rep.usage == [Usage("m", 3, 0, 4, None, None)]


def test_codex_turn_completed_and_last_agent_message():
    rep = usage.codex(_read("codex.json"), "gpt-x")
    assert rep.answer == "OK"
    assert rep.usage == [Usage("gpt-x", 4970, 0, 1, 0, None)]


def test_gemini_stats_per_model():
    rep = usage.gemini(_read("gemini.json"))
    assert rep.answer == "OK"
    assert rep.usage == [Usage("nerve-scripted", 8158, 0, 1, 0, None)]


def test_qwen_result_event_counts_every_request_of_the_run():
    rep = usage.qwen(_read("qwen.json"))
    assert rep.answer == "OK"
    # the main request (8522 + 1) and Qwen Code's own memory extractor's (4024 + 6): both were billed
    assert rep.usage == [Usage("nerve-scripted", 12546, 0, 7, 0, None)]


def test_aider_each_response_as_the_launcher_logged_it():
    logged = "\n".join(json.dumps({"model": "openai/m", "prompt_tokens": n, "completion_tokens": 2,
                                   "cached_tokens": c}) for n, c in ((563, None), (670, 600)))
    rep = usage.aider(logged, _read("aider.out"))
    assert rep.answer == _read("aider.out")
    assert rep.usage == [Usage("openai/m", 1233, 600, 4, None, None)]
    # its own `Tokens:` lines (rounded, and echoed from earlier rounds by a /run of `git nerve thread`) never count
    assert usage.aider("", _read("aider.out") + "Tokens: 1.9k sent, 64 received.\n").usage == []


def test_opencode_text_parts_and_step_finish():
    rep = usage.opencode(_read("opencode.json"), "nerve/nerve-scripted")
    assert rep.answer == "OK"
    assert rep.usage == [Usage("nerve/nerve-scripted", 2398, 0, 1, 0, None)]


def test_copilot_usage_output_file_per_model_without_dollars():
    rep = usage.copilot(_read("copilot.json"), "the answer")
    assert rep.answer == "the answer"
    assert rep.usage == [Usage("nerve-scripted", 17034, 0, 29, None, None)]  # requests.cost is premium requests
    assert usage.copilot("", "x").usage == [] and usage.copilot("{not json", "x").usage == []


def test_openai_usage_with_cached_and_reasoning_details():
    u = {"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 60},
         "completion_tokens_details": {"reasoning_tokens": 5}}
    assert usage.openai_usage(u, "m") == [Usage("m", 100, 60, 20, 5, None)]
    assert usage.openai_usage(None, "m") == []


def test_no_report_no_usage_and_the_output_unchanged():
    for parse in (usage.claude, usage.gemini, usage.qwen, usage.codex, usage.opencode):
        rep = parse("plain text answer\n```json\n{}\n```\n")
        assert rep.usage == [] and rep.answer.startswith("plain text answer")


def test_prices_fill_only_unknown_costs_and_only_for_priced_models():
    prices = {"m": {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cached_input_per_mtok": 0.3}}
    got = usage.priced([Usage("m", 1_000_000, 500_000, 100_000), Usage("n", 10, 0, 10),
                        Usage("m", 10, 0, 10, None, 9.0)], prices)
    assert got[0].cost_usd == 1.5 + 0.15 + 1.5
    assert got[1].cost_usd is None
    assert got[2].cost_usd == 9.0


def test_add_merges_per_model_and_an_unknown_cost_stays_unknown():
    got = usage.add([Usage("m", 1, 0, 1, None, 1.0), Usage("m", 2, 1, 2, 3, None), Usage("n", 1, 0, 1)])
    assert got == [Usage("m", 3, 1, 3, 3, None), Usage("n", 1, 0, 1)]


def test_claude_stream_json_final_report_and_what_it_streamed_meanwhile():
    out = _read("claude-stream.jsonl")
    rep = usage.claude(out)
    assert rep.answer == "OK" and rep.usage == [Usage("claude-opus-5-5", 4393, 0, 2, 0, 0.017612)]
    live = usage.ClaudeStream()
    first_two = "".join(out.splitlines(keepends=True)[:2])
    assert live(first_two[:-5]) == []  # a line not yet whole is not read
    # the assistant event's usage as streamed (its message_start: 1 output token so far), counted once per message
    assert live(first_two) == [Usage("claude-opus-5-5", 4393, 0, 1)]
    assert live(first_two + first_two.splitlines(keepends=True)[1]) == [Usage("claude-opus-5-5", 4393, 0, 1)]


def test_in_json_output_a_failure_is_read_from_what_the_cli_said_never_from_tool_output():
    from git_nerve.workflow.adapters import claude, codex

    tool = json.dumps({"type": "user", "message": {"content": [{"type": "tool_result",
                                                                  "content": "docs: Invalid API key means ..."}]}})
    bad = json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "Invalid API key · "
                                                                                            "Please run /login"}]}})
    assert claude._diagnose(None, tool + "\n", "") is None
    assert "Invalid API key · Please run /login" in claude._diagnose(None, tool + "\n" + bad + "\n", "")
    api = json.dumps({"type": "result", "result": "API Error: 529 overloaded", "modelUsage": {}})
    assert claude._diagnose(0, api + "\n", "") == "API Error: 529 overloaded"
    ran = json.dumps({"type": "item.completed", "item": {"type": "command_execution",
                                                         "aggregated_output": "unexpected status 401"}})
    assert codex.diagnose(None, ran + "\n", "") is None
    failed = json.dumps({"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized: no"}})
    assert "answered 401" in codex.diagnose(1, ran + "\n" + failed + "\n", "")
