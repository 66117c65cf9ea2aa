# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One run of gpufleet.llm_server.sglang_preflight, from validated parameters to its result.

Shared by the module (on the host) and its action plugin, which runs the controller pass
(host_checks false) in the controller's own process instead of shipping the module to localhost.
Nothing here prints or exits: `run()` returns the result, the warnings to print and the failure
message, and the caller reports them its own way.
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight import (
    ERROR, RULES, WARNING, Context, format_problem, load_table, read_disk, read_model_config, validate)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import (
    RenderError, check_rendered, systemd_quote, unit_args)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import (
    EXACT, RELEASES, release_table, resolve_release)

FLAG_SOURCE = "plugins/module_utils/sglang_release_table.py (generated from PyPI releases)"

ARGUMENT_SPEC = dict(
    profile_name=dict(type="raw"),
    profiles=dict(type="raw"),
    gpu_info=dict(type="dict", default={}),
    memtotal_mb=dict(type="int"),
    expected_gpu_count=dict(type="int"),
    expected_compute_capability=dict(type="str"),
    sglang_dir=dict(type="path"),
    sglang_dir_optional=dict(type="bool", default=False),
    sglang_version=dict(type="str"),
    sglang_ref=dict(type="str", default="main"),
    flag_release=dict(type="str", default="auto"),
    api_key_set=dict(type="bool", default=False),
    secrets=dict(type="dict", default={}, no_log=True),
    secret_env=dict(type="dict", default={}, no_log=True),
    profile_checks=dict(type="bool", default=True),
    host_checks=dict(type="bool", default=True),
    read_model_config=dict(type="bool", default=True),
    disk_check=dict(type="bool", default=True),
    disk_margin_gb=dict(type="float", default=20),
    model_record_dir=dict(type="path", default="/var/lib/gpufleet/models"),
    inventory_hostname=dict(type="str"),
    host_address=dict(type="raw"),
    placeholder_markers=dict(type="list", elements="str", default=[]),
    inventory_dir=dict(type="str"),
    unit_settings=dict(type="dict", default={}),
    base_env=dict(type="dict", default={}),
    extra_env=dict(type="dict", default={}),
    fail_on_warnings=dict(type="bool", default=False),
    already_reported=dict(type="list", elements="str", default=[]),
    node_rank=dict(type="int"),
    dist_init_addr=dict(type="str"),
    node_gpu_counts=dict(type="list", elements="raw"),
    node_facts=dict(type="bool", default=False),
    defer_errors=dict(type="bool", default=False),
    deferred=dict(type="list", elements="dict", default=[]),
)

# Problems after which the host pass cannot run: the address is a placeholder (nothing to connect to),
# or there is no profile to check. Any other problem of the controller pass waits for the host pass.
BLOCKING_RULES = ("inventory", "profile-exists")

# Options the action plugin consumes; never sent to the module on the host.
ACTION_ONLY = ("node_facts",)


def _note(severity, variable, value, reason, fix):
    return {"rule": "flag-source", "severity": severity, "variable": variable, "value": value, "reason": reason,
            "fix": fix, "source": FLAG_SOURCE}


