"""SGLang-shaped failures that no CPU engine produces, diagnosed by the smoke test.

The server here is the SGLang stand-in (tests/support/standin_sglang, a TEST DOUBLE: the real
SGLang needs GPUs), started as a plain process on a free loopback port with the real SGLang
command line; its GPUFLEET_STANDIN_MODE replays responses real SGLang servers gave (NaN happened,
raw kimi_k2 / qwen3_coder markup in content, <think> leakage, a crash during start-up).
The HTTP client, the checks and the diagnoses are the real module code.
"""

from __future__ import annotations

import time

from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke import SmokeTest
from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_wait import wait_ready

from smoke_helpers import free_port, run_module

KIMI = {"served_model_name": "kimi-k2.5", "profile": "kimi-k2.5", "tool_call_parser": "kimi_k2",
        "reasoning_parser": "kimi_k2"}
QWEN = {"served_model_name": "qwen3.5-397b", "profile": "qwen3.5-397b-nvfp4", "tool_call_parser": "qwen3_coder",
        "reasoning_parser": "qwen3"}


def smoke(server, checks, **params):
    merged = dict(KIMI, base_url=server.base_url, timeout=20, concurrency=4, max_tokens=256)
    merged.update(params)
    return SmokeTest(merged).run(checks)


def test_healthy_standin_passes_every_check(standin):
    server = standin("ok", tool_call_parser="kimi_k2", reasoning_parser="kimi_k2")
    results = smoke(server, ["models", "chat", "tools", "reasoning", "stream", "concurrency"])
    assert {name: r["status"] for name, r in results.items()} == dict.fromkeys(results, "passed"), results
    assert results["tools"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert results["concurrency"]["passed_requests"] == 4
    assert results["stream"]["chunks"] >= 2


def test_nan_happened_names_the_fp4_backend(standin):
    server = standin("nan", tool_call_parser="kimi_k2")
    results = smoke(server, ["chat", "tools", "stream", "concurrency"])
    chat = results["chat"]
    assert chat["status"] == "failed"
    assert chat["matched_stop"] == "NaN happened"
    assert "fp4_gemm_backend" in chat["diagnosis"] and "flashinfer_cudnn" in chat["diagnosis"]
    assert chat["variable"] == "llm_server_models['kimi-k2.5'].fp4_gemm_backend"
    assert results["tools"]["status"] == "failed" and "fp4_gemm_backend" in results["tools"]["diagnosis"]
    assert results["stream"]["status"] == "failed" and "NaN" in results["stream"]["message"]
    assert results["concurrency"]["status"] == "failed"
    # one root cause, one diagnosis, reported once with every check it explains
    assert {results[name]["diagnosis"] for name in results} == {chat["diagnosis"]}
    smoke_test = SmokeTest(dict(KIMI, base_url=server.base_url, timeout=20, max_tokens=256))
    smoke_test.run(["chat", "tools", "stream", "concurrency"])
    assert [(c["cause"], c["checks"]) for c in smoke_test.causes] == [
        ("nan", ["chat", "tools", "stream", "concurrency"])]


def test_raw_kimi_markup_names_kimi_k2(standin):
    server = standin("kimi_raw", tool_call_parser=None)
    results = smoke(server, ["tools"], tool_call_parser=None)
    tools = results["tools"]
    assert tools["status"] == "failed"
    assert "raw kimi_k2 tool-call markup" in tools["message"]
    assert "tool_call_parser: kimi_k2" in tools["diagnosis"] and "currently unset" in tools["diagnosis"]
    assert tools["variable"] == "llm_server_models['kimi-k2.5'].tool_call_parser"


def test_raw_qwen3_coder_markup_names_qwen3_coder(standin):
    server = standin("qwen3_coder_raw", served_model_name="qwen3.5-397b", tool_call_parser="qwen3")
    results = smoke(server, ["tools"], **{**QWEN, "tool_call_parser": "qwen3"})
    tools = results["tools"]
    assert tools["status"] == "failed"
    assert "qwen3_coder" in tools["message"]
    assert "tool_call_parser: qwen3_coder (currently qwen3)" in tools["diagnosis"]
    assert tools["variable"] == "llm_server_models['qwen3.5-397b-nvfp4'].tool_call_parser"


def test_think_leak_names_reasoning_parser(standin):
    server = standin("think_leak", served_model_name="qwen3.5-397b", tool_call_parser="qwen3_coder")
    results = smoke(server, ["chat"], **{**QWEN, "reasoning_parser": None})
    chat = results["chat"]
    assert chat["status"] == "failed"
    assert "<think>" in chat["message"]
    assert "reasoning_parser" in chat["diagnosis"] and "currently unset" in chat["diagnosis"]
    # with a reasoning parser in the profile the reasoning check names the mismatch
    results = smoke(server, ["reasoning"], **QWEN)
    assert results["reasoning"]["status"] == "failed"
    assert "restart the service" in results["reasoning"]["diagnosis"]


def test_model_under_its_path_names_served_model_name(standin):
    server = standin("ok", served_model_name=None, tool_call_parser="kimi_k2")
    results = smoke(server, ["models"])
    models = results["models"]
    assert models["status"] == "failed"
    assert models["models"] == ["/shared/kimi-k2.5-int4"]
    # the profile already sets the name: the running server did not get it (never "set X" when X is set)
    assert "file path" in models["diagnosis"] and "served_model_name is 'kimi-k2.5'" in models["diagnosis"]
    assert "Restart the service" in models["diagnosis"]
    assert models["variable"] == "llm_server_models['kimi-k2.5'].served_model_name"


def test_wrong_api_key_names_llm_server_api_key(standin):
    server = standin("ok", api_key="sk-right", tool_call_parser="kimi_k2")
    bad = smoke(server, ["models"], api_key="sk-wrong")["models"]
    assert bad["status"] == "failed" and bad["variable"] == "llm_server_api_key"
    good = smoke(server, ["models", "chat"], api_key="sk-right")
    assert good["models"]["status"] == "passed" and good["chat"]["status"] == "passed"


def test_nothing_listening_names_the_port():
    port = free_port()
    results = SmokeTest(dict(KIMI, base_url=f"http://127.0.0.1:{port}", timeout=5)).run(["models"])
    assert results["models"]["status"] == "failed"
    assert results["models"]["cause"] == "refused"
    assert "Nothing listens" in results["models"]["diagnosis"]
    assert results["models"]["variable"] == "llm_server_models['kimi-k2.5'].port"


def test_wait_reports_loading_then_ready(standin):
    server = standin("delay=3", tool_call_parser="kimi_k2", wait=False)
    time.sleep(0.5)  # let it bind: health answers 503 while "loading"
    early = wait_ready(SmokeTest(dict(KIMI, base_url=server.base_url)).client, 0.5, poll=0.2)
    assert early["ready"] is False and early["health_status"] in (503, None)
    later = wait_ready(SmokeTest(dict(KIMI, base_url=server.base_url)).client, 30, poll=0.2)
    assert later["ready"] is True and later["models_status"] == 200


class ProcessUnit:
    """TEST DOUBLE for `systemctl show` / `journalctl` of one plain process (this VM has no systemd as
    PID 1; the Molecule scenario smoke_rollback covers the real systemd unit). It reports the
    process's liveness as ActiveState and its log file as the journal."""

    def __init__(self, server):
        self.server = server

    def __call__(self, cmd):
        if cmd[0] == "systemctl":
            alive = self.server.proc.poll() is None
            state = "active\nSubState=running\nResult=success" if alive else "failed\nSubState=failed\nResult=exit-code"
            return 0, f"LoadState=loaded\nActiveState={state}\nNRestarts=0\nInvocationID=abc\nMainPID=1\n", ""
        if cmd[0] == "journalctl":
            lines = int(cmd[cmd.index("--lines") + 1])
            return 0, "\n".join(self.server.log().splitlines()[-lines:]), ""
        raise AssertionError(cmd)


def test_crash_during_startup_stops_the_wait_with_the_journal(standin):
    server = standin("crash_on_start=1", tool_call_parser="kimi_k2", wait=False)
    client = SmokeTest(dict(KIMI, base_url=server.base_url)).client
    started = time.monotonic()
    info = wait_ready(client, 120, unit="sglang-kimi-k2.5.service", run=ProcessUnit(server), poll=0.2)
    assert time.monotonic() - started < 30, "the wait must stop at the crash, not at the timeout"
    assert info["ready"] is False
    assert "failed" in info["problem"]
    assert any("KeyError: 12" in line for line in info["journal"])


def test_restart_loop_is_seen_as_a_restart():
    """unit_problem() against two real-looking `systemctl show` states (a restart between polls)."""
    from ansible_collections.gpufleet.llm_server.plugins.module_utils.openai_smoke_wait import unit_problem
    before = {"load_state": "loaded", "active_state": "active", "sub_state": "running", "n_restarts": 0,
              "invocation_id": "aaa"}
    after = dict(before, n_restarts=1, invocation_id="bbb")
    assert "restarted" in unit_problem(after, before)


def test_module_through_ansible_reports_and_fails_with_diagnosis(standin, tmp_path):
    """The real module (AnsiballZ, argument spec, no_log) via ansible-playbook, in check mode."""
    server = standin("kimi_raw", api_key="sk-secret-value")
    result = run_module({"base_url": server.base_url, "api_key": "sk-secret-value", "served_model_name": "kimi-k2.5",
                         "profile": "kimi-k2.5", "checks": ["models", "chat", "tools"], "timeout": 20}, tmp_path,
                        check=True)
    assert result["passed"] is False  # the task itself only fails when checks could not run (failed_when)
    assert result["failed_checks"] == ["tools"]
    assert "tool_call_parser: kimi_k2" in result["msg"]
    assert result["changed"] is False
    assert "sk-secret-value" not in result["_stdout"]
    assert any(line.startswith("tools") and "FAILED" in line for line in result["summary"])


def test_wait_step_runs_the_checks_once_ready_and_only_then(standin, tmp_path):
    """not_ready_fails=false (the role's wait loop): a step that times out is a progress step (no failure,
    no check sent); the step in which the server is ready runs the checks in the same call."""
    port = free_port()
    step = {"served_model_name": "kimi-k2.5", "profile": "kimi-k2.5", "checks": ["models", "chat"], "timeout": 20,
            "wait_timeout": 1, "poll_interval": 0.2, "not_ready_fails": False}
    waiting = run_module(dict(step, base_url=f"http://127.0.0.1:{port}"), tmp_path)
    assert waiting["ready"] is False and waiting["passed"] is False
    assert "checks" not in waiting and waiting["failed_checks"] == []
    assert waiting["summary"][0].startswith("ready        WAITING not ready after")
    server = standin("ok", tool_call_parser="kimi_k2")
    ready = run_module(dict(step, base_url=server.base_url, wait_timeout=30), tmp_path)
    assert ready["ready"] is True and ready["wait"]["ready"] is True
    assert ready["passed"] is True and sorted(ready["checks"]) == ["chat", "models"]
    # the default still fails a server that is not ready in time (a call that must run its checks)
    failing = run_module(dict(step, base_url=f"http://127.0.0.1:{port}", not_ready_fails=True), tmp_path)
    assert failing["ready"] is False and failing["failed_checks"] == ["ready"]
    assert failing["summary"][0].startswith("ready        FAILED  not ready after")


def test_module_rejects_bad_options_before_any_request(tmp_path):
    out = run_module({"base_url": "127.0.0.1:30200", "served_model_name": "kimi-k2.5", "concurrency": 0},
                     tmp_path, expect_error=True)
    assert "base_url='127.0.0.1:30200' must start with http:// or https://" in out
    assert "concurrency=0 must be >= 1" in out


def test_hung_generation_is_given_up_within_the_suite_budget(standin):
    """The stand-in's stall_chat mode (used by molecule/smoke_rollback): health and models answer, chat hangs."""
    server = standin("stall_chat", tool_call_parser="kimi_k2")
    started = time.monotonic()
    smoke_test = SmokeTest(dict(KIMI, base_url=server.base_url, timeout=2, suite_timeout=5))
    results = smoke_test.run(["models", "chat", "tools", "stream", "concurrency"])
    # 2 s over the budget for a busy machine; without the budget the four hung checks alone take 8 s
    assert time.monotonic() - started < 7
    assert results["models"]["status"] == "passed"
    assert results["chat"]["cause"] == "timeout" and results["chat"]["variable"] == "openai_smoke_test_request_timeout"
    assert [c["cause"] for c in smoke_test.causes] == ["timeout"]
