#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: pci_driver_bind
short_description: Move NVIDIA GPUs (and their IOMMU group companions) between vfio-pci, nvidia and no driver
version_added: "0.1.0"
description:
  - Binds PCI functions to a kernel driver through sysfs, the way the kernel documents it
    (C(driver_override), C(unbind), C(drivers_probe), then C(bind) when probing did not attach it), and
    verifies each device ends up where asked.
  - By default every function in the IOMMU group of a listed device moves too (the GPU's HDMI audio
    function); PCI bridges in the group are left alone and a non-NVIDIA function in the group is
    refused unless listed explicitly.
  - Moving to V(nvidia) clears C(driver_override) so the GPU returns to nvidia and its audio function to
    its own driver (snd_hda_intel when loaded); then makes sure C(nvidia_uvm) is loaded and
    C(/dev/nvidiactl), C(/dev/nvidia-uvm) and C(/dev/nvidiaN) exist (C(nvidia-modprobe) creates them).
  - Refuses, before any change, to move a device a process holds open (C(/dev/nvidiaN) for nvidia,
    C(/dev/vfio/GROUP) for vfio-pci, i.e. a running VM), naming the processes, unless O(force=true).
  - If a step fails half-way, every device touched is put back on its previous driver and override,
    and the module fails with what happened to each device. A device is only left without a driver
    when O(driver=none) asks for it.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.llm_server.host_roots
  - gpufleet.llm_server.host_roots.dev
options:
  devices:
    description:
      - PCI addresses (C(0000:01:00.0)) to move, or V(all) for every NVIDIA display/3D function.
    type: list
    elements: str
    required: true
  driver:
    description:
      - V(vfio-pci) for passthrough to a VM; V(nvidia) for the host (or an LXC container);
        V(none) unbinds and keeps the device unbound (C(driver_override) C(none)).
    type: str
    required: true
    choices: [vfio-pci, nvidia, none]
  include_iommu_group:
    description: Move the other functions of each device's IOMMU group too.
    type: bool
    default: true
  force:
    description: Move devices even when processes hold them (those processes will lose the GPU).
    type: bool
    default: false
  persist:
    description:
      - Also keep the choice across reboots, the way C(driverctl) does it - one file
        C(<persist_dir>/pci-<address>) holding the driver name (C(vfio-pci) or C(none)); moving to
        V(nvidia) removes the file. driverctl's udev rule applies these files at boot, so
        C(driverctl) must be installed for them to take effect (a warning says so when it is not).
      - With V(false) the binding lasts until the next reboot.
    type: bool
    default: false
  persist_dir:
    description: driverctl's override directory.
    type: path
    default: /etc/driverctl.d
  settle_timeout:
    description: Seconds to wait for each unbind/bind to show in sysfs before declaring the step failed.
    type: float
    default: 10.0
notes:
  - Run as root on the machine that owns the GPUs (the Proxmox host for VM passthrough).
  - C(driverctl) was not made a requirement because it is missing from minimal installs and the
    move itself needs only sysfs; the persisted files use its format so installing it later applies them.
  - Reads process fds and C(driver/nvidia) under O(procfs_root), and the C(nvidiaN) and C(vfio/GROUP) device nodes under O(dev_root).
seealso:
  - module: gpufleet.llm_server.gpu_info
  - name: Kernel documentation on driver_override
    description: sysfs ABI of PCI devices.
    link: https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci
