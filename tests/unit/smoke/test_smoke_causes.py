"""The cause classifier and the stream assembly as pure functions. The inputs are SGLang's own texts and
shapes (0.5.10.post1 source: utils/auth.py, managers/scheduler.py, managers/schedule_batch.py,
entrypoints/openai/serving_chat.py and serving_base.py); the HTTP paths run against real sockets
in tests/integration/smoke."""

from __future__ import annotations

import json
import socket

import pytest
from ansible_collections.gpufleet.llm_server.plugins.module_utils import openai_smoke as smoke
from ansible_collections.gpufleet.llm_server.plugins.module_utils import openai_smoke_causes as causes
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_http import (
    Budget,
    Deadline,
    RequestFailed,
    error_message,
)

CTX = causes.Context({"profile": "qwen", "base_url": "http://127.0.0.1:30000", "timeout": 120, "suite_timeout": 300,
                      "max_tokens": 1024, "concurrency": 4, "api_key": "sk-x", "tool_call_parser": "qwen3_coder",
                      "reasoning_parser": "qwen3"})


def err(body):
    return json.dumps({"object": "error", "message": body, "type": "BadRequest", "param": None, "code": 400})


@pytest.mark.parametrize("status, text, key, variable", [
    (401, '{"error": "Unauthorized"}', "auth", "llm_server_api_key"),
    (403, '{"error": "Forbidden"}', "auth", "llm_server_api_key"),
    (404, '{"detail": "Not Found"}', "not_found", "openai_smoke_test_base_url"),
    (400, "Requested token count exceeds the model's maximum context length of 4096 tokens.", "max_tokens_context",
     "openai_smoke_test_max_tokens"),
    (503, "The request queue is full.", "overload_queue", "llm_server_models['qwen'].extra_args"),
    (503, "Request waiting timeout reached.", "overload_timeout", "llm_server_models['qwen'].env"),
    (503, "", "unavailable", "llm_server_models['qwen'].max_running_requests"),
    (502, "Bad Gateway", "gateway", "openai_smoke_test_base_url"),
    (500, "NaN happened", "nan", "llm_server_models['qwen'].fp4_gemm_backend"),
    (500, "Detected errors during sampling! NaN in the logits.", "nan", "llm_server_models['qwen'].fp4_gemm_backend"),
    (500, "Failed to parse reasoning content", "reasoning_parser_error", "llm_server_models['qwen'].reasoning_parser"),
    (500, "Out of memory even after retracting all other requests in the decode batch. Aborting the last request.",
     "kv_cache_oom", "llm_server_models['qwen'].mem_fraction_static"),
    (500, "Internal server error: boom", "server_error", None),
])
def test_error_status_causes(status, text, key, variable):
    found = causes.from_error_status(status, text, CTX, "POST /v1/chat/completions")
    assert (found["cause"], found["variable"]) == (key, variable)
    assert "POST /v1/chat/completions" in found["diagnosis"]


def test_auth_without_a_key_says_none_was_sent():
    ctx = causes.Context({"profile": "qwen", "base_url": "http://x:1"})
    assert "none was sent" in causes.from_error_status(401, "Unauthorized", ctx, "GET /v1/models")["diagnosis"]


def test_only_test_settings_causes_skip_the_rollback():
    assert causes.from_error_status(401, "", CTX, "x")["fault"] == causes.TEST_SETTINGS
    assert causes.from_error_status(500, "NaN happened", CTX, "x")["fault"] == causes.DEPLOYMENT
    assert smoke.rollback_advised([{"fault": "test_settings"}]) is False
    assert smoke.rollback_advised([{"fault": "test_settings"}, {"fault": "deployment"}]) is True


@pytest.mark.parametrize("body, message", [
    ('{"object": "error", "message": "The request queue is full.", "type": "503", "param": null, "code": 503}',
     "The request queue is full."),
    ('{"error": "Unauthorized"}', "Unauthorized"),
    ('{"error": {"object": "error", "message": "NaN happened", "type": "INTERNAL_SERVER_ERROR", "code": 500}}',
     "NaN happened"),
    ('{"detail": "Invalid API key"}', "Invalid API key"),
    ("<html>502</html>", None),
    ("", None),
])
def test_error_message_reads_sglang_and_fastapi_shapes(body, message):
    assert error_message(body) == message


def test_refused_names_the_port_until_the_server_answered_once():
    exc = RequestFailed("refused", "connection refused", "http://127.0.0.1:30000/v1/models")
    ctx = causes.Context({"profile": "qwen", "base_url": "http://127.0.0.1:30000"})
    assert causes.from_failure(exc, ctx)["variable"] == "llm_server_models['qwen'].port"
    ctx.answered.append(("GET /v1/models", 0.01))
    went_down = causes.from_failure(exc, ctx)
    assert went_down["variable"] is None and "went down during the test" in went_down["diagnosis"]


@pytest.mark.parametrize("info, words", [
    ({"phase": "headers", "received": 0, "idle_s": 120, "limit_s": 120, "limit_by": "request"}, "no answer at all"),
    ({"phase": "body", "received": 20, "idle_s": 119.5, "limit_s": 120, "limit_by": "request"}, "stalled"),
    ({"phase": "stream", "received": 300, "idle_s": 0.2, "limit_s": 120, "limit_by": "request",
      "elapsed_s": 120}, "still trickling"),
])
def test_timeouts_say_how_the_server_failed(info, words):
    found = causes.from_failure(RequestFailed("timeout", "x", "http://h/v1/chat/completions", **info), CTX)
    assert words in found["diagnosis"]
    assert found["variable"] == "openai_smoke_test_request_timeout"
    assert "port" not in found["diagnosis"]


