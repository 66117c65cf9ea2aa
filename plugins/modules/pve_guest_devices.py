#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pve_guest_devices
short_description: Check that a Proxmox VM or container is configured for the GPUs a switch moves
version_added: "0.1.0"
description:
  - Reads the guest's configuration with C(qm config VMID) or C(pct config CTID) and compares it with
    O(devices), the PCI functions the GPU switch moves (as planned by M(gpufleet.llm_server.pci_driver_bind)).
  - For a VM (O(guest=vm)) - every moved GPU must be named by a C(hostpciN) entry (C(host=) ids, with or
    without function, C(;) lists, or C(mapping=) resolved through the PCI mapping file for this node), and
    every NVIDIA function a C(hostpciN) entry names must be moved (Proxmox would otherwise take it from
    the host itself when the VM starts).
  - For a container (O(guest=ct)) - C(/dev/nvidiactl), C(/dev/nvidia-uvm) and the C(/dev/nvidiaN) node of
    every moved GPU must be passed in (C(devN) entries or raw C(lxc.mount.entry) lines). C(N) is the GPU's
    number under the nvidia driver; for GPUs not on nvidia yet only the count of C(/dev/nvidiaN) nodes is
    checked (RV(unnumbered)).
  - Fails, naming each mismatch and the config line to fix, unless O(fail_on_mismatch=false). Changes nothing.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.host_roots
  - gpufleet.llm_server.attributes.read_only
options:
  guest:
    description: V(vm) (C(qm)) or V(ct) (C(pct)).
    type: str
    choices: [vm, ct]
    required: true
  id:
    description: Proxmox id of the guest.
    type: int
    required: true
  devices:
    description: PCI addresses the switch moves (GPUs and their IOMMU group companions).
    type: list
    elements: str
    required: true
  command:
    description: The C(qm) or C(pct) command (default by O(guest)).
    type: str
  mapping_file:
    description: Proxmox's PCI resource mappings (for C(hostpciN) entries with C(mapping=)).
    type: path
    default: /etc/pve/mapping/pci.cfg
  node:
    description: Proxmox node name whose C(map) entries apply (default the host's short name, as Proxmox uses).
    type: str
  fail_on_mismatch:
    description: Fail when the config does not match O(devices).
    type: bool
    default: true
notes:
  - A GPU's device number comes from C(driver/nvidia/gpus/ADDR/information) under O(procfs_root).
seealso:
  - module: gpufleet.llm_server.pci_driver_bind
attributes:
  platform:
    support: full
    platforms: linux
    description: Runs Proxmox's qm / pct and reads Linux sysfs and procfs.
"""

EXAMPLES = r"""
- name: Check the VM passes through exactly the GPUs that move
  gpufleet.llm_server.pve_guest_devices:
    guest: vm
    id: 131
    devices: "{{ plan.devices | map(attribute='address') | list }}"
"""

RETURN = r"""
matched:
  description: The config names what the switch moves.
  returned: always
  type: bool
problems:
  description: One sentence per mismatch.
  returned: always
  type: list
  elements: str
entries:
  description: For a VM, each C(hostpciN) entry with the PCI functions it can take.
  returned: when guest is vm
  type: list
  elements: dict
functions:
  description: For a VM, every PCI function its C(hostpciN) entries name.
  returned: when guest is vm
  type: list
  elements: str
nodes:
  description: For a container, the device nodes its config passes in, each with the config key that does it.
  returned: when guest is ct
  type: dict
unnumbered:
  description: For a container, moved GPUs without a C(/dev/nvidiaN) number yet (not on the nvidia driver).
  returned: when guest is ct
  type: list
  elements: str
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.pve_guest import (
    GuestConfigError, compare_ct, compare_vm, ct_device_nodes, parse_config, parse_pci_mapping, vm_functions)


def main():
    module = AnsibleModule(
        argument_spec={
            "guest": {"type": "str", "choices": ["vm", "ct"], "required": True},
            "id": {"type": "int", "required": True},
            "devices": {"type": "list", "elements": "str", "required": True},
            "command": {"type": "str"},
            "mapping_file": {"type": "path", "default": "/etc/pve/mapping/pci.cfg"},
            "node": {"type": "str"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
            "fail_on_mismatch": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    guest = params["guest"]
    command = params["command"] or ("qm" if guest == "vm" else "pct")
    variable = "gpu_passthrough_vmid" if guest == "vm" else "gpu_passthrough_ctid"
    rc, out, err = module.run_command([command, "config", str(params["id"])])
    if rc != 0:
        module.fail_json(msg="`%s config %s` failed (rc=%s): %s. Check %s=%s." % (
            command, params["id"], rc, (err or out).strip()[:400], variable, params["id"]))
    config = parse_config(out)
    devices = [str(d).strip().lower() for d in params["devices"]]
    result = {"changed": False}
    what = "%s %s (`%s config %s`)" % ("VM" if guest == "vm" else "container", params["id"], command, params["id"])
    try:
        if guest == "vm":
            mapping_text = ""
            if any("mapping=" in v for k, vals in config.items() if k.startswith("hostpci") for v in vals):
                try:
                    with open(params["mapping_file"], "r", encoding="utf-8") as handle:
                        mapping_text = handle.read()
                except OSError as exc:
                    module.fail_json(msg="%s uses PCI mappings, but %s cannot be read: %s" % (
                        what, params["mapping_file"], exc))
            node = params["node"] or socket.gethostname().split(".")[0]
            entries, functions = vm_functions(config, params["sysfs_root"], parse_pci_mapping(mapping_text), node)
            problems = compare_vm(devices, functions, params["sysfs_root"])
            result.update(entries=entries, functions=functions)
            fix = ("Fix the VM's hostpci entries (qm set %s --hostpciN ...) or gpu_passthrough_devices so both name "
                   "the same GPUs" % params["id"])
        else:
            nodes = ct_device_nodes(config)
            problems, unnumbered = compare_ct(devices, nodes, params["sysfs_root"], params["procfs_root"])
            result.update(nodes=nodes, unnumbered=unnumbered)
            fix = ("Pass the GPUs' device nodes to the container (pct set %s --devN /dev/nvidiaN, plus /dev/nvidiactl "
                   "and /dev/nvidia-uvm) or fix gpu_passthrough_devices" % params["id"])
    except GuestConfigError as exc:
        module.fail_json(msg="%s: %s." % (what, exc), matched=False, problems=[str(exc)])
    result.update(matched=not problems, problems=problems)
    if problems and params["fail_on_mismatch"]:
        module.fail_json(msg="%s does not match the GPUs this switch moves (%s): %s. %s."
                         % (what, ", ".join(devices), "; ".join(problems), fix), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
