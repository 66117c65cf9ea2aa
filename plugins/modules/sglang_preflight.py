#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_preflight
short_description: Validate an SGLang model profile against the host and the SGLang that will run
version_added: "0.1.0"
description:
  - Checks the chosen entry of O(profiles) against the inventory, the host's GPU facts (count, compute
    capability), its RAM and disk, and the flag definitions of the SGLang release that will run.
  - Judges the effective command line, as SGLang's argparse parses it - the argv rendered from the profile
    keys plus C(extra_args), where the last value of a flag wins; a flag given twice is refused.
  - Flag definitions come from O(sglang_dir) (an SGLang tree on the host, read statically; SGLang and torch are
    never imported), else from the release table the collection generates from real PyPI releases
    (C(plugins/module_utils/sglang_release_table.py)), for the release O(sglang_ref) or O(flag_release) names.
    So flags, parsers and per-release rules are checked before SGLang is built.
  - Reports every problem at once, each naming the variable, its value, the reason and the fix, and fails
    when any is an error. Changes nothing on the host.
  - Returns the rendered SGLang command line (RV(argv), RV(exec_start_args)) and environment, which the
    sglang_service role writes into the unit, so what is checked is what runs.
  - The rules and their sources are listed in docs/model-profiles.md.
author:
  - gpufleet maintainers (@gpufleet)