def pick_table(p):
    """(table, version, flags_error, match, flags_from, notes) for the SGLang that will run."""
    notes = []
    if p["sglang_dir"] and (os.path.exists(p["sglang_dir"]) or not p["sglang_dir_optional"]):
        table, version, error = load_table(p["sglang_dir"])
        return table, version, error, EXACT, "tree %s" % p["sglang_dir"], notes
    wanted = (p["flag_release"] or "auto").strip()
    if wanted.lower() == "none":
        return None, None, None, EXACT, None, notes
    if wanted.lower() == "auto":
        release, match = resolve_release(p["sglang_ref"])
        if release is None:
            notes.append(_note(ERROR, "sglang_build_ref", p["sglang_ref"],
                               "is older than every release in the collection's flag table (%s-%s)"
                               % (RELEASES[0], RELEASES[-1]),
                               "build a release from %s on, or set preflight_flag_release: none to skip the flag "
                               "checks before the build" % RELEASES[0]))
            return None, None, None, EXACT, None, notes
        if match != EXACT:
            how = {"branch": "is a branch or commit, not a release",
                   "newer": "is newer than the newest release in the collection's flag table",
                   "nearest-older": "is not in the collection's flag table"}[match]
            notes.append(_note(WARNING, "sglang_build_ref", p["sglang_ref"],
                               "%s: flags checked against SGLang %s%s; sglang_service checks again against the built tree"
                               % (how, release, "" if match == "nearest-older" else " (the newest tabulated release)"),
                               "pin sglang_build_ref to a release tag (e.g. v%s) for an exact check before the build; "
                               "after a new SGLang release run scripts/generate-sglang-release-table.py --add X.Y.Z"
                               % RELEASES[-1]))
    else:
        release, match = wanted.lstrip("v"), EXACT
        if release not in RELEASES:
            notes.append(_note(ERROR, "preflight_flag_release", wanted,
                               "is not a release in the collection's flag table",
                               "use one of %s, 'auto' (from sglang_build_ref) or 'none'" % ", ".join(RELEASES)))
            return None, None, None, EXACT, None, notes
    return release_table(release), release, None, match, "release table", notes


def merge_problems(found, earlier):
    """FOUND (this pass) with EARLIER (the controller pass's, handed on): one problem per (rule, variable),
    this pass's wording where both found it (it saw the host), in the order of the rule table."""
    keys = {(p["rule"], p["variable"]) for p in found}
    merged = list(found) + [p for p in earlier or [] if (p.get("rule"), p.get("variable")) not in keys]
    order = {rule["id"]: index for index, rule in enumerate(RULES)}
    return sorted(merged, key=lambda p: order.get(p.get("rule"), len(order)))


