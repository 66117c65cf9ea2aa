# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet's plan and its three outputs, on the controller (issue 35; plugins/filter/fleet_status.py).

report(hosts, batch) takes, per host in the rollout's order, host_status's result and the last smoke-test
report, and works out what `make deploy` would do there (reboot, rebuild, restart, GB to download, downtime)
in the rollout order of site.yml's rolling play. table(report) is the terminal view, textfile(host) the
Prometheus text-format file of one host. Pure functions of plain data.
"""

from __future__ import annotations

import math
import re

from ansible_collections.gpufleet.llm_server.plugins.module_utils.fleet_status import CONCERNS, rejudge_unit

ALL_CONCERNS = CONCERNS + ("smoke",)
GB = 1000 ** 3


def _smoke(report):
    if not isinstance(report, dict) or "passed" not in report:
        return {"state": "unknown", "detail": ["no smoke-test report on the controller"], "passed": None,
                "finished": None, "start_to_ready_s": None}
    state = "ok" if report.get("passed") else "drift"
    detail = [] if report.get("passed") else ["the last smoke test (%s, %s) FAILED" % (
        report.get("phase"), report.get("finished"))]
    return {"state": state, "detail": detail, "passed": bool(report.get("passed")), "finished": report.get("finished"),
            "phase": report.get("phase"), "start_to_ready_s": report.get("start_to_ready_s")}


def batches(names, batch):
    """site.yml's `serial: llm_server_rolling_batch`: a number of hosts or a percentage of the play's hosts."""
    text = str(batch if batch is not None else 1).strip()
    if text.endswith("%"):
        size = max(1, int(len(names) * int(text[:-1]) / 100))
    else:
        size = max(1, int(text))
    return [names[i:i + size] for i in range(0, len(names), size)]


def epoch(timestamp):
    """'2026-12-05T06:30:00Z' -> seconds since the epoch (None when unparsable)."""
    match = re.match(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.\d+)?Z$", str(timestamp or ""))
    if not match:
        return None
    import calendar
    return float(calendar.timegm(tuple(int(x) for x in match.groups()) + (0, 0, 0)))


def _recorded(records, name):
    figure = (records or {}).get(name) if isinstance(records, dict) else None
    seconds = figure.get("seconds") if isinstance(figure, dict) else None
    return None if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) else seconds


def host_plan(concerns, reboot_seconds=None, records=None):
    """reboot_seconds: llm_server_status_reboot_seconds (overrides the host's record); records: host_status's
    `records` (sglang_service's last start-to-ready, nvidia_driver's last reboot, measured on the host)."""
    driver, sglang, model = concerns["driver"], concerns["sglang"], concerns["model"]
    reboot = bool(driver.get("reboot_pending") or driver.get("reinstall"))
    rebuild = sglang["state"] == "drift" and bool(sglang.get("ref_commit")) and not sglang.get("ref_built")
    restart = not reboot and any(concerns[c]["state"] in ("drift", "pending")
                                 for c in ("sglang", "patch", "unit", "restart", "model"))
    bytes_missing = int(model.get("bytes_missing") or 0)
    # sglang_service's record of its last real start first, the smoke test's report as the fallback.
    start_to_ready, start_source = _recorded(records, "start_to_ready"), "sglang_service"
    if start_to_ready is None:
        start_to_ready = concerns["smoke"].get("start_to_ready_s")
        start_source = "smoke_test" if start_to_ready is not None else None
    if reboot_seconds is not None:
        reboot_source = "llm_server_status_reboot_seconds"
    else:
        reboot_seconds = _recorded(records, "reboot")
        reboot_source = "nvidia_driver" if reboot_seconds is not None else None
    if not (reboot or restart):
        downtime = 0.0
    elif start_to_ready is None or (reboot and reboot_seconds is None):
        downtime = None
    else:
        downtime = float(start_to_ready) + (float(reboot_seconds) if reboot else 0.0)
    return {"reboot": reboot, "rebuild": rebuild, "last_build_seconds": sglang.get("build_seconds"),
            "restart": restart or reboot, "last_start_to_ready_seconds": start_to_ready,
            "start_to_ready_source": start_source,
            "reboot_seconds": None if reboot_seconds is None else float(reboot_seconds), "reboot_seconds_source": reboot_source,
            "download_bytes": bytes_missing, "download_gb": round(bytes_missing / GB, 3),
            "downtime_seconds": downtime}


def report(hosts, batch=1, reboot_seconds=None, generated=None):
    """hosts: [{'host', 'result' (host_status's), 'smoke' (the last report or None), 'error' (or None),
    'rendered' (sglang_service's unit and environment file rendered from the inventory, or why not; optional)}]
    in the play's order."""
    out, names = {}, []
    for entry in hosts:
        name = entry["host"]
        names.append(name)
        result = entry.get("result") or {}
        if entry.get("error") or not isinstance(result.get("concerns"), dict):
            out[name] = {"reachable": False, "error": entry.get("error") or "no result",
                         "concerns": {c: {"state": "unknown", "detail": []} for c in ALL_CONCERNS},
                         "plan": None, "drift": [], "pending": []}
            continue
        concerns = dict(result["concerns"])
        concerns["unit"] = rejudge_unit(concerns["unit"], entry.get("rendered"))
        concerns["smoke"] = _smoke(entry.get("smoke"))
        states = {c: concerns[c]["state"] for c in ALL_CONCERNS}
        out[name] = {"reachable": True, "concerns": concerns, "deployment": result.get("deployment"),
                     "wanted": result.get("wanted"),
                     "drift": [c for c in ALL_CONCERNS if states[c] == "drift"],
                     "pending": [c for c in ALL_CONCERNS if states[c] == "pending"],
                     "records": result.get("records"),
                     "plan": host_plan(concerns, reboot_seconds, result.get("records"))}
    order = batches(names, batch)
    plans = [h["plan"] for h in out.values() if h["plan"]]
    downtimes = [p["downtime_seconds"] for p in plans]
    totals = {"hosts": len(names), "drifting": sorted(n for n, h in out.items() if h["drift"]),
              "pending": sorted(n for n, h in out.items() if h["pending"]),
              "unreachable": sorted(n for n, h in out.items() if not h["reachable"]),
              "reboots": sum(1 for p in plans if p["reboot"]), "rebuilds": sum(1 for p in plans if p["rebuild"]),
              "restarts": sum(1 for p in plans if p["restart"]),
              "download_gb": round(sum(p["download_bytes"] for p in plans) / GB, 3),
              # The rollout serves from the other batches meanwhile: the fleet's time is the sum of its batches',
              # each batch as long as its slowest host.
              "rollout_seconds": None if None in downtimes else sum(
                  max([out[n]["plan"]["downtime_seconds"] for n in b if out[n]["plan"]] or [0.0]) for b in order)}
    drift = "; ".join(["%s: %s" % (n, "+".join(out[n]["drift"])) for n in totals["drifting"]]
                      + ["%s: not read (%s)" % (n, out[n]["error"]) for n in totals["unreachable"]])
    pending = "; ".join("%s: %s" % (n, "+".join(out[n]["pending"])) for n in totals["pending"])
    parts = (["drift on " + drift] if drift else []) + (["pending on " + pending] if pending else [])
    return {"generated": generated, "hosts": out, "order": order, "totals": totals,
            "drift": bool(totals["drifting"] or totals["unreachable"]),
            "pending": bool(totals["pending"]),
            "drift_summary": ("drift on " + drift) if drift else "no drift on %d host(s)" % len(names),
            "pending_summary": ("pending on " + pending) if pending else "nothing pending on %d host(s)" % len(names),
            "summary": "; ".join(parts) if parts else "no drift and nothing pending on %d host(s)" % len(names)}


def _yes(flag):
    return "yes" if flag else "no"


def _seconds(value):
    return "unknown" if value is None else "%ds" % round(float(value))


def _source(value, source):
    return _seconds(value) + (" from %s" % source if value is not None and source else "")


def table(rep):
    """One line per host, a word per concern, then the detail and the plan below it; the totals last."""
    width = max([len(n) for n in rep["hosts"]] + [4])
    lines = ["%-*s  %s" % (width, "host", "  ".join("%-7s" % c for c in ALL_CONCERNS))]
    for name, host in rep["hosts"].items():
        lines.append("%-*s  %s" % (width, name, "  ".join("%-7s" % host["concerns"][c]["state"] for c in ALL_CONCERNS)))
    for name, host in rep["hosts"].items():
        if not host["reachable"]:
            lines.append("%s: not read: %s" % (name, host["error"]))
            continue
        for c in ALL_CONCERNS:
            for sentence in host["concerns"][c]["detail"]:
                lines.append("%s %s: %s" % (name, c, sentence))
        plan, dep = host["plan"], host.get("deployment") or {}
        lines.append("%s plan: reboot %s (last reboot %s), rebuild %s (last build %s), restart %s (last start-to-ready %s), "
                     "download %.1f GB, downtime %s" % (
                         name, _yes(plan["reboot"]), _source(plan.get("reboot_seconds"), plan.get("reboot_seconds_source")),
                         _yes(plan["rebuild"]), _seconds(plan["last_build_seconds"]), _yes(plan["restart"]),
                         _source(plan["last_start_to_ready_seconds"], plan.get("start_to_ready_source")),
                         plan["download_gb"], _seconds(plan["downtime_seconds"]) if (plan["reboot"] or plan["restart"])
                         else "none"))
        smoke = host["concerns"]["smoke"]
        lines.append("%s record: profile %s, SGLang %s (%s); last smoke test %s at %s" % (
            name, dep.get("profile"), (dep.get("sglang_commit") or "-")[:12], dep.get("generated"),
            {True: "passed", False: "FAILED", None: "none"}[smoke["passed"]], smoke["finished"]))
    t = rep["totals"]
    lines.append("fleet: %d host(s), drift on %s, pending on %s; reboots %d, rebuilds %d, restarts %d, download %.1f GB, "
                 "rollout downtime %s; order %s" % (
                     t["hosts"], ", ".join(t["drifting"]) or "none", ", ".join(t.get("pending") or []) or "none",
                     t["reboots"], t["rebuilds"], t["restarts"],
                     t["download_gb"], _seconds(t["rollout_seconds"]),
                     " -> ".join("[%s]" % ", ".join(b) for b in rep["order"])))
    return "\n".join(lines)


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value):
    if value is None:
        return "NaN"
    if isinstance(value, bool):
        return "1" if value else "0"
    value = float(value)
    if math.isnan(value):
        return "NaN"
    return repr(int(value)) if value.is_integer() else repr(value)


METRICS = (
    ("gpufleet_drift", "Concern of the host that differs from the inventory (1) or not (0)."),
    ("gpufleet_pending", "Concern of the host with a change waiting for a restart or reboot (1) or not (0)."),
    ("gpufleet_restart_pending", "A restart of the SGLang server is pending (marker or unit reload)."),
    ("gpufleet_reboot_pending", "The loaded NVIDIA kernel module is not the installed one."),
    ("gpufleet_last_smoke_success", "The last smoke test passed (1), failed (0), NaN when there is none."),
    ("gpufleet_last_smoke_timestamp_seconds", "When the last smoke test finished, NaN when there is none."),
    ("gpufleet_plan_download_bytes", "Model bytes a deploy would download."),
    ("gpufleet_plan_downtime_seconds", "Estimated downtime of a deploy, NaN when unknown."),
    ("gpufleet_status_timestamp_seconds", "When status read the host."),
)


def textfile(name, host, now):
    """The Prometheus text-format file of one host (node_exporter's textfile collector adds its own labels)."""
    values = {m: [] for m, _help in METRICS}
    concerns = host["concerns"]
    for c in ALL_CONCERNS:
        values["gpufleet_drift"].append(({"concern": c}, concerns[c]["state"] == "drift"))
        values["gpufleet_pending"].append(({"concern": c}, concerns[c]["state"] == "pending"))
    plan = host.get("plan") or {}
    smoke = concerns["smoke"]
    values["gpufleet_restart_pending"].append(({}, concerns["restart"]["state"] == "pending"))
    values["gpufleet_reboot_pending"].append(({}, bool(concerns["driver"].get("reboot_pending"))))
    values["gpufleet_last_smoke_success"].append(({}, smoke.get("passed")))
    values["gpufleet_last_smoke_timestamp_seconds"].append(({}, epoch(smoke.get("finished"))))
    values["gpufleet_plan_download_bytes"].append(({}, plan.get("download_bytes")))
    values["gpufleet_plan_downtime_seconds"].append(({}, plan.get("downtime_seconds")))
    values["gpufleet_status_timestamp_seconds"].append(({}, now))
    lines = []
    for metric, help_text in METRICS:
        lines.append("# HELP %s %s" % (metric, help_text))
        lines.append("# TYPE %s gauge" % metric)
        for labels, value in values[metric]:
            labels = dict(labels, host=name)
            lines.append("%s{%s} %s" % (metric, ",".join('%s="%s"' % (k, _label(v)) for k, v in sorted(labels.items())),
                                        _number(value)))
    return "\n".join(lines) + "\n"