options:
  profile_name:
    description:
      - Name of the profile to check (the host's C(llm_server_model)). Missing or not a string is reported as
        a problem (with the known profile names), not as an argument error.
    type: raw
  profiles:
    description:
      - All model profiles (C(llm_server_models)), a mapping from profile name to profile. Any other shape
        (a list, a string) is reported as a problem with the fix.
    type: raw
  gpu_info:
    description:
      - GPU facts as returned by M(gpufleet.llm_server.gpu_info) in C(ansible_facts.gpu_info)
        (C(gpu_count), C(devices) with C(compute_capability)). Empty when the driver is not installed yet;
        GPU rules then use O(expected_gpu_count) and O(expected_compute_capability).
    type: dict
    default: {}
  memtotal_mb:
    description: Host RAM in MiB (C(ansible_facts.memtotal_mb)); 0 skips the RAM checks.
    type: int
    default: 0
  expected_gpu_count:
    description: GPUs the host must have (C(llm_server_expected_gpu_count)); used when O(gpu_info) shows none.
    type: int
  expected_compute_capability:
    description:
      - Compute capability of the host's GPUs, e.g. C(12.0) for RTX PRO 6000 Blackwell
        (C(llm_server_expected_compute_capability)); used when O(gpu_info) reports none (before the driver).
    type: str
  sglang_dir:
    description:
      - An SGLang C(sglang) package directory on the host whose flag definitions are read (exact).
        When unset, the release table is used (see O(flag_release)).
    type: path
  sglang_dir_optional:
    description: When O(sglang_dir) does not exist, use the release table instead of failing.
    type: bool
    default: false
  sglang_version:
    description:
      - Release of the SGLang at O(sglang_dir) when its source does not say (a git checkout has no
        C(_version.py) until installed), e.g. C(sglang_build_version). Overrides what is read.
    type: str
  sglang_ref:
    description:
      - The git ref the build will check out (C(sglang_build_ref)), to pick the release table entry when
        O(flag_release=auto). A release tag (C(v0.5.10.post1)) is checked exactly; a branch or commit
        (C(main)) against the newest tabulated release, with a warning.
    type: str
    default: main
  flag_release:
    description:
      - C(auto) - the release O(sglang_ref) names; a release such as C(0.5.23) - that release's table;
        C(none) - no flag table (only the seed's known misspellings are caught before SGLang is installed).
      - Ignored when O(sglang_dir) is read.
    type: str
    default: auto
  api_key_set:
    description: Whether an API key will be configured (the key itself is never passed in this option).
    type: bool
    default: false
  secrets:
    description:
      - Secret values by variable name (e.g. C(llm_server_api_key)), only checked for control characters.
        Never returned or logged.
    type: dict
    default: {}
  profile_checks:
    description: Run the profile rules; false runs only the inventory checks (O(inventory_hostname)).
    type: bool
    default: true
  secret_env:
    description:
      - Secret environment of the server by name (C(sglang_service_secret_env)); names and values are checked,
        values are never returned or logged.
    type: dict
    default: {}
  host_checks:
    description:
      - Read the model's C(config.json) and the free disk space on the machine running the module. Off for the
        connection-free inventory pass on the controller.
    type: bool
    default: true
  read_model_config:
    description: Read C(config.json) from the profile's model path (architectures, quantization, context length).
    type: bool
    default: true
  disk_check:
    description:
      - Check the free space a download of the profile's C(hub_repo) needs (with O(host_checks)). Off after the
        download step (sglang_service), where a missing model is not a space problem.
    type: bool
    default: true
  disk_margin_gb:
    description: Free space (GB) required beyond a download's missing bytes (C(model_download_space_margin_gb)).
    type: float
    default: 20
  inventory_hostname:
    description: Inventory name of the host; given, the inventory checks run (O(host_address), C(llm_server_model)).
    type: str
  host_address:
    description: The host's C(ansible_host) (omit when it is not set).
    type: raw
  placeholder_markers:
    description: Substrings of O(host_address) that mean the inventory was not filled in.
    type: list
    elements: str
    default: []
  inventory_dir:
    description: Inventory directory named in fixes.
    type: str
  unit_settings:
    description: Other strings written into the systemd unit by variable name (checked for control characters).
    type: dict
    default: {}
  base_env:
    description: Environment under the profile's C(env) in the server's environment file (C(cuda_toolkit_env)).
    type: dict
    default: {}
  extra_env:
    description: Environment over the profile's C(env) (C(sglang_service_extra_env)); checked like the profile's.
    type: dict
    default: {}
  fail_on_warnings:
    description: Treat warnings as errors.
    type: bool
    default: false
  already_reported:
    description: Warnings (as RV(reported) lists them) an earlier call printed already; not printed again.
    type: list
    elements: str
    default: []
  node_rank:
    description:
      - Multi-node tensor parallel (profile C(nnodes) > 1) - this host's rank (the preflight role's
        C(llm_server_node_rank)); rendered as C(--node-rank).
    type: int
  dist_init_addr:
    description:
      - Multi-node - rank 0's C(HOST:PORT) rendezvous address, rendered as C(--dist-init-addr) on every rank.
    type: str
  node_gpu_counts:
    description:
      - Multi-node - GPUs of each node of the server (unknown entries null), to check C(tp_size) across nodes.
    type: list
    elements: raw
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Reads files only (SGLang source, the model's config.json, filesystem usage); any POSIX host with Python 3.11+.
notes:
  - Standard library only on the target.
  - Regenerate the release table after a new SGLang release with C(scripts/generate-sglang-release-table.py --add X.Y.Z).
"""

EXAMPLES = r"""
- name: Check the inventory and the profile on the controller, before connecting
  gpufleet.llm_server.sglang_preflight:
    profile_name: "{{ llm_server_model | default(omit) }}"
    profiles: "{{ llm_server_models | default(omit) }}"
    inventory_hostname: "{{ inventory_hostname }}"
    host_address: "{{ ansible_host | default(omit) }}"
    placeholder_markers: [REPLACE_WITH, CHANGE_ME]
    sglang_ref: "{{ sglang_build_ref | default('main') }}"
    expected_gpu_count: "{{ llm_server_expected_gpu_count | default(omit) }}"
    host_checks: false
  delegate_to: localhost

- name: Validate against the host (GPUs, RAM, disk, config.json)
  gpufleet.llm_server.sglang_preflight:
    profile_name: "{{ llm_server_model }}"
    profiles: "{{ llm_server_models }}"
    gpu_info: "{{ ansible_facts.gpu_info | default({}) }}"
    memtotal_mb: "{{ ansible_facts.memtotal_mb | default(0) }}"
    api_key_set: "{{ llm_server_api_key | default('') | length > 0 }}"

- name: Re-check against the installed release and get the argv for the unit
  gpufleet.llm_server.sglang_preflight:
    profile_name: qwen3.5-397b-nvfp4
    profiles: "{{ llm_server_models }}"
    sglang_dir: /opt/sglang/src/python/sglang
  register: preflight
"""

RETURN = r"""
argv:
  description: SGLang arguments rendered from the profile (after C(python -m sglang.launch_server)).
  returned: success
  type: list
  elements: str
  sample: ["--model-path", "/shared/m", "--tp-size", "8", "--api-key", "${GPUFLEET_SGLANG_API_KEY}"]
exec_start_args:
  description: RV(argv) quoted for a systemd ExecStart= line.
  returned: success
  type: str
env:
  description: Non-secret environment of the server rendered from the profile.
  returned: success
  type: dict
service_env:
  description: The server's whole non-secret environment - O(base_env), then RV(env), then O(extra_env).
  returned: success
  type: dict
errors:
  description: Problems that make the profile unusable (rule, variable, value, reason, fix, source).
  returned: always
  type: list
  elements: dict
warnings_found:
  description: Problems worth knowing that do not stop the run.
  returned: always
  type: list
  elements: dict
reported:
  description: RV(warnings_found) as printed, one line each.
  returned: always
  type: list
  elements: str
sglang_version:
  description: Release whose flags the argv was checked against (null when none).
  returned: always
  type: str
flag_source:
  description: C(tree) (O(sglang_dir)), C(release table) or null (no flag check).
  returned: always
  type: str
release_match:
  description: How O(sglang_ref) mapped to the table - C(exact), C(branch), C(newer) or C(nearest-older).
  returned: always
  type: str
flag_layout:
  description: C(server_args) or C(arg_groups) of the release checked against; null without flags.
  returned: always
  type: str
flags_checked:
  description: Whether the argv was checked against real flag definitions.
  returned: always
  type: bool
unit_name:
  description: systemd unit name for the profile.
  returned: always
  type: str
  sample: sglang-qwen3.5-397b-nvfp4.service
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight import (
    ERROR, WARNING, Context, format_problem, load_table, read_disk, read_model_config, validate)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import (
    RenderError, check_rendered, systemd_quote)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_releases import (
    EXACT, RELEASES, release_table, resolve_release)

FLAG_SOURCE = "plugins/module_utils/sglang_release_table.py (generated from PyPI releases)"


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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile_name=dict(type="raw"),
            profiles=dict(type="raw"),
            gpu_info=dict(type="dict", default={}),
            memtotal_mb=dict(type="int", default=0),
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
        ),
        supports_check_mode=True,
    )
    p = module.params
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
                             str(profile.get("hub_revision") or "main"))
    facts = dict(p["gpu_info"] or {})
    facts["memtotal_mb"] = p["memtotal_mb"]
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
    service_env = {}
    for part in (p["base_env"], result["env"], p["extra_env"]):
        service_env.update({str(k): str(v) for k, v in (part or {}).items()})
    exec_start_args = ""
    if not errors:
        try:  # defence in depth: the renderer refuses control characters itself
            check_rendered({"argv": result["argv"], "env": service_env})
            exec_start_args = systemd_quote(result["argv"])
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
    already = set(p["already_reported"] or [])
    for warning in warnings:
        text = format_problem(warning)
        if text not in already:
            module.warn(text)
    out["reported"] = [format_problem(w) for w in warnings]
    if errors:
        lines = [format_problem(e) for e in errors]
        where = p["inventory_hostname"] or "this host"
        title = "%s, profile '%s'" % (where, name) if isinstance(name, str) and name else where
        # The problems are the answer; the rendered argv of a refused profile would only bury them.
        for key in ("argv", "env", "service_env", "exec_start_args"):
            out.pop(key)
        module.fail_json(msg="Preflight refused %s: %d problem(s), nothing was changed:%s%s"
                         % (title, len(errors), os.linesep, os.linesep.join(lines)), **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
