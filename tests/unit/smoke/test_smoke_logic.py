"""Pure logic of the smoke test: markup and degenerate-output detection, schema check, unit states,
option validation. Inputs are the exact strings SGLang produced (sglang-facts.md, seeds)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.llm_server.plugins.module_utils import openai_smoke as smoke
from ansible_collections.gpufleet.llm_server.plugins.module_utils import openai_smoke_wait as wait
from ansible_collections.gpufleet.llm_server.plugins.modules.openai_smoke_test import validate

KIMI_RAW = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
            '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>')
QWEN3_CODER_RAW = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
HERMES_RAW = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.mark.parametrize("text, fmt, parser", [
    (KIMI_RAW, "kimi_k2", "kimi_k2"),
    ("Sure. " + QWEN3_CODER_RAW, "qwen3_coder", "qwen3_coder"),
    (HERMES_RAW, "hermes", "qwen25 (Qwen2.5/Qwen3 models) or hermes"),
    ("[TOOL_CALLS] get_weather", "generic", None),
])
def test_tool_markup_is_recognised(text, fmt, parser):
    assert smoke.find_tool_markup(text) == (fmt, parser)


@pytest.mark.parametrize("text", ["Paris", "The weather in Paris is sunny.", "", None,
                                  "Use <b>bold</b> and a function f(x) = x"])
def test_plain_text_is_not_tool_markup(text):
    assert smoke.find_tool_markup(text) is None


def test_markup_diagnosis_when_parser_set_but_not_applied():
    diagnosis, var = smoke.tool_markup_diagnosis("kimi_k2", "kimi_k2", "kimi_k2", "kimi-k2.5")
    assert "restart the service" in diagnosis
    assert var == "llm_server_models['kimi-k2.5'].tool_call_parser"


@pytest.mark.parametrize("text", ["!!!!!!", "!!!!", "aaaaaaaaaaaaaaaa", "Paris Paris Paris Paris Paris Paris Paris Paris",
                                  "the the the the the the the the the"])
def test_degenerate_output(text):
    assert smoke.degenerate(text)


@pytest.mark.parametrize("text", ["Paris", "Paris!", "Wow!!! Paris.", "The capital of France is Paris.",
                                  "1000000", "---"])
def test_normal_output_is_not_degenerate(text):
    assert smoke.degenerate(text) is None


def test_schema_problems():
    schema = smoke.WEATHER_TOOL["function"]["parameters"]
    assert smoke.schema_problems({"city": "Paris"}, schema) == []
    assert smoke.schema_problems({}, schema) == ["missing required 'city'"]
    assert smoke.schema_problems({"city": 3}, schema) == ["'city' is int, schema says string"]
    assert smoke.schema_problems({"city": " "}, schema) == ["'city' is empty"]
    assert smoke.schema_problems(["Paris"], schema) == ["arguments are list, not an object"]


def test_unit_state_parses_systemctl_show():
    out = ("LoadState=loaded\nActiveState=activating\nSubState=auto-restart\nNRestarts=2\n"
           "InvocationID=0123456789abcdef\nMainPID=0\nResult=exit-code\n")
    state = wait.unit_state(lambda cmd: (0, out, ""), "sglang-x.service")
    assert state["n_restarts"] == 2 and state["sub_state"] == "auto-restart"
    assert "auto-restart" in wait.unit_problem(state, dict(state))


@pytest.mark.parametrize("state, expected", [
    ({"load_state": "not-found", "active_state": "inactive"}, "does not exist"),
    ({"load_state": "loaded", "active_state": "failed", "sub_state": "failed"}, "failed"),
    ({"load_state": "loaded", "active_state": "inactive", "sub_state": "dead"}, "inactive"),
    ({"load_state": "loaded", "active_state": "active", "sub_state": "running", "n_restarts": 0,
      "invocation_id": "new"}, "new invocation"),
])
def test_unit_problems(state, expected):
    baseline = {"load_state": "loaded", "active_state": "active", "sub_state": "running", "n_restarts": 0,
                "invocation_id": "old"}
    assert expected in wait.unit_problem(state, baseline)


def test_healthy_unit_has_no_problem():
    state = {"load_state": "loaded", "active_state": "active", "sub_state": "running", "n_restarts": 0,
             "invocation_id": "same"}
    assert wait.unit_problem(state, dict(state)) is None


def _params(**over):
    params = {"base_url": "http://127.0.0.1:30000", "served_model_name": "kimi-k2.5", "timeout": 120,
              "concurrency": 4, "max_tokens": 1024, "wait_timeout": 0, "journal_lines": 30, "poll_interval": 2.0}
    params.update(over)
    return params


def test_validate_accepts_defaults():
    assert validate(_params()) == []


def test_validate_checks_the_time_limits():
    errors = validate(_params(suite_timeout=0, probe_timeout=0.0, poll_interval=-1.0))
    assert "suite_timeout=0 must be >= 1" in errors
    assert "probe_timeout=0.0 must be > 0" in errors and "poll_interval=-1.0 must be > 0" in errors


def test_validate_names_option_value_and_fix():
    errors = validate(_params(base_url="localhost:30000", served_model_name=" ", concurrency=0))
    assert any("base_url='localhost:30000' must start with http://" in e for e in errors)
    assert any("served_model_name is empty" in e for e in errors)
    assert any("concurrency=0 must be >= 1" in e for e in errors)


def test_summarize_reports_each_cause_once_with_the_checks_it_explains():
    ok = dict(smoke.new_result("models"), status="passed", message="fine", latency_s=0.01)
    bad = dict(smoke.new_result("tools"), message="raw markup", cause="tool_markup:kimi_k2",
               diagnosis="Set tool_call_parser: kimi_k2", variable="llm_server_models['k'].tool_call_parser")
    same = dict(bad, name="stream_tools", message="streamed: raw markup", diagnosis="another wording")
    results = {"models": ok, "tools": bad, "stream_tools": same}
    causes = smoke.consolidate(results)
    lines = smoke.summarize(results, causes)
    assert lines[0].startswith("models") and "PASSED" in lines[0] and "->" not in lines[0]
    assert "FAILED" in lines[1] and "->" not in lines[1]
    assert [line for line in lines if line.startswith("cause")] == [
        "cause        tools, stream_tools -> Set tool_call_parser: kimi_k2 "
        "[variable: llm_server_models['k'].tool_call_parser]"]
    # one cause, one text: the second check carries the first one's diagnosis, not its own
    assert results["stream_tools"]["diagnosis"] == "Set tool_call_parser: kimi_k2"
    assert causes == [{"cause": "tool_markup:kimi_k2", "diagnosis": "Set tool_call_parser: kimi_k2",
                       "variable": "llm_server_models['k'].tool_call_parser", "fault": "deployment",
                       "checks": ["tools", "stream_tools"]}]
