"""The openai_smoke_test ROLE on localhost against the SGLang stand-in (a test double, see
tests/support/standin_sglang) as a plain process: readiness progress lines while the server "loads",
the JSON report on the controller, the summary, and a failure without rollback. Rollback and unit
watching need systemd: molecule/smoke_rollback covers them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from smoke_helpers import ROOT


def run_role(tmp_path, port, **extra):
    inventory_vars = {
        "llm_server_model": "demo",
        "llm_server_models": {"demo": {"host": "127.0.0.1", "port": port, "served_model_name": "demo",
                                       "tool_call_parser": "kimi_k2", "reasoning_parser": "kimi_k2"}},
        "openai_smoke_test_watch_unit": False,
        "openai_smoke_test_mark_known_good": False,
        "openai_smoke_test_rollback": False,
        "openai_smoke_test_progress_interval": 2,
        "openai_smoke_test_ready_timeout": 60,
        "openai_smoke_test_request_timeout": 20,
        "openai_smoke_test_results_dir": str(tmp_path / "reports"),
        "ansible_python_interpreter": sys.executable,
    }
    inventory_vars.update(extra)
    (tmp_path / "vars.json").write_text(json.dumps(inventory_vars))
    (tmp_path / "play.yml").write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "roles": [{"role": "gpufleet.llm_server.openai_smoke_test"}]}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
           "-e", "@" + str(tmp_path / "vars.json"), str(tmp_path / "play.yml")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    proc.flat = " ".join(proc.stdout.split())  # the YAML callback wraps long lines
    return proc


def test_role_waits_with_progress_then_reports(standin, tmp_path):
    server = standin("delay=12", tool_call_parser="kimi_k2", reasoning_parser="kimi_k2",
                     served_model_name="demo", wait=False)
    proc = run_role(tmp_path, server.port)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "not ready after" in proc.flat and "(/health 503" in proc.flat
    assert "Smoke test deploy of demo at http://127.0.0.1:%d: PASSED" % server.port in proc.flat
    report = json.loads((tmp_path / "reports" / "localhost-deploy.json").read_text())
    assert report["passed"] is True and report["ready"] is True
    assert report["waited_s"] > 0
    assert {name: c["status"] for name, c in report["checks"].items()} == dict.fromkeys(
        ["models", "chat", "tools", "reasoning", "stream", "concurrency"], "passed")


def test_role_fails_with_report_when_rollback_is_off(standin, tmp_path):
    server = standin("kimi_raw", tool_call_parser=None, served_model_name="demo")
    proc = run_role(tmp_path, server.port, llm_server_models={"demo": {
        "host": "127.0.0.1", "port": server.port, "served_model_name": "demo"}})
    assert proc.returncode != 0
    assert "rollback is off: openai_smoke_test_rollback=false" in proc.flat
    assert "tool_call_parser: kimi_k2 (currently unset)" in proc.flat, proc.flat[-3000:]
    report = json.loads((tmp_path / "reports" / "localhost-deploy.json").read_text())
    assert report["passed"] is False and report["failed_checks"] == ["tools"]


def test_role_refuses_unknown_profile_before_any_request(tmp_path):
    proc = run_role(tmp_path, 30299, llm_server_model="nope")
    assert proc.returncode != 0
    assert "profile 'nope'" in proc.flat and "is not in llm_server_models" in proc.flat
    assert not (tmp_path / "reports").exists()
