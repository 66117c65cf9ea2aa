#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cuda_toolkit_state
short_description: Read a CUDA toolkit host once and say what the cuda_toolkit role has to change
version_added: "0.2.0"
description:
  - Read-only. In one call reads dpkg's status database (which of O(packages) are missing, as
    M(gpufleet.llm_server.package_state) decides), dpkg's C(cuda) alternative, the link O(link), the login-shell
    profile script O(profile) (compared as M(ansible.builtin.template) would) and asks C(nvcc --version) of
    O(home), and returns what has to change (RV(needs)) so that the role runs its writers only when needed.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.dpkg_status
options:
  packages:
    description: The package requests the role installs (toolkit, NCCL), as given to M(ansible.builtin.apt).
    type: list
    elements: str
    required: true
  home:
    description: C(cuda_toolkit_home), the toolkit's directory (its C(bin/nvcc) is asked for its version).
    type: path
    required: true
  link:
    description: C(cuda_toolkit_link); compared only when no C(cuda) alternative is registered.
    type: path
    default: /usr/local/cuda
  profile:
    description: The profile script as the role's template task would leave it.
    type: dict
    required: true
    suboptions:
      path:
        description: Absolute path (C(cuda_toolkit_profile_script)).
        type: path
        required: true
      content:
        description: The rendered template (rendered on the controller).
        type: str
        required: true
      mode:
        description: Octal mode such as V('0644').
        type: str
      owner:
        description: Owner name.
        type: str
      group:
        description: Group name.
        type: str
attributes:
  check_mode:
    support: full
    description: Reads only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff; the writers the role runs on RV(needs) show theirs.
notes:
  - Every comparison errs towards "differs"; a writer that then finds nothing to change reports ok.
seealso:
  - module: gpufleet.llm_server.package_state
"""

EXAMPLES = r"""
- name: Read the toolkit's packages, alternative, link, profile script and nvcc in one call
  gpufleet.llm_server.cuda_toolkit_state:
    packages: [cuda-toolkit-13-0]
    home: /usr/local/cuda-13.0
    profile:
      path: /etc/profile.d/gpufleet-cuda.sh
      content: "{{ lookup('ansible.builtin.template', 'cuda.sh.j2') }}"
      mode: "0644"
      owner: root
      group: root
  register: cuda_state
"""

RETURN = r"""
needs:
  description: What the role has to change.
  returned: always
  type: dict
  contains:
    packages:
      description: Some of O(packages) are missing (RV(missing)).
      type: bool
    alternative:
      description: The C(cuda) alternative is registered and does not point at O(home).
      type: bool
    link:
      description: No alternative is registered and O(link) is not a link to O(home).
      type: bool
    profile:
      description: The profile script differs from O(profile).
      type: bool
  sample: {packages: false, alternative: false, link: false, profile: false}
missing:
  description: The requests of O(packages) that are not installed (or that only apt can decide), in order.
  returned: always
  type: list
  elements: str
  sample: []
installed:
  description: The requests installed as requested, with the installed version.
  returned: always
  type: dict
  sample: {cuda-toolkit-13-0: 13.0.2-1}
reasons:
  description: Why each need is set (per package, and the profile's and the link's differences).
  returned: always
  type: dict
  sample: {packages: {}, profile: [content differs], link: []}
alternative:
  description: Whether dpkg has a C(cuda) alternative and its current value.
  returned: always
  type: dict
  sample: {registered: true, value: /usr/local/cuda-13.0}
nvcc:
  description: The answer of C(nvcc --version) (rc 2 and no output when O(home)'s nvcc does not exist), and its release.
  returned: always
  type: dict
  sample: {rc: 0, stdout: "Cuda compilation tools, release 13.0, V13.0.88", stderr: "", release: "13.0"}
resources:
  description: What was read that the role manages (dpkg's database, the alternative or the link, the script, nvcc).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils.cuda_toolkit_state import read
from ansible_collections.gpufleet.llm_server.plugins.module_utils.package_state import DPKG_STATUS


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="list", elements="str", required=True),
            home=dict(type="path", required=True),
            link=dict(type="path", default="/usr/local/cuda"),
            profile=dict(type="dict", required=True, options=dict(
                path=dict(type="path", required=True),
                content=dict(type="str", required=True),
                mode=dict(type="str"),
                owner=dict(type="str"),
                group=dict(type="str"),
            )),
            dpkg_status=dict(type="path", default=DPKG_STATUS),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = read(params["packages"], params["home"], params["link"], params["profile"],
                      module.run_command, dpkg_status=params["dpkg_status"])
    except ValueError as exc:  # a mode that is not octal
        module.fail_json(msg="cuda_toolkit_state: profile.mode: %s" % exc)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
