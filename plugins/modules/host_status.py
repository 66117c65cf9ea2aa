#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_status
short_description: Read an LLM server host's state against what the inventory wants, changing nothing
version_added: "0.1.0"
description:
  - One read of everything C(playbooks/status.yml) reports for a host, judged per concern
    (V(ok), V(drift), V(pending) or V(unknown)) - the NVIDIA driver (packages in dpkg's database, holds, the
    NVIDIA pinning package, version pins in apt's preferences, the kernel module loaded now), the CUDA
    toolkit package, the SGLang build served through sglang_build's C(current) link against the commit
    O(ref) resolves to now, the SM120 keys in the tables the served tree reads, the SGLang unit file against
    the unit rendered from the inventory (O(unit_content), and its environment file with O(env_content)) or the
    known-good snapshot, systemd's view of the unit, how a credential would be stored on the host, the
    restart-pending marker, the model files against model_download's record, the deployment record, and the
    records of the last start-to-ready (O(start_record)) and reboot (O(reboot_record)).
  - Read-only - it opens files for reading and runs C(systemctl show), C(systemctl --version) and
    C(git rev-parse)/C(git ls-remote)
    (a branch or tag ref is resolved on the remote, nothing is fetched). Safe while the server serves.
  - The plan (what a deploy would do and cost) is worked out on the controller by the
    M(gpufleet.llm_server.fleet_status_report) filter from this module's result.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.host_roots
  - gpufleet.llm_server.dpkg_status
  - gpufleet.llm_server.attributes.read_only
options:
  driver:
    description: The driver the inventory wants.
    type: dict
    default: {}
    suboptions:
      branch:
        description: C(nvidia_driver_branch).
        type: str
      version:
        description: C(nvidia_driver_version) (empty - any version of the branch).
        type: str
      flavor:
        description: C(nvidia_driver_flavor), V(open) or V(proprietary).
        type: str
      hold:
        description: C(nvidia_driver_hold) - the stack must be locked (held, or NVIDIA's pinning package).
        type: bool
        default: true
  apt_preferences:
    description: apt preference files read for version pins of driver packages.
    type: list
    elements: path
    default: [/etc/apt/preferences]
  apt_preferences_dirs:
    description: Directories of apt preference files.
    type: list
    elements: path
    default: [/etc/apt/preferences.d]
  cuda_version:
    description: C(cuda_toolkit_version); its package C(cuda-toolkit-X-Y) must be installed.
    type: str
    default: ""
  build_dir:
    description: C(sglang_build_dir).
    type: path
    default: /opt/sglang
  ref:
    description: C(sglang_build_ref).
    type: str
    default: main
  git_url:
    description: C(sglang_build_git_url), used only when there is no local clone.
    type: str
    default: https://github.com/sgl-project/sglang.git
  python:
    description: The interpreter the server runs (C(sglang_build_python)); the build's import check must have used it.
    type: path
    default: /opt/sglang/venv/bin/python
  patches:
    description: C(sglang_sm120_patch_patches) (name, file, symbol, alternatives).
    type: list
    elements: dict
    default: []
  required_keys:
    description: C(sglang_sm120_patch_required_keys).
    type: list
    elements: raw
    default: [12]
  unit_dir:
    description: C(sglang_service_unit_dir).
    type: path
    default: /etc/systemd/system
  unit_name:
    description: The SGLang unit's name.
    type: str
    required: true
  unit_content:
    description:
      - The unit as the inventory renders it today. When omitted, the unit is compared with the known-good
        snapshot in O(known_good_dir), and the result keeps the unit's text (RV(concerns)) so that the
        controller can compare it with a rendering made after this read (C(playbooks/status.yml)).
    type: str
  env_file:
    description: The unit's environment file (C(sglang_service_env_file)); read for the comparison with O(env_content).
    type: path
  env_content:
    description: The environment file as the inventory renders it today (no secrets in it); needs O(env_file).
    type: str
  credential_encrypt:
    description:
      - C(sglang_service_credential_encrypt); the result's RV(credentials) says how
        M(gpufleet.llm_server.systemd_credential) would store a credential on this host (the unit's
        C(LoadCredential=) or C(LoadCredentialEncrypted=) lines follow it).
    type: str
    choices: [auto, always, never]
    default: auto
  start_record:
    description:
      - sglang_service's record of the last real start of the server (C(start_to_ready_s), seconds from the
        start to readiness).
    type: path
  reboot_record:
    description: nvidia_driver's record of its last reboot (C(reboot_s), the seconds C(ansible.builtin.reboot) took).
    type: path
  known_good_dir:
    description: C(sglang_service_known_good_dir).
    type: path
    default: /var/lib/gpufleet/sglang/known-good
  restart_marker:
    description: The restart-pending marker (C(llm_server_restart_marker)).
    type: path
    default: /var/lib/gpufleet/sglang/restart-pending
  model_path:
    description: The profile's C(model_path).
    type: path
    default: ""
  model_record_dir:
    description: C(model_download_record_dir).
    type: path
    default: /var/lib/gpufleet/models
  hashes:
    description: Also hash every model file against its recorded SHA-256 (reads every byte - minutes for a large model).
    type: bool
    default: false
  deployment_record:
    description: sglang_service's JSON deployment record.
    type: path
    required: true
attributes:
  platform:
    support: full
    platforms: posix
    description: Debian-family hosts with systemd; standard library only.
seealso:
  - module: gpufleet.llm_server.model_manifest
  - module: gpufleet.llm_server.sglang_build_state
"""

EXAMPLES = r"""
- name: Read the host against the inventory
  gpufleet.llm_server.host_status:
    driver:
      branch: "595"
      flavor: open
    cuda_version: "13.0"
    ref: v0.5.10.post1
    patches: "{{ sglang_sm120_patch_patches }}"
    unit_name: sglang-kimi-k2.5.service
    model_path: /shared/kimi-k2.5-int4
    deployment_record: /var/lib/gpufleet/sglang/deployment-kimi-k2.5.json
  register: host_status
"""

RETURN = r"""
concerns:
  description:
    - Per concern (driver, cuda, sglang, patch, unit, restart, model) - C(state) (V(ok), V(drift), V(pending),
      V(unknown)), C(detail) (sentences) and that concern's facts.
    - The unit's facts include C(installed_text) and C(env_text) (the unit and environment file as installed, null
      when missing or unreadable), C(compared_with), and the parts of its verdict (C(known_good_detail),
      C(state_detail), C(pending_detail)), so that the controller can judge it again against a rendering made after
      this read (the M(gpufleet.llm_server.fleet_status_report) filter, which drops them from the report).
  returned: always
  type: dict
  sample:
    restart:
      state: pending
      detail: ["restart marker /var/lib/gpufleet/sglang/restart-pending: the unit sglang-kimi.service changed"]
      marker: /var/lib/gpufleet/sglang/restart-pending
      marker_present: true
      reasons: ["the unit sglang-kimi.service changed"]