def read_memtotal_mb(path="/proc/meminfo"):
    """MemTotal in MiB, as the setup module's hardware facts compute it (kB // 1024); 0 when unreadable."""
    try:
        with open(path, encoding="ascii", errors="replace") as meminfo:
            for line in meminfo:
                key, _sep, rest = line.partition(":")
                if key == "MemTotal":
                    return int(rest.split()[0]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run(p, meminfo="/proc/meminfo"):
    """Run the checks for the validated parameters P.

    Returns (result, warnings, failure): the module's return values (ansible_facts.memtotal_mb when
    the RAM size was read here), the warning lines to print, and the failure message (None on success).
    The RAM size is read from MEMINFO only on the host (host_checks) and only when memtotal_mb is not given.
    """
    facts_out = {}
    memtotal_mb = p["memtotal_mb"]
    if memtotal_mb is None:
        memtotal_mb = 0
        if p["host_checks"]:
            memtotal_mb = read_memtotal_mb(meminfo)
            if memtotal_mb:
                facts_out["memtotal_mb"] = memtotal_mb
    table, version, flags_error, match, flags_from, notes = pick_table(p)
    if p["sglang_version"] and p["sglang_dir"]:
        version = p["sglang_version"]
        if table is not None:
            table.version = version
    profiles, name = p["profiles"], p["profile_name"]
    profile = profiles.get(name) if isinstance(profiles, dict) and isinstance(name, str) else None
    model_config, disk = {}, None
    if p["host_checks"] and isinstance(profile, dict) and isinstance(profile.get("model_path"), str):
        if p["read_model_config"]:
            model_config = read_model_config(profile["model_path"])
        if p["disk_check"]:
            disk = read_disk(profile["model_path"], p["disk_margin_gb"], profile.get("hub_repo"),
                             str(profile.get("hub_revision") or "main"), record_dir=p["model_record_dir"])
    facts = dict(p["gpu_info"] or {})
    facts["memtotal_mb"] = memtotal_mb
    inventory = None
    if p["inventory_hostname"]:
        inventory = {"hostname": p["inventory_hostname"], "placeholder_markers": p["placeholder_markers"],
                     "inventory_dir": p["inventory_dir"]}
        if p["host_address"] is not None:
            inventory["host_address"] = p["host_address"]
    ctx = Context(name, profiles, facts=facts, table=table, version=version,
                  api_key_set=p["api_key_set"], model_config=model_config,
                  expected_gpu_count=p["expected_gpu_count"], flags_error=flags_error,
                  node={"node_rank": p["node_rank"], "dist_init_addr": p["dist_init_addr"],
                        "gpu_counts": p["node_gpu_counts"]},
                  inventory=inventory, secrets=p["secrets"], secret_env=p["secret_env"], unit_settings=p["unit_settings"],
                  extra_env=p["extra_env"], expected_compute_capability=p["expected_compute_capability"],
                  disk=disk, release_match=match, release_ref=p["sglang_ref"], flags_from=flags_from,
                  base_env=p["base_env"])
    result = validate(ctx, only=None if p["profile_checks"] else ("inventory",))
    errors = [n for n in notes if n["severity"] == ERROR] + result["errors"]
    # The note that a branch was checked against the newest release matters for a profile that passes;
    # a refused run carries it in the messages it applies to.
    warnings = [n for n in notes if n["severity"] == WARNING and not errors] + result["warnings"]
    if p["fail_on_warnings"]:
        errors, warnings = errors + warnings, []
    errors = merge_problems(errors, p["deferred"])
    service_env = {}
    for part in (p["base_env"], result["env"], p["extra_env"]):
        service_env.update({str(k): str(v) for k, v in (part or {}).items()})
    exec_start_args = ""
    if not errors:
        try:  # defence in depth: the renderer refuses control characters itself
            check_rendered({"argv": result["argv"], "env": service_env})
            exec_start_args = systemd_quote(unit_args(result["argv"]))
        except RenderError as exc:
            errors.append({"rule": "control-characters", "severity": ERROR, "variable": "(rendered unit)",
                           "value": None, "reason": "the renderer refused: %s" % exc,
                           "fix": "remove the control character from the variable it came from",
                           "source": "sglang_preflight_render.check_rendered"})
    out = dict(
        changed=False,
        argv=result["argv"],
        exec_start_args=exec_start_args,
        env=result["env"],
        service_env=service_env,
        errors=errors,
        warnings_found=warnings,
        sglang_version=version,
        flag_source=(table.origin if table is not None else None),
        release_match=match,
        flag_layout=table.layout if table is not None else None,
        flags_checked=table is not None,
        unit_name="sglang-%s.service" % name if isinstance(name, str) else None,
        model_config_read=bool(model_config),
    )
    if facts_out:
        out["ansible_facts"] = facts_out
    already = set(p["already_reported"] or [])
    to_print = [text for text in (format_problem(w) for w in warnings) if text not in already]
    out["reported"] = [format_problem(w) for w in warnings]
    failure = None
    if errors and p["defer_errors"] and not any(e["rule"] in BLOCKING_RULES for e in errors):
        # The host pass (read-only) runs next and refuses with these and its own, in one message.
        for key in ("argv", "env", "service_env", "exec_start_args"):
            out.pop(key)
        out["deferred"] = errors
        out["deferred_report"] = [format_problem(e) for e in errors]
        out["msg"] = ("%d problem(s) found before connecting (%s); the read-only host checks run next and one "
                      "refusal lists them all" % (len(errors), ", ".join(sorted({e["rule"] for e in errors}))))
        return out, to_print, None
    if errors:
        lines = [format_problem(e) for e in errors]
        where = p["inventory_hostname"] or "this host"
        title = "%s, profile '%s'" % (where, name) if isinstance(name, str) and name else where
        # The problems are the answer; the rendered argv of a refused profile would only bury them.
        for key in ("argv", "env", "service_env", "exec_start_args"):
            out.pop(key)
        failure = ("Preflight refused %s: %d problem(s), nothing was changed:%s%s"
                   % (title, len(errors), os.linesep, os.linesep.join(lines)))
    return out, to_print, failure
