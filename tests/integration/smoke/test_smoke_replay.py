"""The smoke test against SGLang behaviours no CPU engine produces, replayed over loopback HTTP.

The server is tests/support/sglang_replay.py (a TEST DOUBLE: its shapes are SGLang 0.5.10.post1's,
checked against the real releases by test_replay_shapes.py). The HTTP client, the checks, the
cause classifier and the module are the real code; each test replays one defect of issue 16:
stalled body, cut body, 401 behind an open /health, 500 "NaN happened", a 503 in one of N parallel
requests, a trickling stream, an error event, split markup in a streamed tool call, and the
contradictory diagnoses of empty content after finish_reason "length".
"""

from __future__ import annotations

import time

import pytest
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke import (
    ALL_CHECKS,
    SmokeTest,
    rollback_advised,
)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_http import Client
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_wait import wait_ready
from smoke_helpers import run_module
from support.sglang_replay import BEHAVIOURS

KIMI = {"served_model_name": "kimi-k2.5", "profile": "kimi-k2.5", "tool_call_parser": "kimi_k2",
        "max_tokens": 256, "concurrency": 4}
SENDING = [name for name in ALL_CHECKS if name != "reasoning"]  # the checks that send requests for KIMI


def run(server, checks=ALL_CHECKS, **params):
    """(results, causes, seconds) of the real checks against SERVER."""
    merged = dict(KIMI, base_url=server.base_url, timeout=3, suite_timeout=60)
    merged.update(params)
    smoke = SmokeTest(merged)
    started = time.monotonic()
    results = smoke.run(list(checks))
    return results, smoke.causes, time.monotonic() - started


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_every_check_returns_a_result_and_every_failure_one_cause(replay, behaviour):
    server = replay(behaviour)
    # 1 s keeps the stalling behaviours short; healthy must pass every check, so its requests get 5 s on a busy machine.
    results, causes, _seconds = run(server, timeout=5 if behaviour == "healthy" else 1, suite_timeout=8)
    assert list(results) == list(ALL_CHECKS)
    for name, res in results.items():
        assert res["status"] in ("passed", "failed", "skipped"), (name, res)
        if res["status"] == "failed":
            assert res["cause"] and res["diagnosis"] and res["message"], (name, res)
    failed = [name for name, res in results.items() if res["status"] == "failed"]
    explained = [name for cause in causes for name in cause["checks"]]
    assert sorted(explained) == sorted(failed), "every failed check is explained by exactly one cause"
    assert len({c["cause"] for c in causes}) == len(causes), "one cause is reported once"
    for cause in causes:  # one cause, one text, in every check it explains
        assert {results[name]["diagnosis"] for name in cause["checks"]} == {cause["diagnosis"]}
    if behaviour == "healthy":
        assert failed == [], results


def test_stalled_body_is_a_timeout_naming_the_request_timeout_not_the_port(replay):
    server = replay("stalled_body")
    results, causes, seconds = run(server, ["models", "chat"], timeout=2)
    chat = results["chat"]
    assert results["models"]["status"] == "passed"
    assert chat["status"] == "failed" and chat["cause"] == "timeout"
    assert "stopped after 20 bytes" in chat["message"]
    assert chat["variable"] == "openai_smoke_test_request_timeout"
    assert "GET /v1/models answered" in chat["diagnosis"] and "port" not in chat["diagnosis"]
    assert 2.0 <= seconds < 4.0


def test_cut_body_is_reported_as_cut_off(replay):
    server = replay("cut_body")
    results, causes, _seconds = run(server, ["chat", "tools"])
    assert results["chat"]["cause"] == "cut"
    assert "short of its Content-Length" in results["chat"]["message"]
    assert [c["checks"] for c in causes] == [["chat", "tools"]]
    assert rollback_advised(causes) is True  # a server that dies mid-answer is the deployment's fault


@pytest.mark.parametrize("behaviour", ["stalled_body", "cut_body", "stalled_models"])
def test_module_through_ansible_survives_broken_bodies(replay, behaviour, tmp_path):
    """The real module (AnsiballZ): a stalled or cut body gives check results, not a traceback."""
    server = replay(behaviour)
    result = run_module({"base_url": server.base_url, "served_model_name": "kimi-k2.5", "profile": "kimi-k2.5",
                         "checks": ["models", "chat"], "timeout": 2, "suite_timeout": 10}, tmp_path)
    assert result["passed"] is False
    assert "exception" not in result and "Traceback" not in result["_stdout"]
    assert set(result["checks"]) == {"models", "chat"}
    assert result["failed_checks"] and result["causes"]
    assert result["rollback_advised"] is True
    assert any(line.startswith("cause") for line in result["summary"])