def test_a_suite_deadline_names_the_suite_budget():
    exc = RequestFailed("timeout", "x", "u", phase="stream", received=3, idle_s=0.1, limit_s=5, limit_by="suite")
    assert causes.from_failure(exc, CTX)["variable"] == "openai_smoke_test_suite_timeout"


def test_tls_and_dns_causes():
    verify = RequestFailed("tls", "TLS handshake failed: CERTIFICATE_VERIFY_FAILED", "u", tls_problem="verify")
    assert causes.from_failure(verify, CTX)["variable"] == "openai_smoke_test_validate_certs"
    protocol = RequestFailed("tls", "TLS handshake failed: WRONG_VERSION_NUMBER", "u", tls_problem="protocol")
    assert causes.from_failure(protocol, CTX)["variable"] == "openai_smoke_test_base_url"
    dns = RequestFailed("dns", "the host name does not resolve (%s)" % socket.gaierror(-2, "Name or service not known"),
                        "u")
    assert causes.from_failure(dns, CTX)["variable"] == "llm_server_models['qwen'].host"


def test_deadline_is_capped_by_the_suite_budget():
    now = [100.0]
    budget = Budget(10, clock=lambda: now[0])
    now[0] = 105.0
    deadline = Deadline(120, budget, clock=lambda: now[0])
    assert deadline.by == "suite" and deadline.remaining() == pytest.approx(5.0)
    assert Deadline(3, budget, clock=lambda: now[0]).by == "request"
    assert Budget(None).remaining() is None


@pytest.mark.parametrize("answer, key", [
    (causes.Answer("!!!!!!!!", "", [], "stop", "NaN happened"), "nan"),
    (causes.Answer("", "thinking " * 50, [], "length"), "max_tokens"),
    (causes.Answer("", "The capital is Paris.", [], "stop"), "answer_in_reasoning"),
    (causes.Answer("<think>hm</think>Paris", "", [], "stop"), "think_leak"),
    (causes.Answer("", "", [], "stop"), "empty"),
    (causes.Answer("London", "", [], "stop"), "wrong_answer"),
])
def test_text_judgements(answer, key):
    assert causes.judge_text(answer, CTX, "Paris")["cause"] == key


def test_empty_content_after_length_is_the_same_cause_for_chat_and_tools():
    answer = causes.Answer("", "thinking " * 50, [], "length")
    chat = causes.judge_text(answer, CTX, "Paris")
    tools, _args = causes.judge_tool(answer, CTX, "get_weather", smoke.WEATHER_TOOL["function"]["parameters"],
                                     smoke.schema_problems)
    assert chat["cause"] == tools["cause"] == "max_tokens"
    assert chat["diagnosis"] == tools["diagnosis"]


def test_think_leak_wording_depends_on_the_configured_parser():
    answer = causes.Answer("<think>x</think>Paris")
    assert "restart the service" in causes.judge_text(answer, CTX, "Paris")["diagnosis"]
    unset = causes.Context({"profile": "qwen"})
    assert "currently unset" in causes.judge_text(answer, unset, "Paris")["diagnosis"]


def test_tool_markup_in_reasoning_is_reported_there():
    markup = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{}"
    found, _args = causes.judge_tool(causes.Answer("", "Let me call it. " + markup, [], "stop"), CTX, "get_weather",
                                     {}, smoke.schema_problems)
    assert found["cause"] == "tool_markup_in_reasoning"
    assert "in reasoning_content" in found["message"]


def sse_chunk(delta, finish=None):
    return {"id": "r", "object": "chat.completion.chunk", "created": 1, "model": "m", "usage": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": None}]}


def test_stream_assembles_a_tool_call_split_across_deltas():
    """The deltas SGLang's qwen3_coder detector emits: name with "", then "{", '"city": "Paris"', "}"."""
    stream = smoke._Stream()  # pylint: disable=protected-access
    stream.add(sse_chunk({"role": "assistant", "content": ""}), 0.1)
    for i, piece in enumerate(["", "{", '"city": "Paris"', "}"]):
        stream.add(sse_chunk({"tool_calls": [{"id": "call_1" if i == 0 else None, "index": 0, "type": "function",
                                              "function": {"name": "get_weather" if i == 0 else None,
                                                           "arguments": piece}}]}), 0.2 + i)
    stream.add(sse_chunk({}, "tool_calls"), 5)
    answer = stream.answer()
    assert answer.tool_calls == [{"id": "call_1", "index": 0, "type": "function",
                                  "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    assert answer.finish_reason == "tool_calls" and stream.argument_pieces == 3
    found, args = causes.judge_tool(answer, CTX, "get_weather", smoke.WEATHER_TOOL["function"]["parameters"],
                                    smoke.schema_problems)
    assert found is None and args == {"city": "Paris"}


def test_stream_joins_markup_split_across_content_deltas():
    stream = smoke._Stream()  # pylint: disable=protected-access
    for piece in ["<|tool_calls_sec", "tion_begin|><|tool_call_begin|>functions.get_weather:0", "<|tool_call_arg",
                  'ument_begin|>{"city": "Paris"}']:
        stream.add(sse_chunk({"content": piece}), 0.1)
    assert all(causes.find_tool_markup(p) is None for p in ["<|tool_calls_sec", "<|tool_call_arg"])
    found, _args = causes.judge_tool(stream.answer(), CTX, "get_weather", {}, smoke.schema_problems)
    assert found["cause"] == "tool_markup:kimi_k2"


def test_stream_keeps_an_error_event():
    stream = smoke._Stream()  # pylint: disable=protected-access
    stream.add({"error": {"object": "error", "message": "NaN happened", "type": "INTERNAL_SERVER_ERROR",
                          "param": None, "code": 500}}, 0.1)
    assert stream.error["code"] == 500 and stream.chunks == 0