deployment:
  description: The deployment record's profile, SGLang commit and date (C(present) false when there is none).
  returned: always
  type: dict
  sample: {"present": true, "profile": "kimi-k2.5", "sglang_commit": "4f2a...", "generated": "2026-12-01T12:00:00Z"}
records:
  description:
    - The measured figures of the plan - C(start_to_ready) from O(start_record), C(reboot) from O(reboot_record);
      each C(path), C(seconds) (null when never recorded), C(recorded) (when) and C(error).
  returned: always
  type: dict
  sample: {"start_to_ready": {"path": "/var/lib/gpufleet/sglang/start-to-ready.json", "seconds": 412.3,
           "recorded": "2026-12-01T12:07:00Z", "error": null},
           "reboot": {"path": "/var/lib/gpufleet/nvidia-driver/reboot.json", "seconds": null, "recorded": null,
           "error": null}}
credentials:
  description: How a credential would be stored on this host now - C(format) (V(encrypted), V(plain) or null),
    C(directive) (C(LoadCredentialEncrypted), C(LoadCredential) or null) and C(error).
  returned: always
  type: dict
  sample: {"format": "encrypted", "directive": "LoadCredentialEncrypted", "error": null}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.fleet_status import read


def main():
    module = AnsibleModule(
        argument_spec=dict(
            driver=dict(type="dict", default={}, options=dict(
                branch=dict(type="str"), version=dict(type="str"), flavor=dict(type="str"),
                hold=dict(type="bool", default=True))),
            apt_preferences=dict(type="list", elements="path", default=["/etc/apt/preferences"]),
            apt_preferences_dirs=dict(type="list", elements="path", default=["/etc/apt/preferences.d"]),
            cuda_version=dict(type="str", default=""),
            build_dir=dict(type="path", default="/opt/sglang"),
            ref=dict(type="str", default="main"),
            git_url=dict(type="str", default="https://github.com/sgl-project/sglang.git"),
            python=dict(type="path", default="/opt/sglang/venv/bin/python"),
            patches=dict(type="list", elements="dict", default=[]),
            required_keys=dict(type="list", elements="raw", default=[12], no_log=False),
            unit_dir=dict(type="path", default="/etc/systemd/system"),
            unit_name=dict(type="str", required=True),
            unit_content=dict(type="str"),
            env_file=dict(type="path"),
            env_content=dict(type="str"),
            credential_encrypt=dict(type="str", choices=["auto", "always", "never"], default="auto"),
            start_record=dict(type="path"),
            reboot_record=dict(type="path"),
            known_good_dir=dict(type="path", default="/var/lib/gpufleet/sglang/known-good"),
            restart_marker=dict(type="path", default="/var/lib/gpufleet/sglang/restart-pending"),
            model_path=dict(type="path", default=""),
            model_record_dir=dict(type="path", default="/var/lib/gpufleet/models"),
            hashes=dict(type="bool", default=False),
            deployment_record=dict(type="path", required=True),
            dpkg_status=dict(type="path", default="/var/lib/dpkg/status"),
            sysfs_root=dict(type="path", default="/sys"),
            procfs_root=dict(type="path", default="/proc"),
        ),
        required_by={"env_content": "env_file"},
        supports_check_mode=True,
    )

    def run(argv):
        return module.run_command(argv, environ_update={"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})

    result = read(module.params, run, module.get_bin_path)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
