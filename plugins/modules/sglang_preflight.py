#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_preflight
short_description: Validate an SGLang model profile against the host and the installed SGLang
version_added: "0.1.0"
description:
  - Checks the chosen entry of O(profiles) against the host's GPU facts (count, compute capability),
    its RAM, and, when O(sglang_dir) is given, the installed SGLang release's real flag definitions
    (read statically from its source; SGLang and torch are never imported).
  - Reports every problem at once, each naming the variable, its value, the reason and the fix, and
    fails when any is an error. Changes nothing on the host.
  - Returns the rendered SGLang command line (RV(argv), RV(exec_start_args)) and environment, which the
    sglang_service role writes into the unit, so what is checked is what runs.
  - The rules and their sources are listed in docs/model-profiles.md.
author:
  - gpufleet maintainers (@gpufleet)
options:
  profile_name:
    description: Name of the profile to check (the host's C(llm_server_model)).
    type: str
    required: true
  profiles:
    description: All model profiles (C(llm_server_models)).
    type: dict
    required: true
  gpu_info:
    description:
      - GPU facts as returned by M(gpufleet.llm_server.gpu_info) in C(ansible_facts.gpu_info)
        (C(gpu_count), C(devices) with C(compute_capability)). Empty when the driver is not installed yet;
        GPU rules then use O(expected_gpu_count) only.
    type: dict
    default: {}
  memtotal_mb:
    description: Host RAM in MiB (C(ansible_facts.memtotal_mb)); 0 skips the RAM checks.
    type: int
    default: 0
  expected_gpu_count:
    description: GPUs the host must have (C(llm_server_expected_gpu_count)); used when O(gpu_info) is empty.
    type: int
  sglang_dir:
    description:
      - The installed C(sglang) package directory (C(sglang_build_source_dir)). Empty before SGLang is
        installed; the flag, parser and per-release checks then run again from the sglang_service role.
    type: path
  sglang_version:
    description:
      - Release of the SGLang at O(sglang_dir) when its source does not say (a git checkout has no
        C(_version.py) until installed), e.g. C(sglang_build_version). Overrides what is read.
    type: str
  api_key_set:
    description: Whether an API key will be configured (the key itself is never passed to this module).
    type: bool
    default: false
  read_model_config:
    description: Read C(config.json) from the profile's model path (architectures, quantization) when present.
    type: bool
    default: true
  fail_on_warnings:
    description: Treat warnings as errors.
    type: bool
    default: false
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
    description: Reads files only (SGLang source, the model's config.json); any POSIX host with Python 3.11+.
notes:
  - Standard library only on the target.
"""

EXAMPLES = r"""
- name: Validate the chosen profile before anything changes
  gpufleet.llm_server.sglang_preflight:
    profile_name: "{{ llm_server_model }}"
    profiles: "{{ llm_server_models }}"
    gpu_info: "{{ ansible_facts.gpu_info | default({}) }}"
    memtotal_mb: "{{ ansible_facts.memtotal_mb | default(0) }}"
    expected_gpu_count: "{{ llm_server_expected_gpu_count | default(omit) }}"
    api_key_set: "{{ llm_server_api_key | default('') | length > 0 }}"

- name: Re-check against the installed release and get the argv for the unit
  gpufleet.llm_server.sglang_preflight:
    profile_name: qwen3.5-397b-nvfp4
    profiles: "{{ llm_server_models }}"
    sglang_dir: /opt/sglang/venv/lib/python3.12/site-packages/sglang
  register: preflight
"""

RETURN = r"""
argv:
  description: SGLang arguments rendered from the profile (after C(python -m sglang.launch_server)).
  returned: always
  type: list
  elements: str
  sample: ["--model-path", "/shared/m", "--tp-size", "8", "--api-key", "${GPUFLEET_SGLANG_API_KEY}"]
exec_start_args:
  description: RV(argv) quoted for a systemd ExecStart= line.
  returned: always
  type: str
env:
  description: Non-secret environment of the server rendered from the profile.
  returned: always
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
sglang_version:
  description: Release of the SGLang tree read from O(sglang_dir) (null when not given or unknown).
  returned: always
  type: str
flag_layout:
  description: C(server_args) (<= 0.5.13) or C(arg_groups) (>= 0.5.14); null without O(sglang_dir).
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
    Context, format_problem, load_table, read_model_config, validate)
from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_render import systemd_quote


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile_name=dict(type="str", required=True),
            profiles=dict(type="dict", required=True),
            gpu_info=dict(type="dict", default={}),
            memtotal_mb=dict(type="int", default=0),
            expected_gpu_count=dict(type="int"),
            sglang_dir=dict(type="path"),
            sglang_version=dict(type="str"),
            api_key_set=dict(type="bool", default=False),
            read_model_config=dict(type="bool", default=True),
            fail_on_warnings=dict(type="bool", default=False),
            node_rank=dict(type="int"),
            dist_init_addr=dict(type="str"),
            node_gpu_counts=dict(type="list", elements="raw"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    table, version, flags_error = load_table(p["sglang_dir"])
    if p["sglang_version"]:
        version = p["sglang_version"]
        if table is not None:
            table.version = version
    profile = p["profiles"].get(p["profile_name"])
    model_config = {}
    if p["read_model_config"] and isinstance(profile, dict) and isinstance(profile.get("model_path"), str):
        model_config = read_model_config(profile["model_path"])
    facts = dict(p["gpu_info"] or {})
    facts["memtotal_mb"] = p["memtotal_mb"]
    ctx = Context(p["profile_name"], p["profiles"], facts=facts, table=table, version=version,
                  api_key_set=p["api_key_set"], model_config=model_config,
                  expected_gpu_count=p["expected_gpu_count"], flags_error=flags_error,
                  node={"node_rank": p["node_rank"], "dist_init_addr": p["dist_init_addr"],
                        "gpu_counts": p["node_gpu_counts"]})
    result = validate(ctx)
    errors, warnings = result["errors"], result["warnings"]
    if p["fail_on_warnings"]:
        errors, warnings = errors + warnings, []
    out = dict(
        changed=False,
        argv=result["argv"],
        exec_start_args=systemd_quote(result["argv"]),
        env=result["env"],
        errors=errors,
        warnings_found=warnings,
        sglang_version=version,
        flag_layout=table.layout if table is not None else None,
        flags_checked=table is not None,
        unit_name="sglang-%s.service" % p["profile_name"],
        model_config_read=bool(model_config),
    )
    for warning in warnings:
        module.warn(format_problem(warning))
    if errors:
        lines = [format_problem(e) for e in errors]
        module.fail_json(msg="Profile '%s' failed preflight with %d problem(s):%s%s"
                         % (p["profile_name"], len(errors), os.linesep, os.linesep.join(lines)), **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
