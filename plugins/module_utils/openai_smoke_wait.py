# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readiness of an SGLang server: `/health`, then `/v1/models`, while watching its systemd unit.

A cold start of a 400B model takes 10+ minutes, and a crash during start-up must not be mistaken
for "still loading": while waiting, the unit's ActiveState, NRestarts and InvocationID are read
with `systemctl show`; a unit that is failed/inactive or has restarted since the baseline ends the
wait at once with the journal tail. Used by the `openai_smoke_test` module (option `wait_timeout`).
"""

from __future__ import absolute_import, division, print_function

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


def wait_ready(client, wait_timeout, unit=None, baseline=None, run=None, poll=2.0, journal_lines=30,
               clock=time.monotonic, sleep=time.sleep):
    """Poll until `/health` and `/v1/models` answer 200, WAIT_TIMEOUT passes, or the unit breaks.

    Returns a dict: ready, elapsed_s, health_status, models_status, unit (state), baseline,
    problem (None or why the unit broke), last_log_line, journal (tail, only on problem).
    """
    started = clock()
    info = {"ready": False, "elapsed_s": 0.0, "health_status": None, "models_status": None,
            "unit": None, "baseline": baseline, "problem": None, "last_log_line": None, "journal": []}
    if unit and run:
        if not baseline:
            baseline = unit_state(run, unit)
            info["baseline"] = baseline
    while True:
        health = client.status("/health")
        info["health_status"] = health
        if health == 200:
            info["models_status"] = client.status("/v1/models")
            if info["models_status"] == 200:
                info["ready"] = True
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
    if unit and run:
        tail = journal_tail(run, unit, 1) if not info["journal"] else info["journal"][-1:]
        info["last_log_line"] = tail[-1] if tail else None
    return info