def test_wrong_key_behind_an_open_health_is_ready_and_diagnosed_at_once(replay):
    server = replay("healthy", api_key="sk-right")
    client = Client(server.base_url, "sk-wrong", timeout=5)
    started = time.monotonic()
    wait = wait_ready(client, 1800, poll=0.2, probe_timeout=5)
    assert time.monotonic() - started < 5, "a wrong key must not wait for the readiness timeout"
    assert wait["ready"] is True and wait["health_status"] == 200 and wait["models_status"] == 401
    assert wait["cause"]["cause"] == "auth" and wait["cause"]["variable"] == "llm_server_api_key"
    results, causes, seconds = run(server, api_key="sk-wrong")
    assert results["models"]["cause"] == "auth"
    assert "Unauthorized" in results["models"]["diagnosis"]
    # no request can get past a wrong key: the rest is not sent, and the cause is reported once
    assert results["reasoning"]["status"] == "skipped"  # no reasoning_parser in this profile: not a failure
    assert all(results[name]["message"].startswith("not run:") for name in SENDING[1:])
    assert [path for method, path, _auth in server.requests if method == "POST"] == []
    assert [(c["cause"], c["checks"]) for c in causes] == [("auth", SENDING)]
    assert rollback_advised(causes) is False  # the server is healthy: rolling it back would not help
    assert seconds < 2


def test_server_without_health_is_ready_by_its_models(replay):
    server = replay("no_health")
    wait = wait_ready(Client(server.base_url, timeout=5), 30, poll=0.2)
    assert wait["ready"] is True and wait["health_status"] == 404 and wait["health_endpoint"] is False
    assert wait["models_status"] == 200
    results, causes, _seconds = run(server)
    assert causes == [], results


def test_starting_server_is_not_ready_and_says_why(replay):
    server = replay("starting")
    wait = wait_ready(Client(server.base_url, timeout=5), 1, poll=0.2)
    assert wait["ready"] is False and wait["health"] == "503" and wait["models"] == "200"
    assert wait["cause"]["cause"] == "not_ready_starting"
    assert wait["cause"]["variable"] == "openai_smoke_test_ready_timeout"


def test_server_that_never_answers_is_given_up_on_within_the_wait_and_the_suite_budget(replay):
    server = replay("silent")
    started = time.monotonic()
    wait = wait_ready(Client(server.base_url, timeout=5), 2, poll=0.2, probe_timeout=1)
    assert time.monotonic() - started < 2 + 2 * 1 + 1  # the wait plus at most two probes
    assert wait["ready"] is False and wait["health"] == "timed out"
    assert wait["cause"]["cause"] == "not_ready_hung"
    results, causes, seconds = run(server, timeout=3, suite_timeout=7)
    # 2.5 s of slack for a busy machine; without the budget seven checks of 3 s would take 21 s
    assert seconds < 7 + 2.5, "the suite budget bounds a server that never answers"
    assert results["models"]["cause"] == "timeout"
    assert any(r["message"].startswith("not run: the suite budget") for r in results.values())
    assert [c["cause"] for c in causes] == ["timeout"]  # the budget was spent by the hung server: one cause


def test_500_nan_happened_names_the_fp4_backend(replay):
    server = replay("nan_500")
    results, causes, _seconds = run(server, ["chat", "tools", "concurrency"])
    chat = results["chat"]
    assert chat["cause"] == "nan" and "HTTP 500" in chat["message"]
    assert "fp4_gemm_backend: flashinfer_cudnn" in chat["diagnosis"]
    assert chat["variable"] == "llm_server_models['kimi-k2.5'].fp4_gemm_backend"
    assert [(c["cause"], c["checks"]) for c in causes] == [("nan", ["chat", "tools", "concurrency"])]


def test_503_in_one_of_n_names_the_queue(replay):
    server = replay("queue_full")
    results, causes, _seconds = run(server, ["chat", "concurrency"])
    assert results["chat"]["status"] == "passed"  # one request at a time fits the queue
    concurrency = results["concurrency"]
    assert concurrency["status"] == "failed" and concurrency["passed_requests"] == 3
    assert concurrency["message"].startswith("1 of 4 parallel requests failed")
    assert concurrency["cause"] == "overload_queue"
    assert "1 of 4 parallel requests got HTTP 503" in concurrency["diagnosis"]
    assert "The request queue is full." in concurrency["diagnosis"]
    assert concurrency["variable"] == "llm_server_models['kimi-k2.5'].extra_args"


