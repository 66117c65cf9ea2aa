# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readiness of an SGLang server: `/health` and `/v1/models`, while watching its systemd unit.

A cold start of a 400B model takes 10+ minutes, and a crash during start-up must not be mistaken
for "still loading": while waiting, the unit's ActiveState, NRestarts and InvocationID are read
with `systemctl show`; a unit that is failed/inactive or has restarted since the baseline ends the
wait at once with the journal tail. Used by the `openai_smoke_test` module (option `wait_timeout`).
"""

from __future__ import annotations

import time

UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "NRestarts", "InvocationID", "MainPID", "Result")


def unit_state(run, unit):
    """`systemctl show` of UNIT as a dict; RUN(cmd_list) -> (rc, stdout, stderr)."""
    rc, out, err = run(["systemctl", "show", "--property=" + ",".join(UNIT_PROPERTIES), unit])
    if rc != 0:
        return {"error": (err or out).strip() or "systemctl show exited %s" % rc}
    props = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    try:
        restarts = int(props.get("NRestarts") or 0)
    except ValueError:
        restarts = 0
    return {
        "load_state": props.get("LoadState", ""),
        "active_state": props.get("ActiveState", ""),
        "sub_state": props.get("SubState", ""),
        "result": props.get("Result", ""),
        "n_restarts": restarts,
        "invocation_id": props.get("InvocationID", ""),
        "main_pid": props.get("MainPID", ""),
    }


def journal_tail(run, unit, lines=30):
    rc, out, err = run(["journalctl", "--unit", unit, "--lines", str(lines), "--no-pager", "--output", "cat"])
    if rc != 0:
        return ["(journalctl failed: %s)" % (err or out).strip()]
    return [line for line in out.splitlines() if line.strip()]


def unit_problem(state, baseline):
    """Why waiting for this unit is pointless now, or None."""
    if not state or state.get("error"):
        return None
    if state.get("load_state") == "not-found":
        return "the unit does not exist (LoadState=not-found)"
    active = state.get("active_state")
    if active in ("failed", "inactive", "deactivating"):
        return "the unit is %s/%s (result %s)" % (active, state.get("sub_state"), state.get("result") or "?")
    if baseline and not baseline.get("error"):
        if baseline.get("invocation_id") and state.get("invocation_id") and \
                state["invocation_id"] != baseline["invocation_id"]:
            return "the unit restarted while waiting (new invocation %s, NRestarts %s)" % (
                state["invocation_id"][:12], state.get("n_restarts"))
        if state.get("n_restarts", 0) > baseline.get("n_restarts", 0):
            return "the unit restarted while waiting (NRestarts %s -> %s)" % (
                baseline.get("n_restarts"), state.get("n_restarts"))
    if state.get("sub_state") == "auto-restart":
        return "the unit is waiting to be restarted after a crash (SubState=auto-restart)"
    return None


def _shown(status, error):
    """How a probe result reads in progress lines: '503', 'refused', 'timed out', ..."""
    if status is not None:
        return str(status)
    if error is None:
        return "none"
    return {"refused": "refused", "timeout": "timed out", "connect_timeout": "connect timed out",
            "reset": "closed the connection", "cut": "cut off", "dns": "unresolvable", "tls": "TLS failed"}.get(
        error.kind, error.kind)


def _endpoint_answers(status):
    """/health that is up (200), absent (404/405: llama.cpp's server has none) or behind the key."""
    return status in (200, 401, 403, 404, 405)


def not_ready_cause(info, base_url, profile=None):
    """Why the server is not ready in the state INFO was last seen in (a Cause dict)."""
    port_var = "llm_server_models['%s'].port" % profile if profile else "the profile's port"
    health, models = info.get("health_status"), info.get("models_status")
    kinds = {info.get("health_error_kind"), info.get("models_error_kind")}
    unit = info.get("unit") or {}
    active = unit.get("active_state") == "active"
    if health is None and models is None and "refused" in kinds:
        text = ("Nothing listens at %s yet (connection refused)%s: SGLang opens its port only after loading the "
                "weights and capturing CUDA graphs (10+ minutes for a large model), so it is still loading; raise "
                "openai_smoke_test_ready_timeout if a cold start takes longer, or check that it listens on %s "
                "(the unit's last log line says where it is)." % (
                    base_url, " while the unit is active" if active else "", port_var))
        return {"cause": "not_ready_refused", "diagnosis": text, "variable": "openai_smoke_test_ready_timeout",
                "fault": "deployment"}
    if "timeout" in kinds or "connect_timeout" in kinds:
        return {"cause": "not_ready_hung", "diagnosis": (
            "%s accepts connections but answers no HTTP request within openai_smoke_test_probe_timeout: the server "
            "is hung (read the unit's journal) or something else holds the port." % base_url),
            "variable": "openai_smoke_test_probe_timeout", "fault": "deployment"}
    shown = (_shown(health, None), _shown(models, None))
    if health == 503 or models == 503:
        text = ("SGLang answers but is still starting (/health %s, /v1/models %s: it warms up after loading); raise "
                "openai_smoke_test_ready_timeout if this is a slow cold start." % shown)
        return {"cause": "not_ready_starting", "diagnosis": text, "variable": "openai_smoke_test_ready_timeout",
                "fault": "deployment"}
    text = "The server is not ready (/health %s, /v1/models %s): read the unit's journal." % shown
    return {"cause": "not_ready", "diagnosis": text, "variable": "openai_smoke_test_ready_timeout",
            "fault": "deployment"}


def wait_ready(client, wait_timeout, unit=None, baseline=None, run=None, poll=2.0, journal_lines=30,
               clock=time.monotonic, sleep=time.sleep, probe_timeout=25.0, profile=None):
    """Poll `/health` and `/v1/models` until the server answers, WAIT_TIMEOUT passes, or the unit breaks.

    Ready means: `/health` answers 200 (or is absent: 404/405, or wants the key: 401/403) and
    `/v1/models` gives a definite answer: 200, or 401/403 (the server is up, the key is wrong: SGLang
    lets `/health` through without the key, so waiting longer would never help; the checks diagnose
    it at once), or 404 (no OpenAI API at this URL). Each probe is bounded by PROBE_TIMEOUT (SGLang's
    `/health` runs a one-token generation and may take up to 20 s), so one call can overrun
    WAIT_TIMEOUT by two probes at most.

    Returns a dict: ready, elapsed_s, health_status, models_status, health, models (as shown in
    progress lines: a status or 'refused', 'timed out', ...), health_endpoint (False when the server
    has none), unit (state), baseline, problem (None or why the unit broke), cause (when not ready or
    the key is wrong: cause, diagnosis, variable, fault), last_log_line, journal (tail, only on problem).
    """
    started = clock()
    info = {"ready": False, "elapsed_s": 0.0, "health_status": None, "models_status": None, "health": None,
            "models": None, "health_endpoint": None, "unit": None, "baseline": baseline, "problem": None,
            "cause": None, "last_log_line": None, "journal": []}
    if unit and run:
        if not baseline:
            baseline = unit_state(run, unit)
            info["baseline"] = baseline
    while True:
        health, health_error = client.probe("/health", probe_timeout)
        models, models_error = client.probe("/v1/models", probe_timeout)
        info.update(health_status=health, models_status=models, health=_shown(health, health_error),
                    models=_shown(models, models_error),
                    health_error_kind=health_error.kind if health_error else None,
                    models_error_kind=models_error.kind if models_error else None)
        if health is not None:
            info["health_endpoint"] = health not in (404, 405)
        info["ready"] = _endpoint_answers(health) and models in (200, 401, 403, 404)
        if unit and run:
            state = unit_state(run, unit)
            info["unit"] = state
            problem = unit_problem(state, baseline)
            if problem and not info["ready"]:
                info["problem"] = problem
                info["journal"] = journal_tail(run, unit, journal_lines)
                break
        if info["ready"]:
            break
        if clock() - started >= wait_timeout:
            break
        sleep(max(0.05, min(poll, wait_timeout - (clock() - started))))
    info["elapsed_s"] = round(clock() - started, 1)
    if info["ready"] and models in (401, 403):
        info["cause"] = {"cause": "auth", "variable": "llm_server_api_key", "fault": "test_settings",
                         "diagnosis": "Ready, but the API key is wrong: /health answers %s while /v1/models answers "
                                      "%s (SGLang lets /health through without the key): llm_server_api_key must "
                                      "equal the server's --api-key." % (info["health"], models)}
    elif not info["ready"] and not info["problem"]:
        info["cause"] = not_ready_cause(info, client.base_url, profile)
    if unit and run:
        tail = journal_tail(run, unit, 1) if not info["journal"] else info["journal"][-1:]
        info["last_log_line"] = tail[-1] if tail else None
    return info