attributes:
  check_mode:
    support: full
    description: Reports the plan (each device's driver before and after) without writing anything.
  diff_mode:
    support: full
    description: Shows driver and override per device before and after.
  platform:
    support: full
    platforms: linux
    description: Writes Linux PCI sysfs control files.
"""

EXAMPLES = r"""
- name: All GPUs (and their HDMI audio functions) to vfio-pci for a VM
  gpufleet.llm_server.pci_driver_bind:
    devices: [all]
    driver: vfio-pci

- name: Back to the nvidia driver for the LXC container
  gpufleet.llm_server.pci_driver_bind:
    devices: [all]
    driver: nvidia

- name: One GPU to vfio-pci, kept across reboots through driverctl's files
  gpufleet.llm_server.pci_driver_bind:
    devices: ["0000:41:00.0"]
    driver: vfio-pci
    persist: true
"""

RETURN = r"""
devices:
  description: Each device considered, with its driver before and after.
  returned: always
  type: list
  elements: dict
  contains:
    address: {description: PCI address., type: str, sample: "0000:01:00.0"}
    kind: {description: 'One of gpu, audio, other.', type: str, sample: gpu}
    reason: {description: C(requested) or C(iommu_group)., type: str}
    action: {description: 'C(none), C(override) (only driver_override changes) or C(rebind).', type: str}
    before: {description: "driver and driver_override before.", type: dict, sample: {driver: nvidia, driver_override: null}}
    after: {description: "driver and driver_override after (in check mode, the planned state).", type: dict}
    restored:
      description: On failure, whether the device is back on its previous driver.
      type: bool
      returned: failure
    error: {description: 'On failure, what is wrong with this device.', type: str, returned: failure}
operations:
  description: The sysfs writes made, in order (op, address, value).
  returned: success
  type: list
  elements: list
modules_loaded:
  description: Kernel modules and device-node commands run (modprobe vfio-pci, nvidia-uvm, nvidia-modprobe).
  returned: always
  type: list
  elements: str
persisted:
  description: driverctl override files written or removed.
  returned: when persist
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.llm_server.plugins.module_utils.pci_bind import (
    BindError, Binder, persist_file, persist_wanted)


def render(devices, key):
    lines = []
    for entry in devices:
        state = entry.get(key) or {}
        lines.append("%s (%s): driver=%s override=%s" % (
            entry["address"], entry["kind"], state.get("driver"), state.get("driver_override")))
    return "\n".join(lines) + "\n"


def planned_after(entry):
    if entry["action"] == "none":
        return dict(entry["before"])
    driver = entry["want_driver"]
    if driver == "*host*":
        driver = entry["before"]["driver"] if entry["before"]["driver"] != "vfio-pci" else "(its default driver)"
    return {"driver": driver, "driver_override": entry["want_override"]}


def persist(module, devices, target):
    changed = []
    directory = module.params["persist_dir"]
    for entry in devices:
        path = persist_file(directory, entry["address"])
        want = persist_wanted(target, entry["kind"])
        try:
            with open(path, "r", encoding="utf-8") as handle:
                have = handle.read().strip()
        except OSError:
            have = None
        if have == want:
            continue
        changed.append(path)
        if module.check_mode:
            continue
        if want is None:
            os.unlink(path)
            continue
        os.makedirs(directory, exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(want + "\n")
        module.atomic_move(tmp, path)
    if changed and not module.get_bin_path("driverctl"):
        module.warn("persist: wrote %s, but driverctl is not installed: install it (apt install driverctl) so the "
                    "overrides apply at boot" % ", ".join(changed))
    return changed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            devices=dict(type="list", elements="str", required=True),
            driver=dict(type="str", required=True, choices=["vfio-pci", "nvidia", "none"]),
            include_iommu_group=dict(type="bool", default=True),
            force=dict(type="bool", default=False),
            persist=dict(type="bool", default=False),
            persist_dir=dict(type="path", default="/etc/driverctl.d"),
            settle_timeout=dict(type="float", default=10.0),
            sysfs_root=dict(type="path", default="/sys"),
            procfs_root=dict(type="path", default="/proc"),
            dev_root=dict(type="path", default="/dev"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["settle_timeout"] <= 0:
        module.fail_json(msg="settle_timeout=%s must be a positive number of seconds (default 10)." % p["settle_timeout"])
    if not os.path.isdir(os.path.join(p["sysfs_root"], "bus", "pci", "devices")):
        module.fail_json(msg="sysfs_root=%s has no bus/pci/devices: not a sysfs tree with PCI. Use /sys." % p["sysfs_root"])

    def run(argv):
        binary = module.get_bin_path(argv[0])
        if binary is None:
            return 127, "", "%s is not installed" % argv[0]
        return module.run_command([binary] + argv[1:])

    binder = Binder(p["sysfs_root"], p["procfs_root"], p["dev_root"], run=run, settle_timeout=p["settle_timeout"])
    result = dict(changed=False, devices=[], modules_loaded=[], operations=[])
    try:
        plan = binder.plan(p["devices"], p["driver"], include_iommu_group=p["include_iommu_group"], force=p["force"])
    except BindError as exc:
        module.fail_json(msg=str(exc), devices=exc.devices, **{k: v for k, v in result.items() if k != "devices"})
    changes = [e for e in plan["devices"] if e["action"] != "none"]
    result["modules_loaded"] = ["modprobe %s" % m for m in plan["modules_to_load"]]
    if module.check_mode:
        for entry in plan["devices"]:
            entry["after"] = planned_after(entry)
    else:
        try:
            binder.apply(plan)
        except BindError as exc:
            module.fail_json(msg=str(exc), devices=exc.devices, operations=binder.operations,
                             modules_loaded=result["modules_loaded"], changed=True)
        result["operations"] = [list(op) for op in binder.operations]
    if p["driver"] == "nvidia":
        try:
            actions = binder.ensure_nvidia_runtime(check_mode=module.check_mode,
                                                   nvidia_modprobe=module.get_bin_path("nvidia-modprobe"))
        except BindError as exc:
            module.fail_json(msg="GPUs are on nvidia, but: %s" % exc, devices=plan["devices"], changed=bool(changes))
        result["modules_loaded"] += actions
    for entry in plan["devices"]:
        entry.pop("want_driver", None)
        entry.pop("want_override", None)
    result["devices"] = plan["devices"]
    result["changed"] = bool(changes) or bool(result["modules_loaded"])
    if p["persist"]:
        result["persisted"] = persist(module, plan["devices"], p["driver"])
        result["changed"] = result["changed"] or bool(result["persisted"])
    if module._diff:
        result["diff"] = {"before": render(plan["devices"], "before"), "after": render(plan["devices"], "after"),
                          "before_header": "PCI drivers", "after_header": "PCI drivers"}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
