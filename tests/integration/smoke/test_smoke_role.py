"""The openai_smoke_test ROLE on localhost against the SGLang stand-in (a test double, see
tests/support/standin_sglang) as a plain process and the replay server (tests/support/sglang_replay.py,
a test double of SGLang's HTTP shapes): readiness progress lines while the server "loads", the JSON
report on the controller, the summary, and on every failure path (wrong key, hung server, a probe that
cannot run) a report and a rollback decision. The rollback itself and unit watching need systemd:
molecule/smoke_rollback covers them."""

from __future__ import annotations

import json
import time

from smoke_helpers import run_role


def test_role_waits_with_progress_then_reports(standin, tmp_path):
    # Loading for three /health probes: the role's first 2 s step (two probes) ends not ready, the next is ready,
    # however long ansible-playbook takes to send the first (a fixed delay=12 could be over before it on a busy machine).
    server = standin("loading_probes=3", tool_call_parser="kimi_k2", reasoning_parser="kimi_k2",
                     served_model_name="demo", wait=False)
    proc = run_role(tmp_path, server.port)
    assert proc.rc == 0, proc.stdout[-4000:]
    assert "not ready after" in proc.flat and "(/health 503" in proc.flat
    assert "Smoke test deploy of demo at http://127.0.0.1:%d: PASSED" % server.port in proc.flat
    report = json.loads((tmp_path / "reports" / "localhost-deploy.json").read_text())
    assert report["passed"] is True and report["ready"] is True
    assert report["waited_s"] > 0
    assert {name: c["status"] for name, c in report["checks"].items()} == dict.fromkeys(
        ["models", "chat", "tools", "reasoning", "stream", "stream_tools", "concurrency"], "passed")
    assert report["causes"] == [] and report["rollback_advised"] is False


def test_role_fails_with_report_when_rollback_is_off(standin, tmp_path):
    server = standin("kimi_raw", tool_call_parser=None, served_model_name="demo")
    proc = run_role(tmp_path, server.port, llm_server_models={"demo": {
        "host": "127.0.0.1", "port": server.port, "served_model_name": "demo"}})
    assert proc.rc != 0
    assert "rollback is off: openai_smoke_test_rollback=false" in proc.flat
    assert "tool_call_parser: kimi_k2 (currently unset)" in proc.flat, proc.flat[-3000:]
    report = json.loads((tmp_path / "reports" / "localhost-deploy.json").read_text())
    assert report["passed"] is False and report["failed_checks"] == ["tools"]


def test_role_refuses_unknown_profile_before_any_request(tmp_path):
    proc = run_role(tmp_path, 30299, llm_server_model="nope")
    assert proc.rc != 0
    assert "profile 'nope'" in proc.flat and "is not in llm_server_models" in proc.flat
    assert not (tmp_path / "reports").exists()


def report_of(tmp_path):
    return json.loads((tmp_path / "reports" / "localhost-deploy.json").read_text())


def test_role_diagnoses_a_wrong_key_in_seconds_and_does_not_roll_back(replay, tmp_path):
    """/health open, /v1/models 401: ready at once, the key named, a healthy server left running."""
    server = replay("healthy", api_key="sk-right", model="demo")
    started = time.monotonic()
    proc = run_role(tmp_path, server.port, openai_smoke_test_api_key="sk-wrong", openai_smoke_test_rollback=True,
                    openai_smoke_test_ready_timeout=1800)
    took = time.monotonic() - started
    assert proc.rc != 0
    assert took < 90, f"the wrong key took {took:.0f}s: it must not wait for the readiness timeout"
    assert "not rolled back: the cause is in the smoke test itself or its settings (llm_server_api_key)" in proc.flat
    assert "The API key was rejected" in proc.flat
    assert "sk-wrong" not in proc.stdout and "sk-right" not in proc.stdout
    report = report_of(tmp_path)
    assert report["ready"] is True and report["models"] == "401" and report["waited_s"] < 10
    assert [(c["cause"], c["variable"]) for c in report["causes"]] == [("auth", "llm_server_api_key")]
    assert report["rollback_advised"] is False


def test_role_progress_shows_health_and_models(replay, tmp_path):
    server = replay("starting", model="demo")
    proc = run_role(tmp_path, server.port, openai_smoke_test_ready_timeout=3, openai_smoke_test_progress_interval=1)
    assert proc.rc != 0
    assert "(/health 503, /v1/models 200;" in proc.flat
    report = report_of(tmp_path)
    assert report["failed_checks"] == ["ready"] and report["causes"][0]["cause"] == "not_ready_starting"
    assert report["rollback_advised"] is True


def test_role_gives_up_on_a_hung_server_within_the_suite_budget(replay, tmp_path):
    server = replay("stalled_body", model="demo")
    proc = run_role(tmp_path, server.port, openai_smoke_test_request_timeout=2, openai_smoke_test_suite_timeout=5)
    assert proc.rc != 0 and "rollback is off: openai_smoke_test_rollback=false" in proc.flat
    report = report_of(tmp_path)
    # 2 s of slack for a busy machine; without the 5 s budget the hung checks of 2 s each would take over 12 s
    assert report["elapsed_s"] <= 7, report["elapsed_s"]
    assert report["checks"]["models"]["status"] == "passed"
    assert [c["cause"] for c in report["causes"]] == ["timeout"]
    assert report["rollback_advised"] is True
    assert any(c["message"].startswith("not run: the suite budget") for c in report["checks"].values())


def test_role_reports_a_probe_that_cannot_run_and_does_not_roll_back(replay, tmp_path):
    server = replay("healthy", model="demo")
    proc = run_role(tmp_path, server.port, openai_smoke_test_probe_timeout=0, openai_smoke_test_rollback=True)
    assert proc.rc != 0
    assert "probe_timeout=0.0 must be > 0" in proc.flat
    assert "not rolled back" in proc.flat
    report = report_of(tmp_path)
    assert report["failed_checks"] == ["ready"] and report["causes"][0]["cause"] == "module_error"
    assert report["rollback_advised"] is False
