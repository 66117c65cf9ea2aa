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
extends_documentation_fragment:
  - gpufleet.llm_server.attributes.read_only
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
    description:
      - Host RAM in MiB (C(ansible_facts.memtotal_mb)); 0 skips the RAM checks.
      - Not given, with O(host_checks), the module reads C(MemTotal) from C(/proc/meminfo) itself (as the setup
        module's hardware facts do) and returns it as RV(ansible_facts.memtotal_mb), so no hardware facts need
        gathering. Not given without O(host_checks) (the controller pass), the RAM checks are skipped.
    type: int
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
  model_record_dir:
    description:
      - Where model_download keeps the model records (C(model_download_record_dir)). What is present is judged
        against the profile's record, as model_download judges it.
    type: path
    default: /var/lib/gpufleet/models
    version_added: "0.2.0"
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
  defer_errors:
    description:
      - For the controller pass (O(host_checks=false)) of a run whose read-only host pass follows - do not fail on the
        problems found here; return them as RV(deferred) for the host pass (O(deferred)), which refuses with them and
        its own in one message, each with its rule name.
      - Problems of the C(inventory) or C(profile-exists) rules still fail at once (no address to connect to, or no
        profile to check), and so do all of them when the host cannot be reached (the action plugin runs C(true)
        over the connection to find out), naming the connection error and that the host checks did not run.
    type: bool
    default: false
  deferred:
    description:
      - Problems an earlier pass deferred (its RV(deferred)); the refusal lists them with this pass's own, one per
        rule and variable (this pass's wording where both found it).
    type: list
    elements: dict
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
  node_facts:
    description:
      - Handled by the action plugin, on the controller, before the module runs (the module itself ignores it).
      - Works out the multi-node facts from the inventory (C(groups), C(hostvars)) - the profile's C(nnodes), this
        host's rank in the group named by C(llm_server_node_group) (sorted by inventory name), rank 0's rendezvous
        address (its C(llm_server_node_address), else C(ansible_host), else its name, and the profile's
        C(dist_init_port), default 5000) and every node's C(ansible_facts.gpu_info.gpu_count) - refuses a group that
        does not match the profile or a loopback rendezvous address, passes O(node_rank), O(dist_init_addr) and
        O(node_gpu_counts) to the checks, and returns the facts as RV(node_facts).
      - Needs O(profile_name) and O(profiles); incompatible with O(node_rank), O(dist_init_addr) and O(node_gpu_counts).
    type: bool
    default: false
attributes:
  action:
    support: full
    description:
      - With O(host_checks=false) the checks run in the controller's own process (nothing is sent to a host, no
        connection is opened); with O(profile_checks=false) too, as those checks read nothing from the host.
      - Otherwise the module runs on the host.
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

- name: Validate against the host (GPUs, RAM, disk, config.json)
  gpufleet.llm_server.sglang_preflight:
    profile_name: "{{ llm_server_model }}"
    profiles: "{{ llm_server_models }}"
    gpu_info: "{{ ansible_facts.gpu_info | default({}) }}"
    api_key_set: "{{ llm_server_api_key | default('') | length > 0 }}"
    node_facts: true

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
  sample: ["--model-path", "/shared/m", "--tp-size", "8", "--api-key", "<systemd credential api-key>"]
exec_start_args:
  description:
    - RV(argv) quoted for a systemd ExecStart= line, without the API key pair RV(argv) ends with (gpufleet-launch
      appends the key from the systemd credential inside the process, so it is never on a command line).
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
deferred:
  description:
    - With O(defer_errors), the problems found (as RV(errors)) that the host pass will report; the task did not fail.
  returned: when O(defer_errors=true) deferred problems
  type: list
  elements: dict
deferred_report:
  description: RV(deferred) as the refusal will print them, one line each.
  returned: when O(defer_errors=true) deferred problems
  type: list
  elements: str
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
ansible_facts:
  description: Facts read on the host.
  returned: success
  type: dict
  contains:
    memtotal_mb:
      description: Host RAM in MiB (C(MemTotal) of C(/proc/meminfo) // 1024), when O(memtotal_mb) was not given.
      returned: when O(host_checks) and O(memtotal_mb) is not given
      type: int
node_facts:
  description:
    - The multi-node facts (with O(node_facts)), named as the collection-wide variables the preflight role sets from
      them - C(llm_server_nnodes), and C(llm_server_node_rank) (0 for a single-node profile); with C(nnodes) > 1
      also C(llm_server_dist_init_addr) and C(llm_server_node_gpu_counts).
  returned: when O(node_facts=true)
  type: dict
  sample: {llm_server_nnodes: 2, llm_server_node_rank: 1, llm_server_dist_init_addr: "10.0.0.11:5000",
           llm_server_node_gpu_counts: [8, 8]}
unit_name:
  description: systemd unit name for the profile.
  returned: always
  type: str
  sample: sglang-qwen3.5-397b-nvfp4.service
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils.sglang_preflight_run import ARGUMENT_SPEC, run


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    out, warnings, failure = run(module.params)
    for text in warnings:
        module.warn(text)
    if failure:
        module.fail_json(msg=failure, **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