def test_trickling_stream_ends_at_the_request_deadline(replay):
    server = replay("trickle")
    results, causes, seconds = run(server, ["stream"], timeout=3)
    stream = results["stream"]
    assert stream["cause"] == "timeout" and "still arriving" in stream["message"]
    assert stream["chunks"] >= 5  # each read was quick: only an overall deadline ends it
    assert stream["variable"] == "openai_smoke_test_request_timeout"
    assert 3.0 <= seconds < 4.5


def test_trickling_stream_ends_at_the_suite_budget(replay):
    server = replay("trickle")
    results, causes, seconds = run(server, ["stream"], timeout=30, suite_timeout=2)
    assert results["stream"]["cause"] == "timeout"
    assert results["stream"]["variable"] == "openai_smoke_test_suite_timeout"
    assert seconds < 3.5


def test_trickling_body_ends_at_the_request_deadline(replay):
    server = replay("trickle_body")
    results, causes, seconds = run(server, ["chat"], timeout=2)
    assert results["chat"]["cause"] == "timeout" and "still arriving" in results["chat"]["message"]
    assert seconds < 3.5


def test_error_event_fails_the_stream_although_done_follows(replay):
    server = replay("error_event")
    results, causes, _seconds = run(server, ["stream"])
    stream = results["stream"]
    assert stream["status"] == "failed" and stream["cause"] == "kv_cache_oom"
    assert stream["message"].startswith("error event after 2 chunks: code 500")
    assert "Out of memory" in stream["diagnosis"]
    assert stream["variable"] == "llm_server_models['kimi-k2.5'].mem_fraction_static"


def test_streamed_tool_call_split_across_chunks_is_assembled(replay):
    server = replay("healthy")
    results, causes, _seconds = run(server, ["stream_tools"], tool_call_parser="qwen3_coder")
    stream_tools = results["stream_tools"]
    assert stream_tools["status"] == "passed", stream_tools
    assert stream_tools["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert "arguments in 3 pieces" in stream_tools["message"]


def test_split_markup_in_a_streamed_tool_call_names_the_streaming_parser(replay):
    server = replay("split_markup")
    results, causes, _seconds = run(server, ["tools", "stream_tools"], tool_call_parser="qwen3_coder")
    assert results["tools"]["status"] == "passed"
    stream_tools = results["stream_tools"]
    assert stream_tools["status"] == "failed" and stream_tools["cause"] == "stream_tool_markup"
    assert "raw qwen3_coder tool-call markup in content" in stream_tools["message"]
    assert "Only the streamed tool call" in stream_tools["diagnosis"]
    assert stream_tools["variable"] == "sglang_build_ref"


def test_stream_tools_is_skipped_without_a_tool_call_parser(replay):
    server = replay("healthy")
    results, _causes, _seconds = run(server, ["stream_tools"], tool_call_parser=None)
    assert results["stream_tools"]["status"] == "skipped"


def test_empty_content_after_length_is_one_diagnosis_in_every_check(replay):
    server = replay("length_thinking")
    results, causes, _seconds = run(server, ["chat", "tools", "stream", "concurrency"])
    assert {name: r["cause"] for name, r in results.items()} == dict.fromkeys(results, "max_tokens")
    assert [(c["cause"], c["variable"], c["checks"]) for c in causes] == [
        ("max_tokens", "openai_smoke_test_max_tokens", ["chat", "tools", "stream", "concurrency"])]
    assert rollback_advised(causes) is False


def test_markup_in_reasoning_content_says_where_it_is(replay):
    server = replay("markup_in_reasoning")
    results, _causes, _seconds = run(server, ["tools"], reasoning_parser="kimi_k2")
    tools = results["tools"]
    assert tools["cause"] == "tool_markup_in_reasoning"
    assert "in reasoning_content" in tools["message"] and "in content:" not in tools["message"]
    assert tools["variable"] == "llm_server_models['kimi-k2.5'].reasoning_parser"


def test_module_reports_causes_and_rollback_advice(replay, tmp_path):
    server = replay("healthy", api_key="sk-right")
    result = run_module({"base_url": server.base_url, "api_key": "sk-wrong", "served_model_name": "kimi-k2.5",
                         "profile": "kimi-k2.5", "tool_call_parser": "kimi_k2", "wait_timeout": 1800,
                         "poll_interval": 0.5}, tmp_path)
    assert result["ready"] is True and result["wait"]["models_status"] == 401
    assert result["failed_checks"] == SENDING
    assert [c["cause"] for c in result["causes"]] == ["auth"]
    assert result["rollback_advised"] is False
    assert "sk-wrong" not in result["_stdout"] and "sk-right" not in result["_stdout"]
