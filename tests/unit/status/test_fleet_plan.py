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
    assert not rep["drift"] and rep["summary"] == "no drift on 2 host(s)"
    assert rep["hosts"]["a"]["plan"] == {"reboot": False, "rebuild": False, "last_build_seconds": 1800.0, "restart": False,
                                         "last_start_to_ready_seconds": 600.0, "download_bytes": 0, "download_gb": 0.0,
                                         "downtime_seconds": 0.0}
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
    assert rep["summary"] == "drift on a: model; b: sglang"
    assert rep["hosts"]["c"]["pending"] == ["driver"]


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
    assert lines[-1].startswith("fleet: 2 host(s), drift on gpu-01; reboots 0, rebuilds 0, restarts 1")
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
