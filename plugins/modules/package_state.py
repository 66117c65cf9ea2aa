#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: package_state
short_description: Say which Debian packages are not installed yet, from dpkg's status database alone
version_added: "0.2.0"
description:
  - Read-only. Reads C(/var/lib/dpkg/status) directly (no apt, no python3-apt, no process) and returns the
    requested packages that are not fully installed (RV(missing)), so that an M(ansible.builtin.apt)
    C(state=present) task, which parses every apt index, runs only when something is missing.
  - A request counts as installed only when M(ansible.builtin.apt) would leave it alone; in any doubt it is
    reported missing and the apt task decides as it would without this module. Installed means dpkg's
    state C(installed) with the C(ok) flag (a held package counts). A bare name must be installed for the
    native architecture (that of dpkg's own package) or C(all); V(name:arch) for that architecture;
    V(name=version) in exactly that version.
  - Missing, whatever dpkg says, are names dpkg does not know (virtual packages included), half-installed
    or half-configured packages, version patterns (V(name=1.2*), apt may move to a newer match), apt's
    V(name>=version), name globs, C(.deb) paths and anything not rendered (V(linux-modules-{kernel_flavor})).
  - When a name is installed for several architectures, the status parser keeps one entry, so a
    V(name:arch) request for the other architecture may be reported missing (apt then decides).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.dpkg_status
  - gpufleet.llm_server.attributes.read_only
options:
  names:
    description:
      - The package requests, as given to M(ansible.builtin.apt)'s O(ansible.builtin.apt#module:name).
      - Each is returned verbatim in RV(missing) or RV(installed), in the order given, once.
    type: list
    elements: str
    required: true
    aliases: [name]
notes:
  - Reads in tens of milliseconds what the apt task takes one to two seconds to decide (it parses every index).
  - "Guard the apt task with C(when: result.missing | length > 0) and pass it the same names: in check mode
    the apt task then still runs whenever something is missing and reports what it would install."
seealso:
  - module: ansible.builtin.apt
  - module: ansible.builtin.package_facts
"""

EXAMPLES = r"""
- name: Read which of the build's OS packages are missing (read-only, also in check mode)
  gpufleet.llm_server.package_state:
    names: "{{ sglang_build_os_packages }}"
  register: build_packages

- name: Install the OS packages the build needs
  ansible.builtin.apt:
    name: "{{ sglang_build_os_packages }}"
    state: present
    update_cache: true
    cache_valid_time: 3600
  when: build_packages.missing | length > 0

- name: Pinned versions are compared exactly
  gpufleet.llm_server.package_state:
    names:
      - libnccl2=2.27.3-1+cuda12.9
      - libnccl-dev=2.27.3-1+cuda12.9
  register: nccl
"""

RETURN = r"""
missing:
  description: The requests that are not installed (or cannot be decided without apt), verbatim, in the order given.
  returned: always
  type: list
  elements: str
  sample: [python3-venv]
installed:
  description: The requests that are installed as requested, with the installed version.
  returned: always
  type: dict
  sample: {git: "1:2.39.5-0+deb12u2"}
reasons:
  description: Why each request of RV(missing) is missing.
  returned: always
  type: dict
  sample: {python3-venv: "not known to dpkg (not installed, or a virtual package name; apt decides)"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.llm_server.plugins.module_utils.package_state import (
    DPKG_STATUS,
    missing_packages,
    read_status,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True, aliases=["name"]),
            dpkg_status=dict(type="path", default=DPKG_STATUS),
        ),
        supports_check_mode=True,
    )
    missing, installed, reasons = missing_packages(module.params["names"], read_status(module.params["dpkg_status"]))
    module.exit_json(changed=False, missing=missing, installed=installed, reasons=reasons)


if __name__ == "__main__":
    main()
