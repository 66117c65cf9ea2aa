"""The plan and the outputs on the controller (plugins/module_utils/fleet_plan.py, plugins/filter/fleet_status.py):
host results made by host_status's own judges, the rollout order against site.yml's serial, the table, and the
Prometheus textfile read back by prometheus_client's own text-format parser."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.gpufleet.llm_server.plugins.filter.fleet_status import FilterModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils import fleet_plan as fp
from ansible_collections.gpufleet.llm_server.plugins.module_utils import fleet_status as fs

SMOKE = {"phase": "deploy", "passed": True, "finished": "2026-12-05T06:00:00Z", "start_to_ready_s": 600.0}


def ok_result():
    concerns = {name: fs.concern("ok") for name in fs.CONCERNS}
    concerns["driver"].update(reboot_pending=False, reinstall=False)
    concerns["sglang"].update(ref_commit="a" * 40, ref_built=True, build_seconds=1800.0)
    concerns["model"].update(bytes_missing=0)
    return {"concerns": concerns, "deployment": {"present": True, "profile": "kimi-k2.5", "sglang_commit": "a" * 40,
                                                 "generated": "2026-12-05T05:00:00Z"}}


def entry(host, result=None, smoke="passed", error=None):
    return {"host": host, "result": result if result is not None else ok_result(),
            "smoke": dict(SMOKE) if smoke == "passed" else smoke, "error": error}


def test_converged_fleet_plans_nothing():
    rep = fp.report([entry("a"), entry("b")], 1)
    assert not rep["drift"] and not rep["pending"] and rep["summary"] == "no drift and nothing pending on 2 host(s)"
    assert rep["hosts"]["a"]["plan"] == {"reboot": False, "rebuild": False, "last_build_seconds": 1800.0, "restart": False,
                                         "last_start_to_ready_seconds": 600.0, "start_to_ready_source": "smoke_test",
                                         "reboot_seconds": None, "reboot_seconds_source": None,
                                         "download_bytes": 0, "download_gb": 0.0, "downtime_seconds": 0.0}
    assert rep["totals"]["rollout_seconds"] == 0.0


def test_plan_costs_per_concern():
    drifted = ok_result()
    drifted["concerns"]["model"] = fs.concern("drift", ["x"], bytes_missing=223 * 10 ** 9)
    drifted["concerns"]["restart"] = fs.concern("pending", ["marker"])
    rebuild = ok_result()
    rebuild["concerns"]["sglang"] = fs.concern("drift", ["ref moved"], ref_commit="b" * 40, ref_built=False,
                                               build_seconds=1800.0)
    reboot = ok_result()
    reboot["concerns"]["driver"] = fs.concern("pending", ["loaded 580"], reboot_pending=True, reinstall=False)
    rep = fp.report([entry("a", drifted), entry("b", rebuild), entry("c", reboot)], 2, reboot_seconds=240)
    a, b, c = (rep["hosts"][n]["plan"] for n in "abc")
    assert (a["restart"], a["reboot"], a["rebuild"], a["download_gb"], a["downtime_seconds"]) == (True, False, False, 223.0, 600.0)
    assert (b["rebuild"], b["restart"], b["last_build_seconds"], b["downtime_seconds"]) == (True, True, 1800.0, 600.0)
    assert (c["reboot"], c["restart"], c["downtime_seconds"]) == (True, True, 840.0)
    assert rep["order"] == [["a", "b"], ["c"]]
    # each batch as long as its slowest host
    assert rep["totals"]["rollout_seconds"] == 600.0 + 840.0
    assert rep["totals"]["drifting"] == ["a", "b"] and rep["drift"]
    assert rep["summary"] == "drift on a: model; b: sglang; pending on a: restart; c: driver"
    assert rep["hosts"]["c"]["pending"] == ["driver"] and rep["totals"]["pending"] == ["a", "c"] and rep["pending"]


def test_unknown_figures_make_the_downtime_unknown():
    drifted = ok_result()
    drifted["concerns"]["unit"] = fs.concern("drift", ["edited"])
    rep = fp.report([entry("a", drifted, smoke=None)], 1)
    plan = rep["hosts"]["a"]["plan"]
    assert plan["restart"] and plan["downtime_seconds"] is None and rep["totals"]["rollout_seconds"] is None
    assert rep["hosts"]["a"]["concerns"]["smoke"]["state"] == "unknown"
    assert "downtime unknown" in fp.table(rep)


def test_failed_smoke_is_drift_and_unreadable_host_fails():
    rep = fp.report([entry("a", smoke=dict(SMOKE, passed=False)), entry("b", result={}, error="unreachable: ssh")], 1)
    assert rep["hosts"]["a"]["drift"] == ["smoke"]
    assert rep["totals"]["unreachable"] == ["b"] and rep["drift"]
    assert "b: not read (unreachable: ssh)" in rep["summary"]


@pytest.mark.parametrize("batch, names, want", [
    (1, "abc", [["a"], ["b"], ["c"]]),
    ("2", "abcde", [["a", "b"], ["c", "d"], ["e"]]),
    ("50%", "abcd", [["a", "b"], ["c", "d"]]),
    ("25%", "abc", [["a"], ["b"], ["c"]]),
    ("100%", "abc", [["a", "b", "c"]]),
])
def test_rollout_batches_like_serial(batch, names, want):
    assert fp.batches(list(names), batch) == want


def test_table_one_line_per_host_then_detail():
    drifted = ok_result()
    drifted["concerns"]["unit"] = fs.concern("drift", ["sglang-x.service differs"])
    lines = fp.table(fp.report([entry("gpu-01", drifted), entry("gpu-02")], 1)).splitlines()
    assert lines[0].split() == ["host"] + list(fp.ALL_CONCERNS)
    assert lines[1].split() == ["gpu-01", "ok", "ok", "ok", "ok", "drift", "ok", "ok", "ok"]
    assert lines[2].split() == ["gpu-02"] + ["ok"] * 8
    assert "gpu-01 unit: sglang-x.service differs" in lines
    assert lines[-1].startswith("fleet: 2 host(s), drift on gpu-01, pending on none; reboots 0, rebuilds 0, restarts 1")
    assert lines[-1].endswith("order [gpu-01] -> [gpu-02]")


def test_textfile_parses_with_prometheus_client():
    drifted = ok_result()
    drifted["concerns"]["model"] = fs.concern("drift", ["x"], bytes_missing=1234)
    drifted["concerns"]["restart"] = fs.concern("pending", ["marker"])
    rep = FilterModule().filters()["fleet_status_report"]([entry('gpu "01"', drifted, smoke=None)])
    text = FilterModule().filters()["fleet_status_textfile"](rep, 'gpu "01"', 1764914400.5)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(families) == {m for m, _h in fp.METRICS}
    assert all(f.type == "gauge" for f in families.values())
    drift = {s.labels["concern"]: s.value for s in families["gpufleet_drift"].samples}
    assert drift == {c: (1.0 if c == "model" else 0.0) for c in fp.ALL_CONCERNS}
    assert {s.labels["host"] for s in families["gpufleet_drift"].samples} == {'gpu "01"'}
    assert families["gpufleet_restart_pending"].samples[0].value == 1.0
    assert families["gpufleet_plan_download_bytes"].samples[0].value == 1234.0
    assert math.isnan(families["gpufleet_last_smoke_success"].samples[0].value)
    assert math.isnan(families["gpufleet_plan_downtime_seconds"].samples[0].value)
    assert families["gpufleet_status_timestamp_seconds"].samples[0].value == 1764914400.5


def test_textfile_smoke_time_from_the_report():
    rep = fp.report([entry("a")], 1)
    families = {f.name: f for f in text_string_to_metric_families(fp.textfile("a", rep["hosts"]["a"], 0))}
    assert families["gpufleet_last_smoke_success"].samples[0].value == 1.0
    assert families["gpufleet_last_smoke_timestamp_seconds"].samples[0].value == 1796450400.0


def records(start=None, reboot=None):
    return {"start_to_ready": {"path": "/var/lib/gpufleet/sglang/start-to-ready.json", "seconds": start,
                               "recorded": None, "error": None},
            "reboot": {"path": "/var/lib/gpufleet/nvidia-driver/reboot.json", "seconds": reboot, "recorded": None,
                       "error": None}}


def restarting(start=None, reboot=None, reboot_pending=False):
    result = ok_result()
    result["concerns"]["restart"] = fs.concern("pending", ["marker"])
    if reboot_pending:
        result["concerns"]["driver"] = fs.concern("pending", ["loaded 580"], reboot_pending=True, reinstall=False)
    result["records"] = records(start, reboot)
    return result


def test_start_to_ready_recorded_by_sglang_service_comes_first():
    plan = fp.report([entry("a", restarting(start=412.3))], 1)["hosts"]["a"]["plan"]
    assert (plan["last_start_to_ready_seconds"], plan["start_to_ready_source"], plan["downtime_seconds"]) == (
        412.3, "sglang_service", 412.3)
    # no record on the host: the smoke test's report (600 s)
    plan = fp.report([entry("a", restarting())], 1)["hosts"]["a"]["plan"]
    assert (plan["last_start_to_ready_seconds"], plan["start_to_ready_source"], plan["downtime_seconds"]) == (
        600.0, "smoke_test", 600.0)
    plan = fp.report([entry("a", restarting(), smoke=None)], 1)["hosts"]["a"]["plan"]
    assert plan["start_to_ready_source"] is None and plan["downtime_seconds"] is None


def test_reboot_seconds_recorded_by_nvidia_driver_unless_the_variable_says():
    rep = fp.report([entry("a", restarting(start=400.0, reboot=95.5, reboot_pending=True))], 1)
    plan = rep["hosts"]["a"]["plan"]
    assert (plan["reboot"], plan["reboot_seconds"], plan["reboot_seconds_source"], plan["downtime_seconds"]) == (
        True, 95.5, "nvidia_driver", 495.5)
    assert "reboot yes (last reboot 96s from nvidia_driver)" in fp.table(rep)
    plan = fp.report([entry("a", restarting(start=400.0, reboot=95.5, reboot_pending=True))], 1,
                     reboot_seconds=240)["hosts"]["a"]["plan"]
    assert (plan["reboot_seconds"], plan["reboot_seconds_source"], plan["downtime_seconds"]) == (
        240.0, "llm_server_status_reboot_seconds", 640.0)
    plan = fp.report([entry("a", restarting(start=400.0, reboot_pending=True))], 1)["hosts"]["a"]["plan"]
    assert plan["reboot_seconds"] is None and plan["downtime_seconds"] is None
    # a record of a reboot is no reason to plan one
    plan = fp.report([entry("a", dict(ok_result(), records=records(400.0, 95.5)))], 1)["hosts"]["a"]["plan"]
    assert not plan["reboot"] and plan["downtime_seconds"] == 0.0


def test_only_pending_is_reported_apart_from_drift():
    rep = fp.report([entry("a", restarting(start=400.0)), entry("b")], 1)
    assert not rep["drift"] and rep["pending"]
    assert rep["pending_summary"] == "pending on a: restart" and rep["drift_summary"] == "no drift on 2 host(s)"
    assert rep["summary"] == "pending on a: restart"


def test_report_compares_the_unit_with_the_rendering(tmp_path):
    """The unit concern of a real judge_unit read, judged again in the report against the rendered unit."""
    unit_file = tmp_path / "sglang-tiny.service"
    unit_file.write_text("[Service]\nExecStart=/bin/python -m sglang.launch_server -- --mem-fraction-static 0.88\n")
    show = {"ActiveState": "active", "SubState": "running", "NeedDaemonReload": "no"}
    result = ok_result()
    result["concerns"]["unit"] = fs.judge_unit(str(unit_file), None, None, show)
    rendered = {"unit": unit_file.read_text().replace("0.88", "0.9"), "env": None}
    rep = fp.report([entry("a", result) | {"rendered": rendered}], 1)
    host = rep["hosts"]["a"]
    assert host["drift"] == ["unit"] and host["plan"]["restart"]
    assert "(line 2: " in host["concerns"]["unit"]["detail"][0] and "0.9'" in host["concerns"]["unit"]["detail"][0]
    assert "installed_text" not in host["concerns"]["unit"]
    same = fp.report([entry("a", result) | {"rendered": {"unit": unit_file.read_text(), "env": None}}], 1)
    assert same["hosts"]["a"]["drift"] == [] and not same["drift"]
